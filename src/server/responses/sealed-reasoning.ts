/**
 * Reasoning for clients that keep no responses here (`store: false` with `include:
 * ['reasoning.encrypted_content']`, as Codex sends every turn; OpenAI's "stateless" use of reasoning models):
 * each reasoning item carries its chain of thought sealed in `encrypted_content` (seal.ts, the gateway's key),
 * and a later request that sends the item back has it opened, so the model sees its earlier reasoning within a
 * turn, rendered as the whole conversation sent with it would be. A client may drop or empty the item's readable
 * `content` and `summary`: the sealed text is what is rendered. Content this gateway did not seal (another
 * server's, another key's, altered) is a 400 naming the item, never rendered as nothing.
 */
import { isRecord } from '../../base/records'
import { HttpError } from '../../http/errors'
import { OVERSIZED, type Sealer } from '../stores/seal'

type Item = Record<string, unknown>

/** What a reasoning item seals: version 1 holds its text. */
interface SealedReasoning {
  text: string
}

/** A reasoning item's `encrypted_content`: its text sealed; null where it is over the seal's bounds. */
export function sealReasoning(sealer: Sealer, text: string, owner: string | null = null): string | null {
  return sealer.seal('reasoning', { text } satisfies SealedReasoning, owner)
}

function isSealedReasoningItem(item: unknown): item is Item & { encrypted_content: string } {
  return isRecord(item) && item.type === 'reasoning' && typeof item.encrypted_content === 'string'
}

/** Whether a Responses body's input holds a reasoning item with sealed content (which `openReasoning` must open). */
export function holdsSealedReasoning(body: Item): boolean {
  return Array.isArray(body.input) && body.input.some(isSealedReasoningItem)
}

/**
 * The body with each sealed reasoning item opened: its `content` the sealed text (`reasoning_text`), its
 * `encrypted_content` gone. The body itself when it holds none.
 */
export function openReasoning(sealer: Sealer, body: Item, owner: string | null = null): Item {
  if (!holdsSealedReasoning(body)) return body
  // One item sent many times would open many times: the request's items together open to one item's bound.
  let openedBytes = 0
  const input = (body.input as unknown[]).map((item, i) => {
    if (!isSealedReasoningItem(item)) return item
    const opened = sealer.open('reasoning', item.encrypted_content, owner)
    if (
      opened === OVERSIZED ||
      (isRecord(opened) && typeof opened.text === 'string' && (openedBytes += opened.text.length) > sealer.maxOpenedBytes)
    ) {
      const param = `input[${i}].encrypted_content`
      throw new HttpError(400, `the request's sealed reasoning opens to more than ${sealer.maxOpenedBytes} bytes, this gateway's bound`, {
        param,
        code: 'sealed-content-too-large',
      })
    }
    if (!isRecord(opened) || typeof opened.text !== 'string') {
      const param = `input[${i}].encrypted_content`
      throw new HttpError(
        400,
        `${param} is not reasoning this gateway sealed (another server's, another key's, altered or cut): send the item as this gateway returned it, or without encrypted_content`,
        { param, code: 'invalid_encrypted_content' },
      )
    }
    const { encrypted_content: _sealed, ...rest } = item
    return { ...rest, content: [{ type: 'reasoning_text', text: opened.text }] }
  })
  return { ...body, input }
}

/**
 * Most distinct thinking signatures one Messages request may have opened: each costs a decryption (about 15 µs),
 * and a 4 MiB body could carry tens of thousands. A conversation of more assistant turns than this is compacted
 * first, or sent without signatures.
 */
const MAX_SIGNATURES = 1024

/**
 * A Messages body with each thinking block this gateway signed opened: its `thinking` the text its `signature`
 * seals (a client that shows thinking `omitted` sends the block back with no text). A signature that does not
 * open (another server's, as when a conversation moves here) leaves the block as the client sent it: its text is
 * what is read. A signature sent many times is opened once; the opened texts together are held to the sealer's
 * bound, as Responses' are, and the signatures to `MAX_SIGNATURES`.
 */
export function openThinking(sealer: Sealer, body: Item, owner: string | null = null): Item {
  if (!Array.isArray(body.messages)) return body
  let openedBytes = 0
  let changed = false
  const seen = new Map<string, unknown>()
  const messages = body.messages.map((message, i) => {
    if (!isRecord(message) || message.role !== 'assistant' || !Array.isArray(message.content)) return message
    const content = message.content.map((block, j) => {
      if (!isRecord(block) || block.type !== 'thinking' || typeof block.signature !== 'string' || block.signature === '') return block
      if (!seen.has(block.signature) && seen.size >= MAX_SIGNATURES) {
        const param = `messages[${i}].content[${j}].signature`
        throw new HttpError(400, `${param}: a request may send back at most ${MAX_SIGNATURES} signed thinking blocks`, {
          param,
          code: 'sealed-content-too-large',
        })
      }
      const opened = seen.get(block.signature) ?? sealer.open('reasoning', block.signature, owner)
      seen.set(block.signature, opened)
      if (
        opened === OVERSIZED ||
        (isRecord(opened) && typeof opened.text === 'string' && (openedBytes += opened.text.length) > sealer.maxOpenedBytes)
      ) {
        const param = `messages[${i}].content[${j}].signature`
        throw new HttpError(
          400,
          `${param}: the request's signed thinking opens to more than ${sealer.maxOpenedBytes} bytes, this gateway's bound`,
          {
            param,
            code: 'sealed-content-too-large',
          },
        )
      }
      if (!isRecord(opened) || typeof opened.text !== 'string') return block
      changed = true
      return { ...block, thinking: opened.text }
    })
    return { ...message, content }
  })
  return changed ? { ...body, messages } : body
}
