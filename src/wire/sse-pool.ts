/**
 * Many adapters, one call per engine step, SSE bytes out: the shape of a gateway's decode loop when one
 * engine step yields a token or a few for every running request.
 *
 *   const pool = new SsePool()
 *   const a = pool.add(new ChatCompletionsStream({ model, tools: body.tools }))
 *   const b = pool.add(new ResponsesStream({ model }))
 *   const frames = pool.step(Uint32Array.of(a, b), Uint32Array.of(0, 1, 2), tokens)   // one token each
 *   for (let i = 0; i < frames.length; i++) sockets[i].write(frames.frame(i))
 *   sockets[0].end(pool.finish(a) + 'data: [DONE]\n\n')
 *
 * Each stream's bytes are exactly what its adapter's `pushSse` would have returned for the same tokens
 * (and `finish` returns its `finishSse`). Most steps of a stream only add text to the message being read;
 * those are served in one call for all streams (in Rust on the native implementation: no event objects, no
 * crossing per stream), from a frame template the adapter gave for that message. The rest (a header, a
 * stop token, anything unusual) is handed to the adapter itself.
 */

import { internalError } from '../api/parser'
import { plainUint32Array, poolImplementation, throwForStepStatus } from '../api/pool'
import { createLaneStepper, forcedImplementation } from '../backend/choose'
import {
  FRAMES_BAD_INDEX,
  FRAMES_ENDS,
  FRAMES_SLOTS_PER_STREAM,
  FRAMES_SLOW,
  FRAMES_STATUS,
  type FrameTemplate,
  LANE_TEXT,
} from '../backend/frames'
import type { BackendStream, LaneStepper } from '../backend/protocol'
import { HarmonyLimitError } from '../base/errors'
import type { Implementation } from '../base/types'
import type { WireAdapter } from './adapter'
import type { FinishOptions } from './finish'
import type { LaneTemplate, PooledAdapter } from './lane'

export interface SsePoolOptions {
  /**
   * Run on a given implementation. Without it: js, which measured faster here than native (docs/API.md
   * "Implementation choice"), unless HARMONY_STREAM_IMPL forces one. Adapters added run on the pool's
   * implementation: one made without `parser.implementation` and fed nothing yet is moved onto it.
   */
  implementation?: Implementation
}

/**
 * The pool's implementation when its options name none. js: over many streams at one token per step native
 * measured slower in `npm run bench:side-by-side` (0.82-0.87 of js on 64 Chat streams of short messages, 0.93-0.96
 * on 1,024 streams or long messages, level to 1.10 on 1,024 Responses streams): the step's frames are a
 * `Uint8Array` view per stream, the message boundaries go through the adapters in JavaScript on either
 * implementation, and each boundary on native crosses into Rust (docs/PERFORMANCE.md "Native and js side by side").
 */
const SSE_POOL_DEFAULT: Implementation = 'js'

/** A stream whose adapter threw in a step (e.g. a strict-mode parse error): send an error frame and remove it. */
export interface SseStreamError {
  /** Its index in the step's `streams`. */
  index: number
  id: number
  error: Error
}

/**
 * The bytes of one step, per stream: `frame(i)` for `streams[i]`, a `Uint8Array` (UTF-8, a view into one
 * buffer for the whole step) or a string, `''` when the step made nothing to send. Either can be passed to
 * `socket.write` as it is; the buffer is never reused, so a write still pending keeps its bytes.
 */
export class SseFrames {
  /**
   * The buffer of the lane's bytes and where they start in it: a frame is a plain `Uint8Array` over it (made
   * several times faster than a Buffer's `subarray`, and faster again without asking the array for its buffer
   * each time).
   */
  private readonly buffer: ArrayBuffer | null
  private readonly base: number

  constructor(
    frames: Uint8Array | string[],
    /** The number of streams in the step. */
    readonly length: number,
    /** Where each stream's part of the native lane's bytes ends (null for the TypeScript lane's strings). */
    private readonly ends: Uint32Array | null,
    /** Each stream's frame as a string when not in `bytes`: the TypeScript lane's, and the adapters' own. */
    private readonly texts: string[] | null,
    /** Streams whose adapter threw: their frame is ''. */
    readonly errors: readonly SseStreamError[],
  ) {
    this.buffer = Array.isArray(frames) ? null : (frames.buffer as ArrayBuffer)
    this.base = Array.isArray(frames) ? 0 : frames.byteOffset
  }

