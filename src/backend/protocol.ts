/**
 * The backend protocol: what both implementations expose (the Rust core through N-API in `crate/node`, the
 * TypeScript one in `js/`), on which the public classes are built.
 *
 * A parser's backend stream, and a pool, answer in the compact format (`compact.ts`): the text of a call as one
 * string, everything else as integers in a `Uint32Array` the caller owns. Objects cross only for the rare
 * parts (diagnostics, errors, headers too long to intern), fetched when the counts say there are some.
 */

import type { FrameTemplate, LaneProgress } from './frames'

/**
 * Codes of the TypeScript backend's event list (`js/output.ts`). The Rust core's events (crate/core/src/output.rs)
 * are an enum without codes: these never cross the boundary.
 */
export const EVENT_OPEN = 1
export const EVENT_TEXT = 2
export const EVENT_CLOSE = 3

/** Mirror `Terminator` and TERMINATOR_NONE in crate/core/src/tokens.rs (__test__/parser/constants.test.mts compares them). */
export const TERMINATOR_NONE = 0
export const TERMINATOR_END = 1
export const TERMINATOR_RETURN = 2
export const TERMINATOR_CALL = 3

/**
 * Headers are a handful of tokens; a header this long means the model never wrote `<|message|>`
 * (mirrors `DEFAULT_MAX_HEADER_TOKENS` in crate/core/src/stream_parser.rs).
 */
export const DEFAULT_MAX_HEADER_TOKENS = 256

/** Mirror `State` in crate/core/src/stream_parser.rs. */
export const STATE_EXPECT_START = 0
export const STATE_HEADER = 1
export const STATE_CONTENT = 2
/** The state code a pool answers for an id that is not open (mirrors STATE_NOT_OPEN in crate/node/src/lib.rs). */
export const STATE_NOT_OPEN = 0xffff_ffff

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

/** A pool the caller drives (`NativePool` in crate/node, `StreamPool` in js/pool.ts). */
export interface PoolBackend {
  open(role: string | null, strict: boolean, maxHeaderTokens: number, toolNames: string[]): number
  close(id: number): boolean
  readonly size: number
  step(streams: Uint32Array, offsets: Uint32Array, tokens: Uint32Array, out: Uint32Array): string
  finish(streams: Uint32Array, out: Uint32Array): string
  /** Rare results of a stream's last call. */
  takeDiagnostics(id: number): RawDiagnostic[]
  takeHeaders(id: number): RawHeader[]
  takeError(id: number): RawParseError | null
  /** The state code, or STATE_NOT_OPEN. */
  state(id: number): number
  /** Interned names with ids `from + 1` onwards. */
  names(from: number): string[]
  /** Test hook: makes the stream fail as a bug would. Returns the status. */
  debugPanic(id: number): number
}

/**
 * Receives the results of a backend call in order, for the object API: a message opened (its header
 * complete), text of the open message, the open message closed (TERMINATOR_* code).
 */
export interface ResultVisitor {
  open(message: number, header: RawHeader): void
  text(message: number, text: string): void
  close(message: number, terminator: number): void
}

/**
 * One `HarmonyStreamParser`'s stream (`NativeStream`, `JsStream`). `push` and `finish` answer in the single
 * form of the compact format, written to `out`, which is valid until the next call of any backend stream of the
 * same implementation in this thread.
 */
export interface BackendStream {
  push(tokens: Uint32Array): string
  finish(): string
  /**
   * The object API's call: parses `tokens` (null finishes), writes the header slots of the compact format
   * to `out` (status, diagnostic count, state, bad index; records only if that is how the backend reads its
   * results), and reports the results to `visitor` in order. A status other than OK or a parse error comes
   * with no results.
   */
  read(tokens: Uint32Array | null, visitor: ResultVisitor): void
  /**
   * The hot path of streaming, at one token or a few per call: if every one of `tokens` (checked ids) can
   * only add its own text to the open message (ordinary tokens whose text the backend knows, no part of
   * a character pending), takes them without a parse and returns their text; otherwise null, with nothing
   * taken. '' when they were taken but give no text yet (the first piece of a split character). Leaves `out`
   * as it was: the caller reads nothing else of such a call.
   */
  takeText(tokens: Uint32Array): string | null
  /**
   * Takes `tokens` if they produce nothing now (a `<|start|>` that opens a header, header tokens while it has
   * room) and returns true; false, with nothing taken, otherwise. No results to read: native keeps them back
   * for its next call into Rust, js parses them without building any.
   */
  takeSilently(tokens: Uint32Array): boolean
  readonly out: Uint32Array
  takeDiagnostics(): RawDiagnostic[]
  takeHeaders(): RawHeader[]
  takeError(): RawParseError | null
  readonly state: number
  nameOf(id: number): string | null
  /** Releases the stream's resources now (native: its Rust stream); no call may follow. */
  close(): void
  /**
   * Opens the fast lane of `SsePool` steps on this stream, claimed by a stepper, or changes its frame
   * template (frames.ts, js/lane.ts; frames.rs); false if no stepper claimed it.
   */
  setLane(template: FrameTemplate | null, counter: number): boolean
  /** What the fast lane did since the last call; null without a lane. */
  takeLane(): LaneProgress | null
  /** Test hook: makes the stream fail as a bug would. Returns the status. */
  debugPanic(): number
}

/**
 * Steps the fast lanes of many backend streams of one implementation at once, one call per engine step
 * (`parserStepFrames` in crate/node, `stepFrames` in js/lane.ts). `ends` gets the layout of
 * frames.ts (FRAMES_*); the frames come back as one buffer with an end per stream in `ends`
 * (native) or a string per stream (js).
 */
export interface LaneStepper {
  /** The id under which `step` knows the backend stream. */
  add(stream: BackendStream): number
  /** Forgets an id of `add` (the stream itself is closed by its owner). */
  remove(id: number): void
  step(ids: Uint32Array, offsets: Uint32Array, tokens: Uint32Array, ends: Uint32Array): Uint8Array | string[]
}
