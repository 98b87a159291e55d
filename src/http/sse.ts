/**
 * Streaming an adapter's events to an HTTP response as server-sent events, with what a gateway must not get
 * wrong: one `write` per engine step; backpressure (when the socket's buffer is full, stop pulling engine steps
 * until it drains, so a client that stops reading holds the engine back instead of filling memory), bounded by a
 * write timeout (a client that takes nothing for that long is dropped, and its engine request with it); a client
 * that disconnects aborts the engine request (through `abort`, and by ending the iteration); a failure
 * mid-stream becomes the API's error frame, since the status line is long gone; Chat ends with `[DONE]`. What
 * differs between the APIs (opening events, the last frame, the error frame and answer) the adapter says.
 */
import type { ServerResponse } from 'node:http'
import { checkOptions, is, type OptionSpec } from '../base/options'
import type { WireAdapter } from '../wire/adapter'
import type { ChatCompletionChunk } from '../wire/chat'
import type { EngineStepInput, TokenIds } from '../wire/input'
import type { ResponseEvent } from '../wire/responses'
import { engineAborted, errorResponse, sendError } from './errors'

/** An engine step (`harmony-stream/engines`), or just its token ids. */
export type SseStep = TokenIds | EngineStepInput

export interface PipeSseOptions {
  /** Aborted when the client disconnects: pass the controller whose signal the engine request uses. */
  abort?: AbortController
  /** Extra response headers (the SSE ones are set unless the head was already sent). */
  headers?: Record<string, string>
  /**
   * `'sse'` (default): the adapters' SSE face (no event objects); `'objects'`: their object face, serialized
   * here. The bytes are the same; `'objects'` exists to measure what the SSE face saves.
   */
  frames?: 'sse' | 'objects'
  /**
   * Collect the frames of this many milliseconds into one write. Default 0: every engine step is written at
   * once. At one token per step the write (a system call per stream per token) is most of a gateway's CPU;
   * a few milliseconds of coalescing trade that much latency for far fewer writes (docs/PERFORMANCE.md).
   */
  coalesceMs?: number
  /**
   * Called once the completion has ended, after its last items and before the closing events that announce it
   * (Responses: `response.completed`), which wait for it: a gateway keeps the response here, so that a client
   * told `store: true` can fetch it (or, when keeping failed, is told `store: false`). Not called when the
   * stream fails or the client leaves first.
   */
  beforeConclude?: () => Promise<void>
  /**
   * How long a write may wait for the client to take it, in ms: a client whose socket does not drain within this
   * (while the stream waits to write more, or after its last bytes) is dropped, its connection closed, which
   * ends the stream as a client that leaves does (`abort` aborted, the outcome `client-closed`). Default 30 s;
   * null: no bound (a client that stops reading holds its connection, and the engine request, for as long as it
   * stays connected).
   */
  writeTimeoutMs?: number | null
  /** Called when a client is dropped at `writeTimeoutMs` (possibly after `pipeSse` has returned: its last bytes). */
  onWriteTimeout?: () => void
}

/** How long a write waits for a client that takes nothing, by default, before the client is dropped. */
export const DEFAULT_WRITE_TIMEOUT_MS = 30_000

const PIPE_SSE_OPTIONS: OptionSpec = {
  abort: { what: 'an AbortController', test: (v) => v instanceof AbortController },
  headers: {
    what: 'an object of header strings',
    test: (v) => is.object.test(v) && Object.values(v as object).every((h) => typeof h === 'string'),
  },
  frames: is.oneOf('sse', 'objects'),
  coalesceMs: is.number(0),
  beforeConclude: is.function,
  writeTimeoutMs: is.nullable(is.integer(1)),
  onWriteTimeout: is.function,
}

/** Coalesced frames are written before they reach this size, whatever the time. */
const COALESCE_MAX_BYTES = 64 * 1024

export interface PipeSseResult {
  /** `completed`: every event and the end were written; `client-closed`: the client left first; `failed`: an error frame ended the stream. */
  outcome: 'completed' | 'client-closed' | 'failed'
  /** What failed, for `failed` (log it: the client only got the error frame). */
  error?: unknown
}

/**
 * No `connection` header: Node sets it from the request (keep-alive, or close for a client that asked to close:
 * an explicit keep-alive kept such a connection open after the stream), and HTTP/2 forbids it.
 */