  frame(index: number): Uint8Array | string {
    if (!(Number.isInteger(index) && index >= 0 && index < this.length)) throw new RangeError(`no stream at index ${index} in this step`)
    const text = this.texts?.[index]
    if (text) return text
    const { buffer, ends } = this
    if (buffer === null || ends === null) return ''
    const start = index === 0 ? 0 : ends[index - 1]
    const end = ends[index]
    return start === end ? '' : new Uint8Array(buffer, this.base + start, end - start)
  }
}

interface Entry {
  adapter: PooledAdapter
  backend: BackendStream
  /** The lane as last set (the backend is asked again only when it changes): open, its template and counter. */
  laneOpen: boolean
  template: FrameTemplate | null
  counter: number
}

/** Any wire adapter (`ChatCompletionsStream`, `ResponsesStream`): the base gives each the lane hooks. */
type SseAdapter = WireAdapter<object, unknown>

/** Adapters in some pool: one adapter, one pool, or two decode loops would feed one completion. */
const pooled = new WeakSet<object>()

const NO_ERRORS: readonly SseStreamError[] = Object.freeze([])

export class SsePool {
  readonly implementation: Implementation
  private readonly stepper: LaneStepper
  private readonly entries = new Map<number, Entry>()
  /** The stepper's answer (FRAMES_* layout: 3 + 3 × streams slots), reused. */
  private ends = new Uint32Array(FRAMES_ENDS + FRAMES_SLOTS_PER_STREAM * 64)

  constructor(options: SsePoolOptions = {}) {
    this.implementation = poolImplementation(options, 'SsePool', forcedImplementation ?? SSE_POOL_DEFAULT)
    this.stepper = createLaneStepper(this.implementation)
  }

  /** Streams in the pool. */
  get size(): number {
    return this.entries.size
  }

  /**
   * Takes over a new or running adapter (`ChatCompletionsStream` or `ResponsesStream` reading token ids, on
   * this pool's implementation); returns the id that names it in `step`, `finish` and `remove`. From now on
   * feed it only through the pool.
   */
  add(adapter: SseAdapter): number {
    const candidate = adapter as unknown as Partial<PooledAdapter> & { options?: { input?: string } }
    if (candidate === null || typeof candidate !== 'object' || typeof candidate.laneTemplate !== 'function') {
      throw new TypeError('add() takes a ChatCompletionsStream or a ResponsesStream')
    }
    if (candidate.options?.input === 'text' || candidate.options?.input === 'stripped')
      throw new TypeError(`the pool feeds token ids: this adapter reads text (input: '${candidate.options.input}')`)
    if ((candidate.options as { logprobs?: boolean } | undefined)?.logprobs === true)
      throw new TypeError('the pool feeds token ids: an adapter with logprobs reads them from engine steps (push or pushSse)')
    if (pooled.has(adapter)) throw new TypeError('this adapter is already in a pool')
    if (candidate.laneStream!() === null) throw new TypeError('this adapter is finished or closed')
    if (!candidate.laneOn!(this.implementation)) {
      throw new TypeError(
        `this pool runs on the ${this.implementation} implementation and the adapter's parser does not: make the adapter with parser: { implementation: '${this.implementation}' }, add it before its first token, or make the pool with the adapter's implementation`,
      )
    }
    const backend = candidate.laneStream!()!
    const id = this.addToStepper(backend)
    pooled.add(adapter)
    const entry: Entry = { adapter, backend, laneOpen: false, template: null, counter: 0 }
    this.entries.set(id, entry)
    this.setLane(entry)
    return id
  }

  /** The stepper's id for `backend`: a TypeError for a backend stream of the other implementation, else only a full lane table fails. */
  private addToStepper(backend: BackendStream): number {
    try {
      return this.stepper.add(backend)
    } catch (cause) {
      if (cause instanceof TypeError) throw cause
      throw new HarmonyLimitError(`SsePool.add: ${(cause as Error).message}`, { cause })
    }
  }

