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

  /**
   * When `data` is the learnt event but for its ids: appends them to `into` and returns how many; 0 when it is
   * not (parse it), `into` left as it was. Appending spares an array per event.
   */
  readInto(data: string, into: number[]): number {
    const { before, after } = this
    const end = data.length - after.length
    // Sliced and compared, not startsWith/endsWith: on V8 (Node 20) those took 1.3 us an event on the sliced
    // strings an SSE read is made of, this 0.15.
    if (before === '' || end <= before.length || data.slice(0, before.length) !== before || data.slice(end) !== after) return 0
    return appendIds(data, before.length, end, into)
  }
}

const COMMA = 44
const ZERO = 48
const NINE = 57

/**
 * Appends the ids written in `text[start, end)` to `into`, as JSON writes integers (no sign, no leading zero, no
 * space), each a token id, and returns how many; 0 for anything else, `into` left as it was. Read digit by
 * digit: this runs for every event of a stream.
 */
function appendIds(text: string, start: number, end: number, into: number[]): number {
  const mark = into.length
  let id = 0
  let digits = 0
  for (let at = start; at <= end; at++) {
    const code = at === end ? COMMA : text.charCodeAt(at)
    if (code === COMMA) {
      if (digits === 0 || !isTokenId(id)) {
        into.length = mark
        return 0
      }
      into.push(id)
      id = 0
      digits = 0
    } else if (code >= ZERO && code <= NINE && !(digits === 1 && id === 0) && digits < 10) {
      // A leading zero is JSON only alone; past ten digits no id is left (the vocabulary is far smaller).
      id = id * 10 + (code - ZERO)
      digits++
    } else {
      into.length = mark
      return 0
    }
  }
  return into.length - mark
}

function sameIds(text: string, ids: readonly number[]): boolean {
  const read: number[] = []
  return appendIds(text, 0, text.length, read) === ids.length && read.every((id, i) => id === ids[i])
}