export const SSE_HEADERS = Object.freeze({
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
})

export function chatFrames(chunks: readonly ChatCompletionChunk[]): string {
  let out = ''
  for (const chunk of chunks) out += `data: ${JSON.stringify(chunk)}\n\n`
  return out
}

/** Events that carry their name (`type`): each framed with its `event:` line too, which some clients read events by. */
export function responsesFrames(events: readonly (ResponseEvent | { readonly type: string })[]): string {
  let out = ''
  for (const event of events) out += `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`
  return out
}

/**
 * The adapters `pipeSse` streams: any wire adapter; each says what its
 * API's stream opens and ends with, and how it tells a failure.
 */
export type SseAdapter = WireAdapter<object, unknown>

/** The engine's finish reason, for an engine step that has one. */
function finishOf(step: SseStep): string | undefined {
  return ArrayBuffer.isView(step) || Array.isArray(step) ? undefined : (step as EngineStepInput).finishReason
}

/** What pipeSse writes from: an adapter's SSE face, or its object face serialized (`frames: 'objects'`). */
interface SseFace {
  openingSse(): string
  pushSse(step: SseStep): string
  settleSse(options: { truncated: boolean }): string
  concludeSse(): string
}

function serializedObjects(adapter: SseAdapter): SseFace {
  return {
    openingSse: () => adapter.objectFrames(adapter.openingEvents()),
    pushSse: (step) => adapter.objectFrames(adapter.push(step)),
    settleSse: (options) => adapter.objectFrames(adapter.settle(options)),
    concludeSse: () => adapter.objectFrames(adapter.conclude()),
  }
}

/** What bounds a stream's writes: `PipeSseOptions.writeTimeoutMs` and `onWriteTimeout`. */
export interface WriteBound {
  writeTimeoutMs: number | null
  onWriteTimeout?: (() => void) | undefined
}

/** The bound of `options` (the default where it says nothing). */
function boundOf(options: { writeTimeoutMs?: number | null; onWriteTimeout?: () => void }): WriteBound {
  return {
    writeTimeoutMs: options.writeTimeoutMs === undefined ? DEFAULT_WRITE_TIMEOUT_MS : options.writeTimeoutMs,
    onWriteTimeout: options.onWriteTimeout,
  }
}

/**
 * Drops the client of `response`: its connection is closed ('close' follows, which its stream reads as a client
 * that left), and `onWriteTimeout` is told.
 */
function drop(response: ServerResponse, bound: WriteBound): void {
  if (response.destroyed) return
  bound.onWriteTimeout?.()
  response.destroy()
}

/**
 * Waits for `response` to drain (after a `write` that returned false), at most `writeTimeoutMs`: a client that
 * takes nothing for that long is dropped (its connection closed). Resolves on 'drain' or 'close', whichever
 * comes first; `left` (aborted when the client goes away) wakes it too.
 */
export function drained(response: ServerResponse, bound: WriteBound, left?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = bound.writeTimeoutMs === null ? null : setTimeout(() => drop(response, bound), bound.writeTimeoutMs)
    const done = () => {
      if (timer !== null) clearTimeout(timer)
      response.off('drain', done).off('close', done)
      left?.removeEventListener('abort', done)
      resolve()
    }
    response.once('drain', done).once('close', done)
    left?.addEventListener('abort', done, { once: true })
    if (response.destroyed || left?.aborted) done()
  })
}

/**
 * Ends `response` with `chunk`; a client that has not taken the last bytes within `writeTimeoutMs` is dropped,
 * so that a client that stopped reading does not hold its connection (and those bytes) once the stream is over.
 */
export function endWithin(response: ServerResponse, chunk: string, bound: WriteBound): void {
  response.end(chunk)
  if (bound.writeTimeoutMs === null || response.writableFinished || response.destroyed) return
  const timer = setTimeout(() => drop(response, bound), bound.writeTimeoutMs)
  const done = () => {
    clearTimeout(timer)
    response.off('finish', done).off('close', done)
  }
  response.once('finish', done).once('close', done)
}

