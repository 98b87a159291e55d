/**
 * The public streaming parser. It turns backend output (`backend/protocol.ts`) into segments, messages and
 * diagnostics, identically for both implementations, and owns argument checking and typed errors.
 */

import { createBackendStream, implementation as defaultImplementation } from '../backend/choose'
import {
  COMPACT_BAD_INDEX,
  COMPACT_DIAGNOSTICS,
  COMPACT_FIRST_RECORD,
  COMPACT_RECORD_SLOTS,
  COMPACT_RECORDS,
  COMPACT_STATE,
  COMPACT_STATUS,
  COMPACT_STATUS_FINISHED,
  COMPACT_STATUS_INTERNAL_ERROR,
  COMPACT_STATUS_INVALID_TOKEN,
  COMPACT_STATUS_OK,
  COMPACT_STATUS_PARSE_ERROR,
  compactCapacity,
  RECORD_CLOSE,
  RECORD_OPEN,
  RECORD_TEXT,
} from '../backend/compact'
import { type BackendStream, DEFAULT_MAX_HEADER_TOKENS, type RawHeader, STATE_CONTENT, STATE_HEADER } from '../backend/protocol'
import { FIRST_SPECIAL, LAST_TOKEN } from '../backend/tokens'
import { HarmonyError, HarmonyParseError, HarmonyStateError } from '../base/errors'
import { checkOptions, is, type OptionSpec, type Rule } from '../base/options'
import type {
  HarmonyBatch,
  HarmonyDiagnostic,
  HarmonyHeader,
  HarmonyMessage,
  HarmonyStreamParserOptions,
  Implementation,
  ParserState,
} from '../base/types'
import { ROLES } from '../base/types'
import { BatchAssembler, diagnosticOf, emptyBatch, publicHeader, TextOnly } from './batch'

// Shared by all parsers of this thread: calls are synchronous, so one at a time uses them.
const SHORT_BATCH = 64
const shortScratch = new Uint32Array(SHORT_BATCH)
/** Views of `shortScratch` by length, made once: a short batch's copy allocates nothing. */
const shortViews = Array.from({ length: SHORT_BATCH + 1 }, (_, length) => shortScratch.subarray(0, length))
let longScratch = new Uint32Array(0)

function scratch(length: number): Uint32Array {
  if (length <= SHORT_BATCH) return shortViews[length]
  if (longScratch.length < length) longScratch = new Uint32Array(Math.max(length, longScratch.length * 2))
  return longScratch.subarray(0, length)
}

/** Checks and converts the tokens argument; the backends check the ids' range. */
function tokenArray(tokens: unknown): Uint32Array {
  if (tokens instanceof Uint32Array) {
    // Memory another thread may write to must be copied (the backends validate ids, then read them again).
    // A short array is copied without asking: asking for its buffer makes V8 create one, which costs more.
    if (tokens.length > 16 && !(tokens.buffer instanceof SharedArrayBuffer)) return tokens
    const copy = scratch(tokens.length)
    for (let i = 0; i < tokens.length; i++) copy[i] = tokens[i]
    return copy
  }
  if (!Array.isArray(tokens) && !(ArrayBuffer.isView(tokens) && !(tokens instanceof DataView))) {
    throw new TypeError('tokens must be a Uint32Array or an array of token ids')
  }
  const list = tokens as ArrayLike<unknown>
  const copy = scratch(list.length)
  for (let i = 0; i < list.length; i++) {
    const id = list[i]
    if (typeof id !== 'number' || !Number.isInteger(id)) {
      throw new TypeError(`token at index ${i} is not an integer token id: ${String(id)}`)
    }
    if (id < 0 || id > LAST_TOKEN) {
      throw new RangeError(`token id ${id} at index ${i} is outside the vocabulary (0..=${LAST_TOKEN})`)
    }
    copy[i] = id
  }
  return copy
}

/** A failure inside a backend call (a bug, never bad input) becomes `internal-error`. */
export function internalError(cause: unknown): HarmonyError {
  const reason = cause instanceof Error ? cause.message : String(cause)
  return new HarmonyError('internal-error', `harmony-stream internal error: ${reason}`, { cause })
}

