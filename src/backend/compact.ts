/**
 * The compact output format: the fast path's results as small integers in a `Uint32Array` the caller
 * owns and reuses, beside one string holding the batch's text. `HarmonyStreamParser#pushCompact` and
 * `HarmonyStreamPool#step` answer in it, on both implementations. Mirrors crate/core/src/compact.rs
 * (__test__/parser/constants.test.mts compares the two).
 *
 * Layout: 8 header slots, then records of 4 slots each.
 *
 *   out[COMPACT_RECORDS]      number of records
 *   out[COMPACT_STATUS]       a parser call's status (COMPACT_STATUS_*); 0 for a pool step
 *   out[COMPACT_DIAGNOSTICS]  a parser call's diagnostic count (fetch them with takeDiagnostics())
 *   out[COMPACT_STATE]        a parser call's state afterwards: 0 expect-start, 1 header, 2 content
 *
 *   record at COMPACT_FIRST_RECORD + 4 * i:
 *   RECORD_OPEN    message, role id, name id        (always followed by RECORD_FIELDS)
 *   RECORD_FIELDS  channel id, recipient id, content type id   (of the message just opened)
 *   RECORD_TEXT    message, start, end              (UTF-16 offsets into the returned string: text.slice(start, end))
 *   RECORD_CLOSE   message, terminator (TERMINATOR_*: 0 end of stream, 1 <|end|>, 2 <|return|>, 3 <|call|>), 0
 *   RECORD_STREAM  stream id, status, diagnostic count   (pool steps: the records up to the next STREAM are this stream's)
 *
 * Header fields are interned: 0 means absent; other ids name a string, `nameOf(id)` on the parser or pool
 * that produced them (ids are stable for the life of that parser's implementation in this thread, or of
 * that pool). A name longer than 256 bytes, or met after 65,536 distinct names, comes as NAME_NOT_INTERNED:
 * read that message's header from `takeHeaders()`.
 */

/** Slots before the first record (HEADER_SLOTS in crate/core/src/compact.rs; compared as COMPACT_FIRST_RECORD). */
const COMPACT_HEADER_SLOTS = 8
export const COMPACT_RECORDS = 0
export const COMPACT_STATUS = 1
export const COMPACT_DIAGNOSTICS = 2
export const COMPACT_STATE = 3
/** Internal: with an invalid-token, unknown-stream status, the index of the offending entry. */
export const COMPACT_BAD_INDEX = 4
/** The records follow the header slots; the slots before this index are the header. */
export const COMPACT_FIRST_RECORD = COMPACT_HEADER_SLOTS
export const COMPACT_RECORD_SLOTS = 4

export const RECORD_OPEN = 1
export const RECORD_TEXT = 2
export const RECORD_CLOSE = 3
export const RECORD_FIELDS = 4
export const RECORD_STREAM = 5

export const COMPACT_STATUS_OK = 0
/** Strict mode: the batch stopped at a token the reference rejects (a pool stream's error: `takeError(id)`). */
export const COMPACT_STATUS_PARSE_ERROR = 1
/** Internal to the backend protocol: the public calls throw a RangeError instead. */
export const COMPACT_STATUS_INVALID_TOKEN = 2
/** Internal: the parser was finished. */
export const COMPACT_STATUS_FINISHED = 3
/** A bug stopped this stream (a pool stream's error: `takeError(id)`); it refuses further use. */
export const COMPACT_STATUS_INTERNAL_ERROR = 4
/** Internal to pool calls; the public calls throw a RangeError instead. */
export const COMPACT_STATUS_UNKNOWN_STREAM = 5
export const COMPACT_STATUS_BAD_OFFSETS = 6
/** Internal to `SsePool` steps: a stream named twice in one step. */
export const COMPACT_STATUS_REPEATED_STREAM = 7

export const NAME_NOT_INTERNED = 0xffff_ffff

/** Records one token can cause at most (OPEN + FIELDS, TEXT, CLOSE); one more token's worth covers finish. */
export const MAX_RECORDS_PER_TOKEN = 4

/** Slots an output array needs for a call over `tokens` tokens in all, spread over `streams` streams. */
export function compactCapacity(tokens: number, streams = 1): number {
  return COMPACT_HEADER_SLOTS + COMPACT_RECORD_SLOTS * (streams + MAX_RECORDS_PER_TOKEN * (tokens + streams))
}

/**
 * Interned header strings (the TypeScript side of crate/core's `NameTable`): ids from 1, never changed,
 * bounded in count and length so that a model emitting endless distinct recipients cannot grow memory.
 */
export class NameTable {
  static readonly MAX_NAMES = 65_536
  static readonly MAX_NAME_BYTES = 256
  private readonly ids = new Map<string, number>()
  readonly names: string[] = []

  intern(name: string | null | undefined): number {
    if (name == null) return 0
    const known = this.ids.get(name)
    if (known !== undefined) return known
    if (this.names.length >= NameTable.MAX_NAMES || Buffer.byteLength(name) > NameTable.MAX_NAME_BYTES) return NAME_NOT_INTERNED
    this.names.push(name)
    this.ids.set(name, this.names.length)
    return this.names.length
  }

  nameOf(id: number): string | null {
    return id === 0 ? null : (this.names[id - 1] ?? null)
  }
}
