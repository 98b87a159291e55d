/**
 * The engine protocol: the small interface both implementations expose (the Rust core through N-API in
 * `crate/node`, the TypeScript one in `fallback/`), on which `parser.ts` builds the public API.
 *
 * It is shaped for the N-API boundary, where creating JS objects is what costs (see DESIGN.md):
 * a call takes the tokens as a `Uint32Array`, returns the batch text as one string, and writes a status
 * and events into an `out` array the caller owns and reuses. Objects cross only for the rare parts:
 * headers of new messages, diagnostics and errors, fetched when the counts in `out` say there are some.
 */

/** Layout of `out`. Mirrored in crate/node/src/lib.rs. */
export const OUT_STATUS = 0
export const OUT_EVENTS = 1
export const OUT_HEADERS = 2
export const OUT_DIAGNOSTICS = 3
/** With STATUS_INVALID_TOKEN: index of the offending id in the batch. */
export const OUT_BAD_INDEX = 4
export const OUT_STATE = 5
/** Events start here, three slots each: kind, message index, argument. */
export const OUT_FIRST_EVENT = 8

export const STATUS_OK = 0
export const STATUS_PARSE_ERROR = 1
export const STATUS_INVALID_TOKEN = 2
export const STATUS_FINISHED = 3

/** A message was opened; its header is the next one of `takeHeaders()`. */
export const EVENT_OPEN = 1
/** The message's text runs to the argument (UTF-16 offset into the batch text) from the previous text end. */
export const EVENT_TEXT = 2
/** The message was closed; the argument is the terminator code. */
export const EVENT_CLOSE = 3

export const TERMINATOR_NONE = 0
export const TERMINATOR_END = 1
export const TERMINATOR_RETURN = 2
export const TERMINATOR_CALL = 3

export const STATE_EXPECT_START = 0
export const STATE_HEADER = 1
export const STATE_CONTENT = 2

/** Events one token can cause at most (a header closed by a stop token: open, text, close). */
const MAX_EVENTS_PER_TOKEN = 3

/** Size of an `out` array that can hold the results of a batch of `tokens` tokens (or of `finish`). */
export function outCapacity(tokens: number): number {
  return OUT_FIRST_EVENT + 3 * MAX_EVENTS_PER_TOKEN * (tokens + 1)
}

/** Absent fields may come as `null` or `undefined`. */
export interface RawHeader {
  role: string
  name?: string | null
  channel?: string | null
  recipient?: string | null
  contentType?: string | null
}

export interface RawDiagnostic {
  code: string
  message: string
  tokenOffset: number
  text?: string | null
}

export interface RawParseError {
  code: string
  message: string
  tokenOffset: number
  header?: string | null
}

export interface Engine {
  push(tokens: Uint32Array, out: Uint32Array): string
  finish(out: Uint32Array): string
  takeHeaders(): RawHeader[]
  takeDiagnostics(): RawDiagnostic[]
  takeError(): RawParseError | null
  readonly state: number
}
