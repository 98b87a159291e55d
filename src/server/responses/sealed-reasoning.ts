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
import type { Gateway } from '../pipeline/context'
import { holdsSealedReasoning, isSealedReasoningItem } from '../pipeline/continues'
import { OVERSIZED, type Sealer } from '../stores/seal'

type Item = Record<string, unknown>

/** What a reasoning item seals: version 1 holds its text. */
interface SealedReasoning {
  text: string
}

/** A reasoning item's `encrypted_content`: its text sealed; null where it is over the seal's bounds. */
function sealReasoning(sealer: Sealer, text: string, owner: string | null = null): string | null {
  return sealer.seal('reasoning', { text } satisfies SealedReasoning, owner)
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

/** Seals reasoning with the gateway's key, for the request's caller (null: over the seal's bounds). */
export function reasoningSealer(gateway: Gateway): (text: string) => string | null {
  return (text) => sealReasoning(gateway.sealer, text, gateway.caller?.name ?? null)
}
