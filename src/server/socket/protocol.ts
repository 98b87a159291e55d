/**
 * The Responses API's WebSocket mode (Open Responses 2026-04-24, "WebSocket mode"; OpenAI's guide of the same
 * name): a client opens a WebSocket at `/v1/responses` and sends turns, each a text frame `{ type:
 * 'response.create', ...the Responses request body }`; each turn is answered with the same event objects as the
 * SSE stream, one per text frame, ending with one terminal event (`response.completed`, `response.incomplete`,
 * `response.failed`) or one error frame `{ type: 'error', status, error: { type, code, message, param } }`;
 * there is no `[DONE]`. Over one connection turns run one at a time, in the order they came. The most recent
 * response is kept in the connection's memory, so a client continues from it with `previous_response_id` also
 * when it was not stored (`store: false`); a continuation that fails forgets it (the specification's rule); a
 * connection lives at most 60 minutes (`websocket_connection_limit_reached`).
 *
 * This module is the protocol, not the transport: it takes text frames (`receive`) and sends them through a
 * `SocketTransport` (the example gateway adapts the `ws` package's sockets to it), and it runs each turn with
 * the gateway's `respond`, which streams the response's events through `emit`.
 */
import { checkOptions, is, type OptionSpec } from '../../base/options'
import { errorResponse, HttpError, previousResponseNotFound } from '../../http/errors'
import type { StoredResponse } from '../stores/store'

/** How the protocol reaches the client. */
export interface SocketTransport {
  /**
   * Sends one text frame; `sent`, when given, is called once it has left this process (ws: the send callback).
   * Asked for only when frames pile up (a callback per frame costs more than the frame).
   */
  send(text: string, sent?: (error?: Error) => void): void
  /** Bytes of frames sent and not yet out (ws: `bufferedAmount`). */
  readonly bufferedAmount: number
  /** Closes the connection with a WebSocket close code. */
  close(code: number, reason: string): void
}

/** One turn, as the gateway runs it. */
export interface SocketTurn {
  /** The `response.create` message without `type`, `stream` and `stream_options`: a Responses request body. */
  body: Record<string, unknown>
  /** The response `previous_response_id` names (this connection's latest, or the store's), or null when none is named. */
  previous: StoredResponse | null
  /**
   * Sends one event of the response: the object, or its JSON text (e.g. cut from the adapter's SSE frames by
   * `sseEventTexts`, which the adapters write faster than objects); waits while the client is not reading
   * (await it).
   */
  emit(event: object | string): Promise<void>
  /** Aborted when the connection closes. */
  signal: AbortSignal
  /** The message's length in characters (a gateway may render a large one off the event loop). */
  size: number
}

export interface ResponsesSocketOptions {
  transport: SocketTransport
  /**
   * Runs a turn: streams its events through `turn.emit` and returns the response's record (what a continuation
   * starts from), or null. An error thrown before any event is answered with an error frame (its status and
   * code as `errorResponse` gives them); one after the first event should end the response with
   * `response.failed` instead (an `error` event before it is folded into it: one terminal frame per turn).
   */
  respond(turn: SocketTurn): Promise<StoredResponse | null>
  /** A kept response by id, for a `previous_response_id` that is not this connection's latest. Default: none. */
  lookup?: (id: string) => Promise<StoredResponse | null>
  /** Called with errors answered with a 5xx (the client gets a generic message). */
  onError?: (error: unknown) => void
  /** How long a connection lives, in ms. Default 60 minutes, as the specification says. */
  lifetimeMs?: number
  /**
   * How long a connection may wait with no turn running and none asked for, in ms; then it is closed (1000,
   * `idle`), so that idle connections do not hold the gateway's places for the whole lifetime. Default 5 minutes.
   */
  idleMs?: number
  /** `response.create` messages that may wait behind the running turn; one more is refused. Default 8. */
  maxQueued?: number
  /** Characters of those messages together, at most; a message past it is refused. Default 8 MiB. */
  maxQueuedBytes?: number
  /** Bytes waiting to go out above which a turn waits for the client to read. Default 1 MiB. */
  highWaterMark?: number
  /**
   * How long a turn waits for a client that reads nothing before the connection is closed (1008). Default 30 s;
   * null: no bound.
   */
  stallTimeoutMs?: number | null
  /** Called when a connection is closed at `stallTimeoutMs`. */
  onWriteTimeout?: () => void
  /**
   * Told when the connection starts waiting for its next turn (true: no turn running and none asked for, from
   * its start too) and when it stops waiting (false: a message came, or the connection ended). A gateway keeps
   * its idle connections in that order, the longest idle first (`evict`).
   */
  onIdle?: (idle: boolean) => void
  /** The clock of its timers (lifetime, idle, stall). Default: Node's `setTimeout` and `clearTimeout`. */
  timers?: SocketTimers
}