/**
 * The socket side of a stream: frames written now or within `coalesceMs`, and backpressure (while the socket's
 * buffer is full, `send` waits for 'drain', so its caller pulls no engine step), at most the write timeout: a
 * client that takes nothing for that long is dropped. A client that leaves (or is dropped) aborts `abort` and
 * wakes whoever waits (`onLeft` too).
 */
class SseWriter {
  /** The client went away before the response was complete. */
  closed: boolean
  /** The socket's buffer is full: pull no engine step until it drains. */
  private full = false
  private wake: (() => void) | null = null
  private pending = ''
  private timer: NodeJS.Timeout | null = null

  constructor(
    private readonly response: ServerResponse,
    private readonly coalesceMs: number,
    private readonly abort: AbortController | undefined,
    private readonly bound: WriteBound,
    private readonly onLeft: () => void = () => {},
  ) {
    this.closed = response.destroyed
    response.on('close', this.onClose).on('drain', this.onDrain)
  }

  private readonly onClose = () => {
    if (this.response.writableFinished) return
    this.closed = true
    this.abort?.abort()
    this.wake?.()
    this.onLeft()
  }

  private readonly onDrain = () => {
    // A write from the coalescing timer may have filled the buffer and drained before anyone waited.
    this.full = false
    this.wake?.()
  }

  /** Writes what was collected; `full` if the socket's buffer is full (wait for 'drain' before pulling more). */
  readonly flush = () => {
    if (this.timer !== null) clearTimeout(this.timer)
    this.timer = null
    if (this.pending === '' || this.closed) return
    this.full = !this.response.write(this.pending) || this.full
    this.pending = ''
  }

  /**
   * Writes (now, or within `coalesceMs`), then waits while the socket's buffer is full or the client is gone:
   * at most the write timeout, after which the client is dropped (its 'close' ends the wait).
   */
  async send(text: string): Promise<void> {
    if (text === '' || this.closed) return
    this.pending += text
    if (this.coalesceMs === 0 || this.pending.length >= COALESCE_MAX_BYTES) this.flush()
    else this.timer ??= setTimeout(this.flush, this.coalesceMs)
    if (this.full && !this.closed) {
      const { writeTimeoutMs } = this.bound
      const stalled = writeTimeoutMs === null ? null : setTimeout(() => drop(this.response, this.bound), writeTimeoutMs)
      await new Promise<void>((resolve) => (this.wake = resolve))
      if (stalled !== null) clearTimeout(stalled)
    }
    this.full = false
    this.wake = null
  }

  /** What was collected and not written yet, taken (for the caller's last write, with its closing bytes). */
  takePending(): string {
    const pending = this.pending
    this.pending = ''
    return pending
  }

  /** The stream's last bytes, within the write timeout. */
  end(last: string): void {
    endWithin(this.response, last, this.bound)
  }

  /** Ends a stream that failed after its first step: what was collected, then the format's failure frames. */
  endFailed(failureSse: string, headers: Record<string, string> | undefined): void {
    if (!this.response.headersSent) this.response.writeHead(200, { ...SSE_HEADERS, ...headers })
    this.flush()
    this.end(failureSse)
  }

  /** Stops listening to the response (and the coalescing timer). */
  dispose(): void {
    if (this.timer !== null) clearTimeout(this.timer)
    this.response.off('close', this.onClose).off('drain', this.onDrain)
  }
}