// Lone surrogates would reach Rust as U+FFFD but stay as they are in JavaScript: refused, like empty names.
const toolName: Rule = {
  what: 'a non-empty, well-formed string',
  test: (v) => typeof v === 'string' && v !== '' && !/\p{Surrogate}/u.test(v),
}

/** The options of one parser stream: what `HarmonyStreamParser`, `pool.open` and the adapters' `parser` take. */
export const STREAM_OPTIONS: OptionSpec = {
  role: is.nullable(is.oneOf(...ROLES)),
  strict: is.boolean,
  maxHeaderTokens: is.integer(1, 0xffff_ffff),
  toolNames: is.arrayOf(toolName),
}

/** `HarmonyStreamParser`'s options: a stream's, and the implementation to run it on. */
export const PARSER_OPTIONS: OptionSpec = { ...STREAM_OPTIONS, implementation: is.oneOf('native', 'js') }

/** Checks a parser's options (a TypeError or RangeError naming the option, see options.ts). */
export function checkParserOptions(options: unknown, where = 'HarmonyStreamParser', spec = PARSER_OPTIONS): HarmonyStreamParserOptions {
  return checkOptions<HarmonyStreamParserOptions>(options, spec, where)
}

/** BackendStream options from public options (checked). */
export function backendOptions(options: HarmonyStreamParserOptions): [string | null, boolean, number, string[]] {
  return [
    options.role === undefined ? 'assistant' : options.role,
    options.strict ?? false,
    options.maxHeaderTokens ?? DEFAULT_MAX_HEADER_TOKENS,
    options.toolNames ? [...options.toolNames] : [],
  ]
}

/**
 * A streaming parser for one completion. Feed it token ids as the engine produces them, in batches of any
 * size; each call returns the content text of that batch as segments (never mixing messages or channels),
 * the messages that ended, and diagnostics of what lenient mode recovered from.
 *
 * Two ways to feed it, not to be mixed on one parser: `push`/`finish` return objects; `pushCompact`/
 * `finishCompact` are the fast path, writing integers into an array you own (see `backend/compact.ts`).
 */
export class HarmonyStreamParser {
  /** The implementation running this parser. */
  readonly implementation: Implementation
  private readonly backend: BackendStream
  private readonly assembler = new BatchAssembler()
  private readonly textOnly = new TextOnly(this.assembler)
  private done = false
  private mode: 'objects' | 'compact' | null = null
  /** Set by `close()`: the state when the backend stream was released. */
  private closedState: ParserState | null = null
  /**
   * The fast path's own record of its last backend call: the message being read (-1 for none), and whether
   * the call left no headers or diagnostics to take (`pushCompact` answers the hot paths itself only then).
   */
  private compactMessage = -1
  private compactQuiet = true

  constructor(options: HarmonyStreamParserOptions = {}) {
    checkParserOptions(options)
    this.implementation = options.implementation ?? defaultImplementation
    const [role, strict, maxHeaderTokens, toolNames] = backendOptions(options)
    this.backend = createBackendStream(this.implementation, { role, strict, maxHeaderTokens, toolNames })
  }

  /**
   * Parses the next tokens of the stream. Throws `TypeError`/`RangeError` for bad ids (nothing consumed),
   * `HarmonyStateError` after `finish()`, and in strict mode `HarmonyParseError`.
   */
  push(tokens: Uint32Array | readonly number[]): HarmonyBatch {
    this.checkOpen()
    // The checked ids; a Uint32Array is copied only where it is read twice (shared memory could change it
    // between the reads), and an array is always checked and copied.
    let ids = tokens instanceof Uint32Array ? null : tokenArray(tokens)
    if (tokens.length > 0 && this.mode !== 'compact') {
      // The streaming hot paths: tokens that only add their text to the open message, and tokens that
      // produce nothing yet (a header being read), without a parse or a batch to build.
      if (this.assembler.openMessage() !== null) {
        const text = this.guardedTakeText(ids ?? (tokens as Uint32Array)) // reads each id once
        if (text !== null) return text === '' ? emptyBatch() : this.assembler.textBatch(text)
      } else {
        ids ??= tokenArray(tokens)
        if (this.guardedTakeSilently(ids)) {
          this.mode = 'objects' // the first push may be one
          return emptyBatch()
        }
      }
    }
    ids ??= tokenArray(tokens)
    this.use('objects')
    return this.read(ids)
  }