  /**
   * One engine step: `tokens.subarray(offsets[i], offsets[i + 1])` are the next tokens of stream
   * `streams[i]` (`offsets` has one entry more than `streams`; a stream at most once). Returns every
   * stream's SSE bytes. Bad arguments (an id not in this pool, bad offsets, a token id outside the
   * vocabulary) throw a RangeError before anything is consumed; an adapter that throws (strict mode) is
   * reported in `errors` and does not stop the others.
   */
  step(streams: Uint32Array, offsets: Uint32Array, tokens: Uint32Array): SseFrames {
    streams = plainUint32Array(streams, 'streams')
    offsets = plainUint32Array(offsets, 'offsets')
    tokens = plainUint32Array(tokens, 'tokens')
    const count = streams.length
    if (this.ends.length < FRAMES_ENDS + FRAMES_SLOTS_PER_STREAM * count)
      this.ends = new Uint32Array(FRAMES_ENDS + FRAMES_SLOTS_PER_STREAM * Math.max(count, this.ends.length))
    const ends = this.ends
    let frames: Uint8Array | string[]
    try {
      frames = this.stepper.step(streams, offsets, tokens, ends)
    } catch (cause) {
      throw internalError(cause)
    }
    throwForStepStatus(ends[FRAMES_STATUS], ends[FRAMES_BAD_INDEX], streams, tokens)
    const slow = ends[FRAMES_SLOW]
    // The adapters' frames go beside the lane's strings (js), or into strings of their own (native, made
    // dense at once: a sparse array's lookups are slow).
    let texts = Array.isArray(frames) ? frames : null
    let errors: SseStreamError[] | null = null
    for (let k = 0; k < slow; k++) {
      const index = ends[FRAMES_ENDS + count + 2 * k]
      const report = ends[FRAMES_ENDS + count + 2 * k + 1]
      const id = streams[index]
      try {
        const text = this.serve(this.entries.get(id)!, report, tokens.subarray(offsets[index], offsets[index + 1]))
        if (text !== '') (texts ??= new Array<string>(count).fill(''))[index] = text
      } catch (error) {
        ;(errors ??= []).push({ index, id, error: error as Error })
      }
    }
    // The native lane's ends are copied out of the array the next step reuses; the js lane has none.
    const frameEnds = Array.isArray(frames) ? null : ends.slice(FRAMES_ENDS, FRAMES_ENDS + count)
    return new SseFrames(frames, count, frameEnds, texts, errors ?? NO_ERRORS)
  }

  /** Ends stream `id` (its adapter's `finishSse(options)`: no `[DONE]`) and removes it from the pool. */
  finish(id: number, options: FinishOptions = {}): string {
    const entry = this.entryOf(id)
    this.absorb(entry)
    this.forget(id)
    return entry.adapter.finishSse(options)
  }

  /** Abandons stream `id` (the client went away): closes its adapter. False if it is not in the pool. */
  remove(id: number): boolean {
    const entry = this.entries.get(id)
    if (entry === undefined) return false
    this.forget(id)
    entry.adapter.close()
    return true
  }

  /**
   * A step the lane left to the adapter: first what the lane did (its report: tokens taken, and whether it
   * holds text), then the adapter, then the adapter's lane for what follows.
   */
  private serve(entry: Entry, report: number, tokens: Uint32Array): string {
    const tokensTaken = report % LANE_TEXT
    if (report >= LANE_TEXT) this.absorb(entry, tokensTaken)
    else if (tokensTaken > 0) entry.adapter.absorbLane({ text: '', tokens: tokensTaken, counter: 0 })
    let frames: string
    try {
      frames = entry.adapter.pushSse(tokens)
    } catch (error) {
      // Whatever state the adapter is left in, the lane writes nothing more for it.
      this.setLane(entry, null)
      throw error
    }
    this.setLane(entry)
    return frames
  }

  /** Everything the lane did that the adapter has not seen (`extraTokens`: reported already). */
  private absorb(entry: Entry, extraTokens = 0): void {
    const progress = entry.backend.takeLane()
    if (progress === null) return
    progress.tokens += extraTokens
    entry.counter = progress.counter
    entry.adapter.absorbLane(progress)
  }

  /** Gives the backend stream the adapter's lane (or `lane`), unless it has it already. */
  private setLane(entry: Entry, lane?: LaneTemplate | null): void {
    if (!entry.laneOpen && !entry.adapter.laneReady()) return
    if (lane === undefined) {
      // Between messages the template is not used: a stream enters a message only through a step the
      // adapter serves, after which the template is set. So it is left as it is (one crossing less).
      if (entry.laneOpen && !entry.adapter.readsMessage()) return
      lane = entry.adapter.laneTemplate()
    }
    const template = lane === null ? null : lane.template
    const counter = lane === null ? 0 : lane.counter
    if (entry.laneOpen && template === entry.template && counter === entry.counter) return
    if (!entry.backend.setLane(template, counter)) throw internalError(new Error('the lane of a stream in the pool could not be set'))
    entry.laneOpen = true
    entry.template = template
    entry.counter = counter
  }

  private entryOf(id: number): Entry {
    const entry = this.entries.get(id)
    if (entry === undefined) throw new RangeError(`stream id ${String(id)} is not in this pool`)
    return entry
  }

  private forget(id: number): void {
    this.entries.delete(id)
    this.stepper.remove(id)
  }
}