export async function pipeSse(
  response: ServerResponse,
  adapter: SseAdapter,
  steps: AsyncIterable<SseStep>,
  options: PipeSseOptions = {},
): Promise<PipeSseResult> {
  checkOptions(options, PIPE_SSE_OPTIONS, 'pipeSse')
  const face: SseFace = options.frames === 'objects' ? serializedObjects(adapter) : adapter
  const writer = new SseWriter(response, options.coalesceMs ?? 0, options.abort, boundOf(options))
  const iterator = steps[Symbol.asyncIterator]()
  let first: IteratorResult<SseStep>
  try {
    // The first step before the status line: an engine that fails before generating anything (unreachable,
    // overloaded, the prompt refused) is answered with its HTTP error status, not a 200 and an error frame.
    first = await iterator.next()
  } catch (error) {
    writer.dispose()
    if (writer.closed) return { outcome: 'client-closed', error }
    // In the shape of the adapter's API.
    sendError(response, error, (failure) => adapter.errorAnswer(errorResponse(failure)))
    return { outcome: 'failed', error }
  }
  try {
    if (!response.headersSent) response.writeHead(200, { ...SSE_HEADERS, ...options.headers })
    // The adapters' SSE faces: the bytes of their events, built without event objects.
    // Some formats open with events of their own (Responses: response.created / in_progress); others with the first step.
    await writer.send(face.openingSse())
    let finishReason: string | undefined
    for (let next = first; !next.done && !writer.closed; next = await iterator.next()) {
      finishReason = finishOf(next.value) ?? finishReason
      // The whole step: the adapter keeps an engine step's usage and diagnostics.
      await writer.send(face.pushSse(next.value))
      if (adapter.stopped) {
        // A stop string ended the answer: the engine request ends now (its iterator closes the connection).
        await iterator.return?.()
        finishReason = 'stop'
        break
      }
    }
    if (writer.closed) {
      // Ends the iteration: the engine client closes its request.
      await iterator.return?.()
      return { outcome: 'client-closed' }
    }
    if (finishReason === 'abort') throw engineAborted()
    let last = writer.takePending() + face.settleSse({ truncated: finishReason === 'length' })
    if (options.beforeConclude !== undefined) await options.beforeConclude()
    last += face.concludeSse()
    // Chat ends with `data: [DONE]`; Responses in the Open Responses dialect too (the specification's terminal event).
    writer.end(last + adapter.doneSse())
    return { outcome: 'completed' }
  } catch (error) {
    await iterator.return?.().catch(() => {})
    if (writer.closed) return { outcome: 'client-closed', error }
    // The format's own failure (Chat: the error object OpenAI clients raise from a stream; Responses: its
    // `error` event, then `response.failed`).
    writer.endFailed(adapter.failureSse(errorResponse(error)), options.headers)
    return { outcome: 'failed', error }
  } finally {
    writer.dispose()
  }
}

/** One choice of several on one stream (`pipeChoicesSse`): its adapter and its engine's steps. */
export interface SseChoice {
  adapter: SseAdapter
  steps: AsyncIterable<SseStep>
  /** As `PipeSseOptions.beforeConclude`, for this choice: once its steps ended, before its closing events. */
  beforeConclude?: () => Promise<void>
}

export interface PipeChoicesOptions extends Omit<PipeSseOptions, 'beforeConclude'> {
  /** The SSE bytes after every choice's closing events, before the stream's last frame (Chat: the usage chunk). */
  closingSse?: () => string
}

const PIPE_CHOICES_OPTIONS: OptionSpec = {
  ...Object.fromEntries(Object.entries(PIPE_SSE_OPTIONS).filter(([name]) => name !== 'beforeConclude')),
  closingSse: is.function,
}

/** What came of one read of a choice's steps. */
type Arrival = { index: number; result: IteratorResult<SseStep> } | { index: number; error: unknown }

/**
 * Several choices of one answer on one stream (Chat's `n`): each choice's steps read by its own adapter, and
 * their frames written as they come, whichever choice they are of, so that no choice waits for another. Each
 * choice has at most one read pending; while the socket's buffer is full no step of any is pulled (`pipeSse`'s
 * backpressure). A choice whose steps end is settled and concluded then (Chat: its chunk with its finish
 * reason), after its `beforeConclude`; after the last, `closingSse` and the format's last frame. The first
 * choice's adapter answers for the stream (its error answer, error frame and last frame).
 *
 * A failure of any choice ends them all (its siblings' generations are of no use to a client whose answer
 * failed): `abort` is aborted, so their engine requests end, and their steps are closed. Before any step it is
 * answered with its HTTP status, after with the format's error frame, as `pipeSse` answers.
 */