  /**
   * Ends the stream: flushes an unterminated message, and releases the native stream (everything it
   * produced has been read). Calling it again returns an empty batch.
   */
  finish(): HarmonyBatch {
    if (this.done) return emptyBatch()
    this.use('objects')
    this.done = true
    try {
      return this.read(null)
    } finally {
      this.close()
    }
  }

  /**
   * The fast path: parses the next tokens and returns the batch's text as one string, with its segments,
   * the messages opened and closed, and interned header field ids written into `out` (layout in
   * `backend/compact.ts`; size it with `compactCapacity(batchSize)` and reuse it). Nothing is accumulated: read
   * diagnostics with `takeDiagnostics()` when `out[COMPACT_DIAGNOSTICS]` says there are some, names with
   * `nameOf(id)`. Bad arguments throw as for `push`. A strict-mode error is data here, not an exception:
   * `out[COMPACT_STATUS]` is COMPACT_STATUS_PARSE_ERROR, the results of the tokens before the failing one
   * are in `out` and the returned text, and `takeError()` returns the `HarmonyParseError`.
   */
  pushCompact(tokens: Uint32Array | readonly number[], out: Uint32Array): string {
    this.checkOpen()
    const ids = tokenArray(tokens)
    checkOut(out, ids.length)
    this.use('compact')
    // The streaming hot paths, as in `push`: tokens that only add their text to the open message, and tokens
    // that produce nothing yet. Not after a call whose headers or diagnostics may still be taken: these answer
    // for the last call, and a call taken here leaves the backend's as they were.
    if (ids.length > 0 && this.compactQuiet) {
      if (this.compactMessage !== -1) {
        const text = this.guardedTakeText(ids)
        if (text !== null) return writeTextOnly(out, this.compactMessage, text)
      } else if (this.guardedTakeSilently(ids)) {
        return writeTextOnly(out, -1, '')
      }
    }
    return this.copyCompact(this.call(ids), ids, out)
  }

  /**
   * `finish` for the fast path: ends the stream, writing the last records into `out`. Again: returns ''.
   * Its diagnostics and error can still be taken; `close()` then releases a native parser's Rust stream at
   * once instead of at garbage collection.
   */
  finishCompact(out: Uint32Array): string {
    checkOut(out, 0)
    if (this.done) {
      out.fill(0, 0, COMPACT_FIRST_RECORD)
      return ''
    }
    this.use('compact')
    this.done = true
    return this.copyCompact(this.call(null), null, out)
  }

  /** The strict-mode error behind COMPACT_STATUS_PARSE_ERROR of the last compact call (`partial: null`). */
  takeError(): HarmonyParseError | null {
    this.checkLive()
    const error = this.backend.takeError()
    return error === null ? null : new HarmonyParseError(error.code, error.message, error.tokenOffset, error.header ?? null, null)
  }

  /** Diagnostics of the last `pushCompact`/`finishCompact` (each returned once). */
  takeDiagnostics(): HarmonyDiagnostic[] {
    this.checkLive()
    return this.backend.takeDiagnostics().map(diagnosticOf)
  }

  /**
   * Headers of all the messages the last `pushCompact`/`finishCompact` opened, in the order of their
   * RECORD_OPEN records (the i-th OPEN is the i-th header), once: for fields that came back as
   * `NAME_NOT_INTERNED`.
   */
  takeHeaders(): HarmonyHeader[] {
    this.checkLive()
    return this.backend.takeHeaders().map(publicHeader)
  }

  /** The string behind a header field id of the compact output; null for 0 (absent). */
  nameOf(id: number): string | null {
    this.checkLive()
    return this.backend.nameOf(id)
  }

  /** Every message completed so far by `push`/`finish` (a copy). */
  get messages(): HarmonyMessage[] {
    return this.assembler.messages.slice()
  }

  /**
   * Releases the parser's resources now (for a native parser, its stream in Rust) rather than when it is
   * garbage-collected; `finish()` does it already. After it the parser answers `messages`, `state` and
   * `finished`, and any other call throws `HarmonyStateError`.
   */
  close(): void {
    if (this.closedState !== null) return
    this.closedState = this.state
    this.done = true
    this.backend.close()
  }

