/**
 * Writes a batch's results in the compact format (`../compact.ts`). Mirrors `write_records` in
 * crate/core/src/compact.rs.
 */
import { COMPACT_RECORD_SLOTS, type NameTable, RECORD_CLOSE, RECORD_FIELDS, RECORD_OPEN, RECORD_TEXT } from '../compact'
import { EVENT_OPEN, EVENT_TEXT } from '../protocol'
import type { BatchOutput } from './output'

/**
 * Writes the records of `output` at `out[at..]`, with text offsets shifted by `textBase` (where this
 * output's text starts in the string returned for the whole call). Returns the end of what was written.
 * The caller sizes `out` (`compactCapacity`).
 */
export function writeRecords(output: BatchOutput, names: NameTable, out: Uint32Array, at: number, textBase: number): number {
  const { events, eventSlots, headers } = output
  let header = 0
  let textStart = textBase
  for (let i = 0; i < eventSlots; i += 3) {
    const kind = events[i]
    const message = events[i + 1]
    if (kind === EVENT_OPEN) {
      const h = headers[header++]
      out[at] = RECORD_OPEN
      out[at + 1] = message
      out[at + 2] = names.intern(h.role)
      out[at + 3] = names.intern(h.name)
      out[at + 4] = RECORD_FIELDS
      out[at + 5] = names.intern(h.channel)
      out[at + 6] = names.intern(h.recipient)
      out[at + 7] = names.intern(h.contentType)
      at += 2 * COMPACT_RECORD_SLOTS
    } else if (kind === EVENT_TEXT) {
      out[at] = RECORD_TEXT
      out[at + 1] = message
      out[at + 2] = textStart
      textStart = textBase + events[i + 2]
      out[at + 3] = textStart
      at += COMPACT_RECORD_SLOTS
    } else {
      out[at] = RECORD_CLOSE
      out[at + 1] = message
      out[at + 2] = events[i + 2]
      out[at + 3] = 0
      at += COMPACT_RECORD_SLOTS
    }
  }
  return at
}