/** A clock for a `ResponsesSocket`'s timers: Node's by default; a test's own, to move time itself. */
export interface SocketTimers {
  setTimeout(callback: () => void, ms: number): unknown
  clearTimeout(handle: unknown): void
}

const NODE_TIMERS: SocketTimers = {
  // Unref'd: a connection's timers do not keep a process alive on their own.
  setTimeout: (callback, ms) => setTimeout(callback, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
}

const OPTIONS: OptionSpec = {
  transport: is.object,
  respond: is.function,
  lookup: is.function,
  onError: is.function,
  lifetimeMs: is.integer(1),
  idleMs: is.integer(1),
  maxQueued: is.integer(0),
  maxQueuedBytes: is.integer(0),
  highWaterMark: is.integer(0),
  stallTimeoutMs: is.nullable(is.integer(1)),
  onWriteTimeout: is.function,
  onIdle: is.function,
  timers: {
    what: 'timers ({ setTimeout, clearTimeout })',
    test: (v) =>
      is.object.test(v) && typeof (v as SocketTimers).setTimeout === 'function' && typeof (v as SocketTimers).clearTimeout === 'function',
  },
}

export const DEFAULT_SOCKET_LIFETIME_MS = 60 * 60 * 1000
export const DEFAULT_SOCKET_IDLE_MS = 5 * 60 * 1000

const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed'])

/** What the client gets for a refused turn or a failure (the specification's error frame). */
interface ErrorFrame {
  type: 'error'
  status: number
  error: { type: string; code: string | null; message: string; param: string | null }
}

function frameOf(status: number, error: ErrorFrame['error']): ErrorFrame {
  return { type: 'error', status, error }
}

/** The error frame of a message refused as a whole (the gateway shutting down): no failure to log. */
function refusedFrame(refusal: unknown): ErrorFrame {
  const { status, body } = errorResponse(refusal)
  return frameOf(status, body.error)
}

/** A refused message: the code a bad field gets over HTTP too (`invalid_parameter`) unless it is the protocol's own. */
function invalid(message: string, param: string | null, code = 'invalid-parameter'): HttpError {
  return new HttpError(400, message, { param, code })
}

/** The Responses body of a `response.create` message; a 400 naming what is wrong with it. */
export function responseCreateBody(text: string): Record<string, unknown> {
  let message: unknown
  try {
    message = JSON.parse(text)
  } catch {
    throw invalid('the message is not JSON: send { "type": "response.create", ... }', null, 'invalid-json')
  }
  // As over HTTP, where a body that is no JSON object is invalid_json too.
  if (message === null || typeof message !== 'object' || Array.isArray(message))
    throw invalid('the message must be a JSON object: { "type": "response.create", ... }', null, 'invalid-json')
  const { type, stream, stream_options: _options, background, ...body } = message as Record<string, unknown>
  if (type !== 'response.create')
    throw invalid(
      `unsupported message type ${JSON.stringify(type)?.slice(0, 60)}: the WebSocket mode takes 'response.create'`,
      'type',
      'unknown-event-type',
    )
  // The specification says clients must not send these; the openai package's types still have them: what asks
  // for nothing is taken.
  if (stream === false) throw invalid('stream is implied over a WebSocket: every response streams', 'stream')
  if (background !== undefined && background !== null && background !== false)
    throw invalid('background is not supported over a WebSocket: use POST /v1/responses', 'background')
  return body
}

/** One WebSocket connection in the Responses API's WebSocket mode. */
export class ResponsesSocket {
  private readonly options: Required<Omit<ResponsesSocketOptions, 'lookup' | 'onError' | 'onWriteTimeout' | 'onIdle'>> &
    Pick<ResponsesSocketOptions, 'lookup' | 'onError' | 'onWriteTimeout' | 'onIdle'>
  private readonly queue: string[] = []
  /** Characters of the queued messages. */
  private queuedBytes = 0
  private running = false
  private ended = false
  private expired = false
  /** What a message is refused with while the gateway shuts down (`goAway`); null: turns are taken. */
  private refusal: unknown = null
  private readonly abort = new AbortController()
  /** The most recent response of this connection: what `previous_response_id` finds without a store. */
  private latest: StoredResponse | null = null
  private readonly lifetime: unknown
  /** Runs while the connection waits for a turn (none running or queued). */
  private idle: unknown = null

  constructor(options: ResponsesSocketOptions) {
    checkOptions(options, OPTIONS, 'ResponsesSocket')
    if (options.transport === undefined || options.respond === undefined)
      throw new TypeError("ResponsesSocket: options 'transport' and 'respond' are required")
    this.options = {
      lifetimeMs: DEFAULT_SOCKET_LIFETIME_MS,
      idleMs: DEFAULT_SOCKET_IDLE_MS,
      maxQueued: 8,
      maxQueuedBytes: 8 * 1024 * 1024,
      highWaterMark: 1024 * 1024,
      stallTimeoutMs: 30_000,
      timers: NODE_TIMERS,
      ...options,
    }
    this.lifetime = this.options.timers.setTimeout(() => this.expire(), this.options.lifetimeMs)
    this.waitIdle()
  }

  /** Starts the idle clock: the connection waits for its next turn. */
  private waitIdle(): void {
    if (this.ended) return
    this.idle = this.options.timers.setTimeout(() => this.evict(), this.options.idleMs)
    this.options.onIdle?.(true)
  }

  /** The idle clock stops: a message came, or the connection ended. */
  private stopIdle(): void {
    if (this.idle === null) return
    this.options.timers.clearTimeout(this.idle)
    this.idle = null
    this.options.onIdle?.(false)
  }

  /**
   * Closes a connection that waits for its next turn (1000, `idle`), as its idle timeout does: a gateway at its
   * cap of connections takes the place of the one idle longest so (`onIdle`). False, and nothing done, when a
   * turn runs or waits.
   */
  evict(): boolean {
    if (this.ended || this.idle === null) return false
    const transport = this.options.transport
    this.closed()
    transport.close(1000, 'idle')
    return true
  }

  /** A text frame from the client: a turn, run after those before it. */
  receive(text: string): void {
    if (this.ended) return
    this.stopIdle()
    if (this.refusal !== null) {
      void this.sendFrame(refusedFrame(this.refusal))
      return
    }
    if (this.expired) {
      // The running turn ends first; then the limit's error frame (`drain`).
      if (!this.running) this.limitReached()
      return
    }
    const { maxQueued, maxQueuedBytes } = this.options
    if (this.running && (this.queue.length >= maxQueued || this.queuedBytes + text.length > maxQueuedBytes)) {
      // Not queued (a client that floods the connection would hold its bodies here without bound).
      void this.sendFrame(
        frameOf(429, {
          type: 'invalid_request_error',
          code: 'websocket_queue_full',
          message: `${this.queue.length} response.create messages (${this.queuedBytes} characters) are already waiting on this connection; wait for a terminal event`,
          param: null,
        }),
      )
      return
    }
    this.queue.push(text)
    this.queuedBytes += text.length
    if (!this.running) void this.drain()
  }

  /** The connection closed: the running turn is aborted (its engine request with it), waiting ones dropped. */
  closed(): void {
    if (this.ended) return
    this.ended = true
    this.queue.length = 0
    this.queuedBytes = 0
    this.options.timers.clearTimeout(this.lifetime)
    this.stopIdle()
    this.abort.abort()
  }

  private async drain(): Promise<void> {
    this.running = true
    // After the connection's lifetime nothing more runs: what waits gets the limit's error frame.
    while (this.queue.length > 0 && !this.ended && !this.expired && this.refusal === null) {
      const text = this.queue.shift()!
      this.queuedBytes -= text.length
      await this.turn(text)
    }
    this.running = false
    if (this.refusal !== null) this.goneAway()
    else if (this.expired) this.limitReached()
    else this.waitIdle()
  }

  private async turn(text: string): Promise<void> {
    let previousId: string | null = null
    let terminal = false
    let emitted = false
    let heldError: Record<string, unknown> | null = null
    try {
      const body = responseCreateBody(text)
      const named = body.previous_response_id
      let previous: StoredResponse | null = null
      if (named !== undefined && named !== null) {
        if (typeof named !== 'string') throw invalid('previous_response_id must be a string', 'previous_response_id')
        previousId = named
        previous = this.latest?.id === named ? this.latest : ((await this.options.lookup?.(named)) ?? null)
        if (previous === null) {
          previousId = null
          // The same answer as over HTTP (`previousResponseNotFound`): one code for one fault on every transport.
          await this.sendFrame(this.errorFrame(previousResponseNotFound(named)))
          return
        }
      }
      const emit = async (event: object | string) => {
        if (this.ended) return
        const type = typeof event === 'string' ? typeOfText(event) : (event as { type?: unknown }).type
        // An error event is folded into the response.failed that follows it (one terminal frame per turn).
        if (type === 'error') {
          heldError = (typeof event === 'string' ? JSON.parse(event) : event) as Record<string, unknown>
          return
        }
        if (TERMINAL.has(type as string)) terminal = true
        emitted = true
        await this.sendFrame(event)
      }
      const record = await this.options.respond({ body, previous, emit, signal: this.abort.signal, size: text.length })
      if (this.ended) return
      if (!terminal) {
        await this.sendFrame(this.heldFrame(heldError))
        this.forget(previousId)
      } else if (record !== null && record.response.status !== 'failed') this.latest = record
      else this.forget(previousId)
    } catch (error) {
      this.forget(previousId)
      if (this.ended) return
      if (emitted && terminal) {
        // The client has its terminal frame: the failure after it is the server's to know.
        this.options.onError?.(error)
        return
      }
      await this.sendFrame(this.errorFrame(error))
    }
  }

  /** A continuation that failed: the response it named is forgotten (the specification's rule for the connection's memory). */
  private forget(id: string | null): void {
    if (id !== null && this.latest?.id === id) this.latest = null
  }

  private errorFrame(error: unknown): ErrorFrame {
    const { status, body } = errorResponse(error)
    if (status >= 500) this.options.onError?.(error)
    return frameOf(status, body.error)
  }

  /** A turn that ended without a terminal event: its error event as an error frame, or a generic one. */
  private heldFrame(held: Record<string, unknown> | null): ErrorFrame {
    const nested = (held?.error ?? held ?? {}) as Record<string, unknown>
    return frameOf(500, {
      type: 'server_error',
      code: typeof nested.code === 'string' ? nested.code : 'server_error',
      message: typeof nested.message === 'string' ? nested.message : 'the response ended without a terminal event',
      param: null,
    })
  }

  /**
   * The gateway is shutting down: no turn is taken any more. Each message waiting, and each that comes, is
   * answered with `refusal`'s error frame; the connection closes now when no turn runs, else once the running
   * turn has ended (which the gateway ends with `response.failed` at the end of its grace period). Closed with
   * 1001, RFC 6455's "going away" (a server going down), so that a client reconnects, to another gateway.
   */
  goAway(refusal: unknown): void {
    if (this.ended || this.refusal !== null) return
    this.refusal = refusal
    for (const _ of this.queue) void this.sendFrame(refusedFrame(refusal))
    this.queue.length = 0
    this.queuedBytes = 0
    if (!this.running) this.goneAway()
  }

  private goneAway(): void {
    if (this.ended) return
    const transport = this.options.transport
    this.closed()
    transport.close(1001, 'going away')
  }

  private expire(): void {
    this.expired = true
    if (!this.running) this.limitReached()
  }

  /** The connection's 60 minutes are up: one error frame, then the connection closes. */
  private limitReached(): void {
    if (this.ended) return
    const frame = frameOf(400, {
      type: 'invalid_request_error',
      code: 'websocket_connection_limit_reached',
      message: `Responses websocket connection limit reached (${Math.round(this.options.lifetimeMs / 60_000)} minutes). Create a new websocket connection to continue.`,
      param: null,
    })
    const transport = this.options.transport
    this.closed()
    transport.send(JSON.stringify(frame), () => transport.close(1000, 'connection limit reached'))
  }

  /**
   * One frame to the client (an object, or its JSON text). While little waits to go out, sent without waiting;
   * beyond `highWaterMark` the turn waits for this frame to go out (the engine is not read meanwhile), and a
   * client that reads nothing for `stallTimeoutMs` has its connection closed (1008) and its turn aborted.
   */
  private async sendFrame(value: object | string): Promise<void> {
    const { transport } = this.options
    const text = typeof value === 'string' ? value : JSON.stringify(value)
    if (transport.bufferedAmount <= this.options.highWaterMark) {
      transport.send(text)
      return
    }
    const { stallTimeoutMs } = this.options
    const outcome = await new Promise<'sent' | 'failed' | 'stalled'>((resolve) => {
      const { timers } = this.options
      const timer = stallTimeoutMs === null ? null : timers.setTimeout(() => resolve('stalled'), stallTimeoutMs)
      transport.send(text, (error) => {
        if (timer !== null) timers.clearTimeout(timer)
        resolve(error === undefined || error === null ? 'sent' : 'failed')
      })
    })
    if (outcome === 'stalled') {
      this.options.onWriteTimeout?.()
      transport.close(1008, 'the client does not read')
    }
    if (outcome !== 'sent') this.closed()
  }
}

/** The `type` of an event's JSON text as the adapters write it (`{"type":"…",…`), else what parsing it finds. */
function typeOfText(text: string): unknown {
  const match = /^\{"type":"([^"\\]+)"/.exec(text)
  return match !== null ? match[1] : (JSON.parse(text) as { type?: unknown }).type
}