  get state(): ParserState {
    if (this.closedState !== null) return this.closedState
    const state = this.backend.state
    return state === STATE_HEADER ? 'header' : state === STATE_CONTENT ? 'content' : 'expect-start'
  }

  /** True once `finish()` was called. */
  get finished(): boolean {
    return this.done
  }

  /**
   * @internal The adapters' fast path: parses a batch that can only add text to the open message (ordinary
   * tokens while a message is being read) and returns that text, without building a batch; null, with
   * nothing consumed, for any other batch. Bad ids throw as for `push`.
   */
  pushText(tokens: Uint32Array | readonly number[]): string | null {
    if (this.assembler.openMessage() === null || this.done || this.mode !== 'objects') return null
    for (let i = 0; i < tokens.length; i++) if (!(tokens[i] < FIRST_SPECIAL)) return null
    if (tokens.length === 0) return ''
    // As in `push`: a Uint32Array is copied only for a parse.
    const direct = tokens instanceof Uint32Array
    let ids = direct ? tokens : tokenArray(tokens)
    const taken = this.guardedTakeText(ids)
    if (taken !== null) {
      this.assembler.appendText(taken)
      return taken
    }
    if (direct) ids = tokenArray(tokens)
    const collector = this.textOnly
    collector.collected = ''
    try {
      this.backend.read(ids, collector)
    } catch (cause) {
      throw internalError(cause)
    }
    const status = this.backend.out[COMPACT_STATUS]
    if (status !== COMPACT_STATUS_OK) this.checkStatus(status, ids)
    return collector.collected
  }

  /** @internal Whether nothing was pushed, finished or closed yet (an adapter's parser may then be replaced). */
  fresh(): boolean {
    return this.mode === null && !this.done && this.closedState === null
  }

  /** @internal The backend stream under this parser, for `SsePool`'s fast lane. */
  laneStream(): BackendStream {
    this.checkLive()
    return this.backend
  }

  /** @internal The message being read (index and header), if any. */
  openMessage(): { index: number; header: RawHeader } | null {
    return this.assembler.openMessage()
  }

  /** @internal Text that `SsePool`'s fast lane gave the open message on this parser's backend stream. */
  absorbLaneText(text: string): void {
    this.assembler.appendText(text)
  }

  private checkOpen(): void {
    if (this.done) throw new HarmonyStateError('parser-finished', 'push() after finish(): create a new parser for a new stream')
  }

  private checkLive(): void {
    if (this.closedState !== null) throw new HarmonyStateError('parser-closed', 'the parser was closed')
  }

  private use(mode: 'objects' | 'compact'): void {
    this.checkOpen()
    if (this.mode !== mode) {
      if (this.mode !== null) {
        throw new HarmonyStateError('mixed-api', 'this parser is fed through push()/finish() or pushCompact()/finishCompact(), not both')
      }
      this.mode = mode
    }
  }

  /** One backend call for the object API; `tokens` null finishes. */
  private read(tokens: Uint32Array | null): HarmonyBatch {
    try {
      this.backend.read(tokens, this.assembler)
    } catch (cause) {
      throw internalError(cause)
    }
    const out = this.backend.out
    const status = out[COMPACT_STATUS]
    if (status !== COMPACT_STATUS_OK) this.checkStatus(status, tokens)
    const diagnostics = out[COMPACT_DIAGNOSTICS] > 0 ? this.backend.takeDiagnostics().map(diagnosticOf) : []
    const batch = this.assembler.take(diagnostics)
    if (status === COMPACT_STATUS_PARSE_ERROR) throw this.parseError(batch)
    return batch
  }

  /** `BackendStream.takeText`; a failure in it (a bug) is an internal error, as in every backend call. */
  private guardedTakeText(tokens: Uint32Array): string | null {
    try {
      return this.backend.takeText(tokens)
    } catch (cause) {
      throw internalError(cause)
    }
  }

  /** `BackendStream.takeSilently`, its failures as `takeText`'s. */
  private guardedTakeSilently(tokens: Uint32Array): boolean {
    try {
      return this.backend.takeSilently(tokens)
    } catch (cause) {
      throw internalError(cause)
    }
  }

