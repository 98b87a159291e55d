/**
 * Many streams, one call per engine step: the shape of a gateway's inner loop, where every running
 * request gets a token or a few per step. One call serves them all, so the fixed cost of a call (for the
 * native implementation, crossing into Rust) is paid once per step instead of once per stream.
 *
 *   const pool = new HarmonyStreamPool()
 *   const a = pool.open(), b = pool.open({ strict: true })
 *   const out = new Uint32Array(compactCapacity(tokens.length, 2))
 *   const text = pool.step(Uint32Array.of(a, b), Uint32Array.of(0, 1, 3), tokens, out)
 *   // out: a RECORD_STREAM record per stream, each followed by that stream's records (backend/compact.ts)
 *   pool.finish(Uint32Array.of(a, b), out)   // ends both streams (closed on the pool's next call)
 *
 * Each stream behaves exactly as a `HarmonyStreamParser` with the same options fed the same batches.
 */

import { createPool, implementation as defaultImplementation } from '../backend/choose'
import {
  COMPACT_BAD_INDEX,
  COMPACT_STATUS,
  COMPACT_STATUS_BAD_OFFSETS,
  COMPACT_STATUS_INVALID_TOKEN,
  COMPACT_STATUS_REPEATED_STREAM,
  COMPACT_STATUS_UNKNOWN_STREAM,
} from '../backend/compact'
import type { NameMirror } from '../backend/name-mirror'
import type { PoolBackend } from '../backend/protocol'
import { LAST_TOKEN } from '../backend/tokens'
import { type HarmonyError, HarmonyLimitError, HarmonyParseError } from '../base/errors'
import { checkOptions, is, type OptionSpec, optionError } from '../base/options'
import type { HarmonyDiagnostic, HarmonyHeader, HarmonyStreamParserOptions, Implementation } from '../base/types'
import { diagnosticOf, publicHeader } from './batch'
import { backendOptions, checkOut, checkParserOptions, internalError, STREAM_OPTIONS } from './parser'

export type HarmonyStreamOptions = Omit<HarmonyStreamParserOptions, 'implementation'>

export interface HarmonyStreamPoolOptions {
  /** Run this pool on a given implementation instead of the process-wide one. */
  implementation?: Implementation
}

/** Refuses an `out` that shares memory with an input: the backends write records while reading tokens. */
function checkDisjoint(out: Uint32Array, inputs: Uint32Array[]): void {
  for (const input of inputs) {
    if (input.buffer !== out.buffer || input.length === 0) continue
    const [a, b] = [input.byteOffset, input.byteOffset + input.byteLength]
    const [c, d] = [out.byteOffset, out.byteOffset + out.byteLength]
    if (a < d && c < b) throw new TypeError('out must not share memory with streams, offsets or tokens')
  }
}

function streamId(id: unknown): number {
  if (!Number.isInteger(id) || (id as number) < 0 || (id as number) > 0xffff_ffff)
    throw new TypeError(`a stream id is an integer from 0 to ${0xffff_ffff}; got ${String(id)}`)
  return id as number
}

export function plainUint32Array(value: unknown, what: string): Uint32Array {
  if (!(value instanceof Uint32Array)) throw new TypeError(`${what} must be a Uint32Array`)
  // Memory another thread may write to is copied: the backends validate, then read again.
  return value.buffer instanceof SharedArrayBuffer ? value.slice() : value
}

/** The RangeError of a step's status about its arguments (nothing was consumed); nothing for the others. */
export function throwForStepStatus(status: number, index: number, streams: Uint32Array, tokens: Uint32Array | null): void {
  if (status === COMPACT_STATUS_UNKNOWN_STREAM) {
    throw new RangeError(`stream id ${streams[index]} at index ${index} is not open in this pool (or is repeated in finish)`)
  }
  if (status === COMPACT_STATUS_REPEATED_STREAM)
    throw new RangeError(`stream id ${streams[index]} at index ${index} is named twice in one step`)
  if (status === COMPACT_STATUS_BAD_OFFSETS) {
    throw new RangeError('offsets must hold streams.length + 1 non-decreasing indexes into tokens')
  }
  if (status === COMPACT_STATUS_INVALID_TOKEN) {
    throw new RangeError(`token id ${tokens![index]} at index ${index} is outside the vocabulary (0..=${LAST_TOKEN})`)
  }
}

/** A pool's options: the implementation its streams run on. */
const POOL_OPTIONS: OptionSpec = { implementation: is.oneOf('native', 'js') }

/** The implementation a pool's options ask for (checked), else `otherwise` (the process-wide one unless given). */
export function poolImplementation(options: unknown, where: string, otherwise: Implementation = defaultImplementation): Implementation {
  return checkOptions<{ implementation?: Implementation }>(options, POOL_OPTIONS, where).implementation ?? otherwise
}

export class HarmonyStreamPool {
  readonly implementation: Implementation
  private readonly backend: PoolBackend
  private readonly names: NameMirror

