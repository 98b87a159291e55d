/**
 * One stream of the TypeScript backend (as a slot of crate/core/src/pool.rs): its parser with what the
 * backend protocol adds (last error, whether a bug broke it, its fast lane), and the guard every call on
 * it runs through. Shared by the pool (pool.ts), the lane (lane.ts) and the single stream (stream.ts).
 */
import {
  COMPACT_STATUS_FINISHED,
  COMPACT_STATUS_INTERNAL_ERROR,
  COMPACT_STATUS_INVALID_TOKEN,
  COMPACT_STATUS_OK,
  COMPACT_STATUS_PARSE_ERROR,
} from '../compact'
import type { FrameTemplate } from '../frames'
import type { ParseError } from './output'
import { type ParserOptions, type PushError, StreamParser } from './stream-parser'
import type { Vocabulary } from './vocabulary'

/**
 * A stream's fast lane: the template of the open message's frames if the adapter gave one, and what the
 * lane did since the adapter last looked (`takeLane`). Without a template it still takes silent tokens.
 */
export interface Lane {
  template: FrameTemplate | null
  counter: number
  text: string
  tokens: number
}

/** A parser with what the backend protocol adds: its last error, and whether a bug broke it. */
export interface Stream {
  parser: StreamParser
  error: ParseError | null
  /** With COMPACT_STATUS_INVALID_TOKEN: the index of the offending id in the last call's batch. */
  badIndex: number
  broken: boolean
  /** The fast lane of `stepFrames` (lane.ts), while the adapter has one for the open message. */
  lane: Lane | null
  /** The `stepFrames` call that last served this stream (a stream may appear once per call). */
  servedIn: number
  /** Who may name this stream in `stepFrames` (0: nobody); see `claimLane`. */
  owner: number
}

/** A stream over a new parser with these options. */
export function newStream(vocabulary: Vocabulary, options: ParserOptions): Stream {
  return { parser: new StreamParser(vocabulary, options), error: null, badIndex: 0, broken: false, lane: null, servedIn: 0, owner: 0 }
}

/**
 * Pushes `tokens` into the stream, or finishes it for null; returns the status. An exception (a bug)
 * marks the stream broken, as a panic does in Rust. (No closures: this runs once per call.)
 */
export function runGuarded(stream: Stream, tokens: Uint32Array | null): number {
  if (stream.broken) return refuseBroken(stream)
  let result: PushError | null
  try {
    result = tokens === null ? stream.parser.finish() : stream.parser.push(tokens)
  } catch (cause) {
    return markBroken(stream, cause)
  }
  return statusOf(stream, result)
}

/** Test hook: fails inside the guard, as a bug would. */
export function failGuarded(stream: Stream): number {
  if (stream.broken) return refuseBroken(stream)
  return markBroken(stream, new Error('deliberate failure (debugPanic)'))
}

function refuseBroken(stream: Stream): number {
  stream.error = internalError('this parser failed earlier with an internal error and cannot be used')
  stream.parser.output.clear()
  return COMPACT_STATUS_INTERNAL_ERROR
}

function markBroken(stream: Stream, cause: unknown): number {
  stream.broken = true
  stream.error = internalError(`internal error in the TypeScript parser: ${cause instanceof Error ? cause.message : String(cause)}`)
  return COMPACT_STATUS_INTERNAL_ERROR
}

function statusOf(stream: Stream, result: PushError | null): number {
  if (result === null) return COMPACT_STATUS_OK
  if (result.kind === 'parse') {
    stream.error = result.error
    return COMPACT_STATUS_PARSE_ERROR
  }
  if (result.kind === 'finished') return COMPACT_STATUS_FINISHED
  stream.badIndex = result.index
  return COMPACT_STATUS_INVALID_TOKEN
}

function internalError(message: string): ParseError {
  return { code: 'internal-error', message, tokenOffset: 0, header: null }
}