  /** One backend call for the fast path; `tokens` null finishes. The results are in `this.backend.out`. */
  private call(tokens: Uint32Array | null): string {
    try {
      return tokens === null ? this.backend.finish() : this.backend.push(tokens)
    } catch (cause) {
      throw internalError(cause)
    }
  }

  /** Throws for the statuses that are errors whatever the API; the parse error is left to the caller. */
  private checkStatus(status: number, tokens: Uint32Array | null): void {
    const out = this.backend.out
    if (status === COMPACT_STATUS_INVALID_TOKEN) {
      const index = out[COMPACT_BAD_INDEX]
      throw new RangeError(`token id ${tokens![index]} at index ${index} is outside the vocabulary (0..=${LAST_TOKEN})`)
    }
    if (status === COMPACT_STATUS_FINISHED) throw new HarmonyStateError('parser-finished', 'the parser is finished')
    if (status === COMPACT_STATUS_INTERNAL_ERROR) {
      throw internalError(new Error(this.backend.takeError()?.message ?? 'unknown failure'))
    }
    if (status !== COMPACT_STATUS_OK && status !== COMPACT_STATUS_PARSE_ERROR)
      throw internalError(new Error(`unexpected backend status ${status}`))
  }

  private parseError(partial: HarmonyBatch): HarmonyParseError {
    const error = this.backend.takeError()!
    return new HarmonyParseError(error.code, error.message, error.tokenOffset, error.header ?? null, partial)
  }

  private copyCompact(text: string, tokens: Uint32Array | null, out: Uint32Array): string {
    const source = this.backend.out
    const status = source[COMPACT_STATUS]
    this.compactQuiet = false
    if (status !== COMPACT_STATUS_OK) this.checkStatus(status, tokens)
    // A loop: `subarray` would allocate a view per call, which costs more than copying the few slots.
    const end = COMPACT_FIRST_RECORD + COMPACT_RECORD_SLOTS * source[COMPACT_RECORDS]
    let quiet = status === COMPACT_STATUS_OK && source[COMPACT_DIAGNOSTICS] === 0
    for (let i = 0; i < end; i++) out[i] = source[i]
    for (let at = COMPACT_FIRST_RECORD; at < end; at += COMPACT_RECORD_SLOTS) {
      const kind = source[at]
      if (kind === RECORD_OPEN) {
        this.compactMessage = source[at + 1]
        quiet = false
      } else if (kind === RECORD_CLOSE) this.compactMessage = -1
    }
    this.compactQuiet = quiet
    return text
  }
}

/**
 * The compact results of a call that only added `text` to message `message` (none when it is ''), or took
 * tokens silently (`message` -1: a header is being read).
 */
function writeTextOnly(out: Uint32Array, message: number, text: string): string {
  out.fill(0, 0, COMPACT_FIRST_RECORD)
  if (message === -1) {
    out[COMPACT_STATE] = STATE_HEADER
    return text
  }
  out[COMPACT_STATE] = STATE_CONTENT
  if (text === '') return text
  out[COMPACT_RECORDS] = 1
  out[COMPACT_FIRST_RECORD] = RECORD_TEXT
  out[COMPACT_FIRST_RECORD + 1] = message
  out[COMPACT_FIRST_RECORD + 2] = 0
  out[COMPACT_FIRST_RECORD + 3] = text.length
  return text
}

/** Checks a caller's compact output array before anything is consumed. */
export function checkOut(out: unknown, tokens: number, streams = 1): asserts out is Uint32Array {
  if (!(out instanceof Uint32Array)) throw new TypeError('out must be a Uint32Array')
  const needed = compactCapacity(tokens, streams)
  if (out.length < needed) throw new RangeError(`out has ${out.length} slots; this call needs ${needed} (compactCapacity)`)
}

/** Parses a whole completion (the tokens after `<|start|>{role}`) and returns its messages. */
export function parseCompletion(tokens: Uint32Array | readonly number[], options: HarmonyStreamParserOptions = {}): HarmonyMessage[] {
  const parser = new HarmonyStreamParser(options)
  parser.push(tokens)
  parser.finish()
  return parser.messages
}