  constructor(options: HarmonyStreamPoolOptions = {}) {
    this.implementation = poolImplementation(options, 'HarmonyStreamPool')
    const { backend, names } = createPool(this.implementation)
    this.backend = backend
    this.names = names
  }

  /** Opens a stream (options as for `HarmonyStreamParser`); returns its id. */
  open(options: HarmonyStreamOptions = {}): number {
    if (options !== null && typeof options === 'object' && 'implementation' in options) {
      throw optionError(
        TypeError,
        "HarmonyStreamPool.open: a pool stream runs on the pool's implementation (option 'implementation' is the pool's)",
      )
    }
    checkParserOptions(options, 'HarmonyStreamPool.open', STREAM_OPTIONS)
    try {
      return this.backend.open(...backendOptions(options))
    } catch (cause) {
      // Options are checked: the one failure left is a full pool (both backends).
      throw new HarmonyLimitError(`HarmonyStreamPool.open: ${(cause as Error).message}`, { cause })
    }
  }

  /**
   * Releases a stream without finishing it (e.g. the client went away). False if it was not open. Ids are
   * slots plus an 8-bit generation: a closed id is refused until its slot has been reused 256 times, so do
   * not keep ids of closed streams around.
   */
  close(id: number): boolean {
    return Number.isInteger(id) && id >= 0 && id <= 0xffff_ffff && this.backend.close(id)
  }

  /** Number of open streams (finished ones count until the next `open`, `step` or `finish`). */
  get size(): number {
    return this.backend.size
  }

  /**
   * One engine step: `tokens.subarray(offsets[i], offsets[i + 1])` are the next tokens of stream
   * `streams[i]` (`offsets` has one entry more than `streams`). Returns the text of the whole step and
   * writes a RECORD_STREAM record per stream, each followed by its records, into `out` (size it with
   * `compactCapacity(tokens, streams)`). A stream's strict-mode error does not stop the others: its
   * STREAM record carries COMPACT_STATUS_PARSE_ERROR and `takeError(id)` returns it. Bad arguments (an id
   * not open, bad offsets, a token id outside the vocabulary) throw before anything is consumed.
   */
  step(streams: Uint32Array, offsets: Uint32Array, tokens: Uint32Array, out: Uint32Array): string {
    streams = plainUint32Array(streams, 'streams')
    offsets = plainUint32Array(offsets, 'offsets')
    tokens = plainUint32Array(tokens, 'tokens')
    const count = offsets.length > 0 ? offsets[offsets.length - 1] - offsets[0] : 0
    checkOut(out, Math.max(count, 0), streams.length)
    checkDisjoint(out, [streams, offsets, tokens])
    let text: string
    try {
      text = this.backend.step(streams, offsets, tokens, out)
    } catch (cause) {
      throw internalError(cause)
    }
    this.checkStatus(out, streams, tokens)
    return text
  }

  /**
   * Ends the given streams (flushing unterminated messages); output as for `step`. They are closed at the
   * start of the pool's next `open`, `step` or `finish`: until then `takeDiagnostics`/`takeError` still
   * answer for them.
   */
  finish(streams: Uint32Array, out: Uint32Array): string {
    streams = plainUint32Array(streams, 'streams')
    checkOut(out, 0, streams.length)
    checkDisjoint(out, [streams])
    let text: string
    try {
      text = this.backend.finish(streams, out)
    } catch (cause) {
      throw internalError(cause)
    }
    this.checkStatus(out, streams, null)
    return text
  }

  private checkStatus(out: Uint32Array, streams: Uint32Array, tokens: Uint32Array | null): void {
    throwForStepStatus(out[COMPACT_STATUS], out[COMPACT_BAD_INDEX], streams, tokens)
  }

  /** Diagnostics of the stream's last step (each returned once). */
  takeDiagnostics(id: number): HarmonyDiagnostic[] {
    return this.backend.takeDiagnostics(streamId(id)).map(diagnosticOf)
  }

  /**
   * Headers of all the messages the stream's last step opened, in the order of its RECORD_OPEN records,
   * once: for fields that came back NAME_NOT_INTERNED.
   */
  takeHeaders(id: number): HarmonyHeader[] {
    return this.backend.takeHeaders(streamId(id)).map(publicHeader)
  }

  /**
   * The error behind a STREAM record's COMPACT_STATUS_PARSE_ERROR (a `HarmonyParseError`, `partial: null`)
   * or COMPACT_STATUS_INTERNAL_ERROR (a `HarmonyError` with code `internal-error`); null if none.
   */
  takeError(id: number): HarmonyError | null {
    const error = this.backend.takeError(streamId(id))
    if (error === null) return null
    if (error.code === 'internal-error') return internalError(new Error(error.message))
    return new HarmonyParseError(error.code, error.message, error.tokenOffset, error.header ?? null, null)
  }

  /** The string behind a header field id of this pool's output; null for 0 (absent). */
  nameOf(id: number): string | null {
    return this.names.nameOf(id)
  }
}
