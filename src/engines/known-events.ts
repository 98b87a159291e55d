/**
 * Reading an engine's commonest event without `JSON.parse`: an event that only carries the next ids is, byte
 * for byte, the one before it but for the ids (vLLM writes `{"id":"cmpl-…",…,"token_ids":[200005]}]}` for every
 * token, `text` empty as the gateway asks). Parsing it again was the largest cost per token left on the
 * gateway's hot path (docs/PERFORMANCE.md). A reader that parsed such an event teaches its text to a
 * `KnownEventShape`, which then reads any event equal to it around the ids by slicing the ids out.
 *
 * Sound by construction: the text learnt is valid JSON whose one `"<field>":[` is the ids' array (a key: inside
 * a JSON string the quotes would be escaped), so the same text with other ids (plain decimal integers, as JSON
 * writes them) parses to the same object with only those ids changed; anything else is not matched, and the
 * reader parses it.
 */
import { isTokenId } from './request'

/** Plain JSON integers separated by commas: what a JSON writer makes of an array of ids. */
const IDS = /^(?:0|[1-9]\d{0,9})(?:,(?:0|[1-9]\d{0,9}))*$/

export class KnownEventShape {
  /** The learnt event's text up to and including `"<field>":[`, and from the `]` that closes the ids on; '' when none. */
  private before = ''
  private after = ''
  private readonly key: string

  constructor(field: string) {
    this.key = `"${field}":[`
  }

  /** `data` is an event the reader parsed and read as only `ids` (nothing else in it changes what it reads). */
  learn(data: string, ids: readonly number[]): void {
    const at = data.indexOf(this.key)
    if (at < 0 || data.indexOf(this.key, at + 1) >= 0) return
    const start = at + this.key.length
    const end = data.indexOf(']', start)
    if (end < 0 || !sameIds(data.slice(start, end), ids)) return
    this.before = data.slice(0, start)
    this.after = data.slice(end)
  }

  /** The ids of `data` when it is the learnt event but for them; null when it is not (parse it). */
  ids(data: string): number[] | null {
    const { before, after } = this
    if (before === '' || data.length <= before.length + after.length || !data.startsWith(before) || !data.endsWith(after)) return null
    const text = data.slice(before.length, data.length - after.length)
    if (!IDS.test(text)) return null
    const ids: number[] = []
    for (const part of text.split(',')) {
      const id = Number(part)
      if (!isTokenId(id)) return null
      ids.push(id)
    }
    return ids
  }
}

function sameIds(text: string, ids: readonly number[]): boolean {
  if (!IDS.test(text)) return false
  const parts = text.split(',')
  return parts.length === ids.length && parts.every((part, i) => Number(part) === ids[i])
}
