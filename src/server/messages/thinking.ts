/**
 * Thinking blocks that come back signed: the signature this gateway gave a thinking block (its text sealed with
 * the gateway's key) is opened, so the model sees its earlier reasoning as it wrote it, whatever the client
 * shows or keeps of the text.
 */
import { isRecord } from '../../base/records'
import { HttpError } from '../../http/errors'
import type { Item } from '../pipeline/prepared'
import { OVERSIZED, type Sealer } from '../stores/seal'

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