/**
 * The JSON texts of the events in SSE frames (`event: …\ndata: {…}\n\n` each, as the adapters' SSE faces write
 * them): what a WebSocket sends one per message. JSON text has no raw newline, so a frame's data is its line.
 */
export function sseEventTexts(frames: string): string[] {
  const texts: string[] = []
  for (let at = frames.indexOf('data: '); at !== -1; at = frames.indexOf('data: ', at)) {
    const end = frames.indexOf('\n', at)
    texts.push(frames.slice(at + 6, end))
    at = end
  }
  return texts
}

/** What `serveResponsesSocket` needs of a WebSocket: the `ws` package's server-side socket, or one like it. */
export interface WebSocketLike {
  send(data: string, callback?: (error?: Error) => void): void
  readonly bufferedAmount: number
  close(code: number, reason: string): void
  terminate(): void
  ping(): void
  on(event: 'message', listener: (data: { toString(): string }, isBinary: boolean) => void): unknown
  on(event: 'close' | 'pong', listener: () => void): unknown
  on(event: 'error', listener: (error: Error) => void): unknown
}

export interface ServeResponsesSocketOptions extends Omit<ResponsesSocketOptions, 'transport'> {
  /** How often the connection is pinged; one that did not answer the last ping by the next is ended. Default 30 s. */
  heartbeatMs?: number
}