export async function pipeChoicesSse(
  response: ServerResponse,
  choices: readonly SseChoice[],
  options: PipeChoicesOptions = {},
): Promise<PipeSseResult> {
  checkOptions(options, PIPE_CHOICES_OPTIONS, 'pipeChoicesSse')
  if (!Array.isArray(choices) || choices.length === 0) throw new TypeError('pipeChoicesSse: choices must be a non-empty array')
  const first = choices[0]!.adapter
  const faces: SseFace[] = choices.map(({ adapter }) => (options.frames === 'objects' ? serializedObjects(adapter) : adapter))
  const iterators = choices.map(({ steps }) => steps[Symbol.asyncIterator]())
  /** A read of the choice is pending; its steps are over (ended, stopped or closed here). */
  const reading = choices.map(() => false)
  const over = choices.map(() => false)
  const finishReasons: (string | undefined)[] = choices.map(() => undefined)
  // Reads that came back, in the order they came: a queue, not a race of the pending reads, whose reactions
  // would pile up on a choice that waits long while another streams.
  const arrived: Arrival[] = []
  let ready: (() => void) | null = null
  const writer = new SseWriter(response, options.coalesceMs ?? 0, options.abort, boundOf(options), () => ready?.())
  const read = (index: number) => {
    reading[index] = true
    let next: Promise<IteratorResult<SseStep>>
    try {
      next = iterators[index]!.next()
    } catch (error) {
      next = Promise.reject(error)
    }
    next.then(
      (result) => {
        reading[index] = false
        arrived.push({ index, result })
        ready?.()
      },
      (error: unknown) => {
        reading[index] = false
        arrived.push({ index, error })
        ready?.()
      },
    )
  }
  /** The next read that came back; undefined once the client left. */
  const nextArrival = async (): Promise<Arrival | undefined> => {
    while (arrived.length === 0 && !writer.closed) await new Promise<void>((resolve) => (ready = resolve))
    ready = null
    return writer.closed ? undefined : arrived.shift()
  }
  /**
   * Ends every choice still open: the engine requests aborted, the steps closed (now where no read is pending;
   * where one is, once it settles, which the abort hastens: an async generator takes `return` after it).
   */
  const endAll = async () => {
    options.abort?.abort()
    const closing: Promise<unknown>[] = []
    for (let i = 0; i < iterators.length; i++) {
      if (over[i]) continue
      over[i] = true
      const closed = Promise.resolve()
        .then(() => iterators[i]!.return?.())
        .catch(() => {})
      if (!reading[i]) closing.push(closed)
    }
    await Promise.all(closing)
  }
  for (let i = 0; i < iterators.length; i++) read(i)
  // The first read back before the status line, as `pipeSse` waits for its first step.
  const opening = await nextArrival()
  if (opening === undefined || 'error' in opening) {
    if (opening !== undefined) over[opening.index] = true
    await endAll()
    writer.dispose()
    if (opening === undefined || writer.closed)
      return { outcome: 'client-closed', ...(opening === undefined ? {} : { error: opening.error }) }
    sendError(response, opening.error, (failure) => first.errorAnswer(errorResponse(failure)))
    return { outcome: 'failed', error: opening.error }
  }
  try {
    if (!response.headersSent) response.writeHead(200, { ...SSE_HEADERS, ...options.headers })
    let opened = ''
    for (const face of faces) opened += face.openingSse()
    await writer.send(opened)
    let open = choices.length
    for (let arrival: Arrival | undefined = opening; arrival !== undefined; arrival = open > 0 ? await nextArrival() : undefined) {
      const { index } = arrival
      if ('error' in arrival) {
        over[index] = true
        throw arrival.error
      }
      const face = faces[index]!
      if (!arrival.result.done) {
        const step = arrival.result.value
        finishReasons[index] = finishOf(step) ?? finishReasons[index]
        await writer.send(face.pushSse(step))
        if (writer.closed) break
        if (!choices[index]!.adapter.stopped) {
          read(index)
          continue
        }
        // A stop string ended this choice's answer: its engine request ends now.
        over[index] = true
        await iterators[index]!.return?.()
        finishReasons[index] = 'stop'
      }
      over[index] = true
      open--
      if (finishReasons[index] === 'abort') throw engineAborted()
      const settled = face.settleSse({ truncated: finishReasons[index] === 'length' })
      await choices[index]!.beforeConclude?.()
      await writer.send(settled + face.concludeSse())
    }
    if (writer.closed) {
      await endAll()
      return { outcome: 'client-closed' }
    }
    writer.end(writer.takePending() + (options.closingSse?.() ?? '') + first.doneSse())
    return { outcome: 'completed' }
  } catch (error) {
    await endAll()
    if (writer.closed) return { outcome: 'client-closed', error }
    writer.endFailed(first.failureSse(errorResponse(error)), options.headers)
    return { outcome: 'failed', error }
  } finally {
    writer.dispose()
  }
}
