/**
 * Many streams behind one object (the TypeScript side of crate/core/src/pool.rs): each stream is a
 * `StreamParser` with the semantics it has alone; results come back in the compact format.
 */
import {
  COMPACT_BAD_INDEX,
  COMPACT_DIAGNOSTICS,
  COMPACT_FIRST_RECORD,
  COMPACT_RECORD_SLOTS,
  COMPACT_RECORDS,
  COMPACT_STATE,
  COMPACT_STATUS,
  COMPACT_STATUS_BAD_OFFSETS,
  COMPACT_STATUS_INTERNAL_ERROR,
  COMPACT_STATUS_INVALID_TOKEN,
  COMPACT_STATUS_UNKNOWN_STREAM,
  compactCapacity,
  NameTable,
  RECORD_STREAM,
} from '../compact'
import { type PoolBackend, type RawDiagnostic, type RawHeader, type RawParseError, STATE_NOT_OPEN } from '../protocol'
import { writeRecords } from './compact'
import { failGuarded, newStream, runGuarded, type Stream } from './guarded-stream'
import { sharedVocabulary, type Vocabulary } from './vocabulary'

/** Stream ids: the slot index in the low 24 bits, a generation in the high 8 (mirror INDEX_BITS and INDEX_MASK in pool.rs). */
export const INDEX_BITS = 24
export const INDEX_MASK = (1 << INDEX_BITS) - 1

/**
 * A single stream's call in the single form of the compact format (status, diagnostic count and state in
 * the header slots, no STREAM record); `tokens` null finishes. What a `HarmonyStreamParser` runs.
 */
export function callStream(stream: Stream, tokens: Uint32Array | null, out: Uint32Array, names: NameTable): string {
  checkCapacity(out, compactCapacity(tokens === null ? 0 : tokens.length))
  const wrote = runStream(stream, tokens, out)
  const output = stream.parser.output
  const at = wrote ? writeRecords(output, names, out, COMPACT_FIRST_RECORD, 0) : COMPACT_FIRST_RECORD
  out[COMPACT_RECORDS] = (at - COMPACT_FIRST_RECORD) / COMPACT_RECORD_SLOTS
  return wrote ? output.text : ''
}

/**
 * `callStream` without the records: runs the call and writes the header slots (no records). Returns
 * whether the call has results to read from `stream.parser.output` (not after an internal error or an
 * invalid token).
 */
export function runStream(stream: Stream, tokens: Uint32Array | null, out: Uint32Array): boolean {
  // The parser checks the ids itself (nothing is consumed if one is bad).
  const status = runGuarded(stream, tokens)
  const wrote = status !== COMPACT_STATUS_INTERNAL_ERROR && status !== COMPACT_STATUS_INVALID_TOKEN
  out[COMPACT_RECORDS] = 0
  out[COMPACT_STATUS] = status
  out[COMPACT_DIAGNOSTICS] = wrote ? stream.parser.output.diagnostics.length : 0
  out[COMPACT_STATE] = stream.parser.state
  out[COMPACT_BAD_INDEX] = status === COMPACT_STATUS_INVALID_TOKEN ? stream.badIndex : 0
  return wrote
}

interface Slot {
  generation: number
  stream: Stream | null
}

export class StreamPool implements PoolBackend {
  private readonly vocabulary: Vocabulary = sharedVocabulary()
  private readonly slots: Slot[] = []
  private readonly free: number[] = []
  private streamCount = 0
  /** Streams ended by `finish`, closed at the start of the next `open`, `step` or `finish` (as in pool.rs). */
  private readonly finished: number[] = []
  private readonly table = new NameTable()
  /** The texts of a step's streams, joined once at the end. */
  private readonly texts: string[] = []

  get size(): number {
    return this.streamCount
  }

  open(role: string | null, strict: boolean, maxHeaderTokens: number, toolNames: string[]): number {
    this.closeFinished()
    const stream = newStream(this.vocabulary, { role, strict, maxHeaderTokens, toolNames })
    let index = this.free.pop()
    if (index === undefined) {
      if (this.slots.length > INDEX_MASK) throw new Error('the pool is full')
      index = this.slots.push({ generation: 0, stream: null }) - 1
    }
    const slot = this.slots[index]
    slot.stream = stream
    this.streamCount++
    return (index | (slot.generation << INDEX_BITS)) >>> 0
  }

  private closeFinished(): void {
    for (let id = this.finished.pop(); id !== undefined; id = this.finished.pop()) this.close(id)
  }

  close(id: number): boolean {
    const slot = this.slotOf(id)
    if (slot === null) return false
    slot.stream = null
    slot.generation = (slot.generation + 1) & 0xff
    this.free.push(id & INDEX_MASK)
    this.streamCount--
    return true
  }

