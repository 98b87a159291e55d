/**
 * Reads compact output back into the object API's shapes, written from the layout documented in
 * src/backend/compact.ts (not from the library's own reader), so that tests check the format as users read it.
 */
import {
  COMPACT_FIRST_RECORD,
  COMPACT_RECORD_SLOTS,
  COMPACT_RECORDS,
  type HarmonyBatch,
  type HarmonyHeader,
  type HarmonyMessage,
  NAME_NOT_INTERNED,
  RECORD_CLOSE,
  RECORD_FIELDS,
  RECORD_OPEN,
  RECORD_STREAM,
  RECORD_TEXT,
} from 'harmony-stream'

const TERMINATORS = [null, 'end', 'return', 'call'] as const

/** One stream's decoding state across calls: the open message and the messages completed so far. */
export class StreamDecoder {
  private open: { header: HarmonyHeader; content: string } | null = null
  readonly messages: HarmonyMessage[] = []

  /**
   * Decodes the records `out[from..to)` (one stream's) of a call whose text is `text` into a batch.
   * `takeHeaders` is called once if a field was not interned.
   */
  decode(
    text: string,
    out: Uint32Array,
    from: number,
    to: number,
    nameOf: (id: number) => string | null,
    takeHeaders: () => HarmonyHeader[],
  ): HarmonyBatch {
    const batch: HarmonyBatch = { opened: [], segments: [], completed: [], diagnostics: [] }
    let spilled: HarmonyHeader[] | null = null
    let opened = 0
    for (let at = from; at < to; at += COMPACT_RECORD_SLOTS) {
      const kind = out[at]
      if (kind === RECORD_OPEN) {
        if (out[at + COMPACT_RECORD_SLOTS] !== RECORD_FIELDS) throw new Error('OPEN without FIELDS')
        const ids = [out[at + 2], out[at + 3], out[at + 5], out[at + 6], out[at + 7]]
        let header: HarmonyHeader
        if (ids.includes(NAME_NOT_INTERNED)) {
          spilled ??= takeHeaders()
          header = spilled[opened]
        } else {
          const [role, name, channel, recipient, contentType] = ids.map(nameOf)
          header = { role: role! }
          if (name !== null) header.name = name
          if (channel !== null) header.channel = channel
          if (recipient !== null) header.recipient = recipient
          if (contentType !== null) header.contentType = contentType
        }
        opened++
        this.open = { header, content: '' }
        batch.opened.push({ ...header, messageIndex: out[at + 1] })
        at += COMPACT_RECORD_SLOTS
      } else if (kind === RECORD_TEXT) {
        const piece = text.slice(out[at + 2], out[at + 3])
        const open = this.open!
        open.content += piece
        const { header } = open
        batch.segments.push({
          messageIndex: out[at + 1],
          role: header.role,
          channel: header.channel ?? null,
          recipient: header.recipient ?? null,
          contentType: header.contentType ?? null,
          text: piece,
        })
      } else if (kind === RECORD_CLOSE) {
        const message: HarmonyMessage = { ...this.open!.header, content: this.open!.content, terminator: TERMINATORS[out[at + 2]] }
        this.open = null
        batch.completed.push(message)
        this.messages.push(message)
      } else {
        throw new Error(`unexpected record kind ${kind} at ${at}`)
      }
    }
    return batch
  }
}

/** The records of a parser call (single form): from the first record to the end. */
export function singleRange(out: Uint32Array): [number, number] {
  return [COMPACT_FIRST_RECORD, COMPACT_FIRST_RECORD + COMPACT_RECORD_SLOTS * out[COMPACT_RECORDS]]
}

export interface StreamResult {
  id: number
  status: number
  diagnostics: number
  from: number
  to: number
}

/** Splits a pool call's records by their STREAM records. */
export function streamRanges(out: Uint32Array): StreamResult[] {
  const end = COMPACT_FIRST_RECORD + COMPACT_RECORD_SLOTS * out[COMPACT_RECORDS]
  const results: StreamResult[] = []
  for (let at = COMPACT_FIRST_RECORD; at < end; at += COMPACT_RECORD_SLOTS) {
    if (out[at] === RECORD_STREAM) {
      if (results.length > 0) results[results.length - 1].to = at
      results.push({ id: out[at + 1], status: out[at + 2], diagnostics: out[at + 3], from: at + COMPACT_RECORD_SLOTS, to: end })
    }
  }
  return results
}
