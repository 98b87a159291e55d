/**
 * Finds Harmony markers in text that arrives in chunks cut anywhere (`"<|chan"` + `"nel|>analysis"`).
 *
 * Only the markers that steer the parser are recognised: `<|start|>`, `<|channel|>`, `<|message|>`, `<|end|>`,
 * `<|return|>`, `<|call|>`. Everything else is text — `<|constrain|>` too, which the header rules read as
 * text, exactly as they read the `<|constrain|>` token's bytes. The scanner holds back only a suffix of a
 * chunk that could still become a marker (or the first half of a surrogate pair), and releases it as text as soon as it cannot; a lone `<|` or
 * `<|example|>` is text. Each character is looked at a bounded number of times: linear in the input.
 */

import { CALL, CHANNEL, END, MESSAGE, RETURN, START } from '../../backend/tokens'

/** Marker strings and their token ids (o200k_harmony). */
const MARKERS: ReadonlyMap<string, number> = new Map([
  ['<|start|>', START],
  ['<|channel|>', CHANNEL],
  ['<|message|>', MESSAGE],
  ['<|end|>', END],
  ['<|return|>', RETURN],
  ['<|call|>', CALL],
])

const LONGEST = Math.max(...[...MARKERS.keys()].map((m) => m.length))
const MARKER_LENGTH: ReadonlyMap<number, number> = new Map([...MARKERS].map(([marker, id]) => [id, marker.length]))

/** The id of the marker that starts at `at`, if one does. */
function markerAt(text: string, at: number): number | undefined {
  for (const [marker, id] of MARKERS) if (text.startsWith(marker, at)) return id
  return undefined
}

export type Piece = { marker: number } | { text: string }

/** Whether `s` (starting with `<|`) is a proper prefix of some marker. */
function couldBecomeMarker(s: string): boolean {
  for (const marker of MARKERS.keys()) if (marker.length > s.length && marker.startsWith(s)) return true
  return false
}

export class MarkerScanner {
  /** A suffix held back from the last chunk: a proper prefix of a marker. */
  private held = ''

  push(chunk: string): Piece[] {
    const text = this.held + chunk
    this.held = ''
    const pieces: Piece[] = []
    let from = 0 // start of the text not yet emitted
    let at = text.indexOf('<|')
    while (at >= 0) {
      // Compare the few marker strings at this position: bounded work per `<|`, so linear overall
      // (searching for the closing `|>` instead would scan to the end of the chunk each time).
      const id = markerAt(text, at)
      if (id !== undefined) {
        const end = at + MARKER_LENGTH.get(id)!
        if (at > from) pieces.push({ text: text.slice(from, at) })
        pieces.push({ marker: id })
        from = end
        at = text.indexOf('<|', from)
        continue
      }
      // Not a marker here. At the end of the chunk it may still become one: hold it back.
      if (text.length - at < LONGEST && couldBecomeMarker(text.slice(at))) {
        if (at > from) pieces.push({ text: text.slice(from, at) })
        this.held = text.slice(at)
        return pieces
      }
      at = text.indexOf('<|', at + 1)
    }
    // A chunk ending in `<` may be cut inside `<|`; one ending in a high surrogate, inside a character.
    const last = text.charCodeAt(text.length - 1)
    const tailStart = last === 0x3c || (last >= 0xd800 && last <= 0xdbff) ? text.length - 1 : text.length
    if (tailStart > from) pieces.push({ text: text.slice(from, tailStart) })
    this.held = text.slice(tailStart)
    return pieces
  }

  /** The end of the input: whatever was held back is text. */
  finish(): Piece[] {
    const held = this.held
    this.held = ''
    return held === '' ? [] : [{ text: held }]
  }
}