  private slotOf(id: number): Slot | null {
    const slot = this.slots[id & INDEX_MASK]
    return slot !== undefined && slot.stream !== null && slot.generation === id >>> INDEX_BITS ? slot : null
  }

  private streamOf(id: number): Stream | null {
    return this.slotOf(id)?.stream ?? null
  }

  step(streams: Uint32Array, offsets: Uint32Array, tokens: Uint32Array, out: Uint32Array): string {
    this.closeFinished()
    const n = streams.length
    if (offsets.length !== n + 1) return failed(out, COMPACT_STATUS_BAD_OFFSETS, 0)
    for (let i = 0; i < n; i++) if (offsets[i] > offsets[i + 1]) return failed(out, COMPACT_STATUS_BAD_OFFSETS, 0)
    const first = offsets[0]
    const last = offsets[n]
    if (last > tokens.length) return failed(out, COMPACT_STATUS_BAD_OFFSETS, 0)
    const unknown = this.firstUnknown(streams)
    if (unknown >= 0) return failed(out, COMPACT_STATUS_UNKNOWN_STREAM, unknown)
    for (let i = first; i < last; i++) {
      if (!this.vocabulary.contains(tokens[i])) return failed(out, COMPACT_STATUS_INVALID_TOKEN, i)
    }
    checkCapacity(out, compactCapacity(last - first, n))
    return this.runStreams(streams, (i) => tokens.subarray(offsets[i], offsets[i + 1]), out, false)
  }

  finish(streams: Uint32Array, out: Uint32Array): string {
    this.closeFinished()
    const unknown = this.firstUnknown(streams)
    if (unknown >= 0) return failed(out, COMPACT_STATUS_UNKNOWN_STREAM, unknown)
    const seen = new Set<number>()
    for (let i = 0; i < streams.length; i++) {
      // The first finish would close the stream the second one names.
      if (seen.has(streams[i])) return failed(out, COMPACT_STATUS_UNKNOWN_STREAM, i)
      seen.add(streams[i])
    }
    checkCapacity(out, compactCapacity(0, streams.length))
    return this.runStreams(streams, () => null, out, true)
  }

  private firstUnknown(streams: Uint32Array): number {
    for (let i = 0; i < streams.length; i++) if (this.streamOf(streams[i]) === null) return i
    return -1
  }

  private runStreams(streams: Uint32Array, tokensOf: (i: number) => Uint32Array | null, out: Uint32Array, close: boolean): string {
    const texts = this.texts
    texts.length = 0
    let utf16 = 0
    let at = COMPACT_FIRST_RECORD
    for (let i = 0; i < streams.length; i++) {
      const id = streams[i]
      const stream = this.streamOf(id)!
      const status = runGuarded(stream, tokensOf(i))
      const output = stream.parser.output
      out[at] = RECORD_STREAM
      out[at + 1] = id
      out[at + 2] = status
      out[at + 3] = output.diagnostics.length
      at += COMPACT_RECORD_SLOTS
      if (status !== COMPACT_STATUS_INTERNAL_ERROR) {
        at = writeRecords(output, this.table, out, at, utf16)
        if (output.text !== '') texts.push(output.text)
        utf16 += output.text.length
      }
      if (close) this.finished.push(id)
    }
    out.fill(0, 0, COMPACT_FIRST_RECORD)
    out[COMPACT_RECORDS] = (at - COMPACT_FIRST_RECORD) / COMPACT_RECORD_SLOTS
    return texts.length === 1 ? texts[0] : texts.join('')
  }

  takeDiagnostics(id: number): RawDiagnostic[] {
    return this.streamOf(id)?.parser.output.diagnostics.splice(0) ?? []
  }

  takeHeaders(id: number): RawHeader[] {
    return this.streamOf(id)?.parser.output.headers.splice(0) ?? []
  }

  takeError(id: number): RawParseError | null {
    const stream = this.streamOf(id)
    if (stream === null) return null
    const error = stream.error
    stream.error = null
    return error
  }

  state(id: number): number {
    return this.streamOf(id)?.parser.state ?? STATE_NOT_OPEN
  }

  names(from: number): string[] {
    return this.table.names.slice(from)
  }

  debugPanic(id: number): number {
    const stream = this.streamOf(id)
    return stream === null ? COMPACT_STATUS_INTERNAL_ERROR : failGuarded(stream)
  }
}

/** Errors the caller can cause, as data (`status`, `index`), like `PoolError::write_status`. */
function failed(out: Uint32Array, status: number, index: number): string {
  if (out.length < COMPACT_FIRST_RECORD) throw new Error('output array too small')
  out.fill(0, 0, COMPACT_FIRST_RECORD)
  out[COMPACT_STATUS] = status
  out[COMPACT_BAD_INDEX] = index
  return ''
}

function checkCapacity(out: Uint32Array, needed: number): void {
  if (out.length < needed) throw new Error(`output array too small: ${needed} slots needed`)
}