/**
 * A `ResponsesSocket` on a WebSocket of the `ws` package (or one with its API): text frames are turns, a
 * binary frame closes the connection (1003: the protocol is JSON text), and a peer that stops answering pings
 * is ended (a connection lost without a close would otherwise be held until its lifetime ends).
 */
export function serveResponsesSocket(ws: WebSocketLike, options: ServeResponsesSocketOptions): ResponsesSocket {
  const { heartbeatMs = 30_000, ...socketOptions } = options
  checkOptions({ heartbeatMs }, { heartbeatMs: is.integer(1) }, 'serveResponsesSocket')
  const session = new ResponsesSocket({
    ...socketOptions,
    transport: {
      send: (text, sent) => ws.send(text, sent),
      get bufferedAmount() {
        return ws.bufferedAmount
      },
      close: (code, reason) => ws.close(code, reason),
    },
  })
  let answered = true
  const heartbeat = setInterval(() => {
    if (!answered) {
      ws.terminate()
      return
    }
    answered = false
    ws.ping()
  }, heartbeatMs)
  heartbeat.unref()
  ws.on('pong', () => {
    answered = true
  })
  ws.on('message', (data, isBinary) => {
    if (isBinary) ws.close(1003, 'send response.create as a text frame of JSON')
    else session.receive(data.toString())
  })
  ws.on('close', () => {
    clearInterval(heartbeat)
    session.closed()
  })
  // A broken connection closes too ('close' follows); nothing more to do.
  ws.on('error', () => {})
  return session
}
