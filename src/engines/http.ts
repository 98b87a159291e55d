/**
 * The one HTTP client of the engine clients: a JSON POST whose answer streams back as server-sent events,
 * read only as fast as the caller asks for them (the socket is paused between reads, so a slow gateway holds
 * the engine back through TCP instead of buffering its output), with connect and idle timeouts, an
 * AbortSignal that destroys the connection (the engine sees it close and frees the sequence), and every
 * failure as an `EngineError`. Connections are kept alive and reused (keep-alive.ts): a stream read to its end
 * gives its socket back, any other closes it.
 */
import { type Agent, type ClientRequest, request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import type { Socket } from 'node:net'
import { EngineError } from './errors'
import { isLostRequest, poolOf, release } from './keep-alive'
import { type SseEvent, SseReader } from './sse'
import type { GenerateRequest } from './types'

export interface HttpOptions {
  /**
   * Time to open the connection (TCP, and TLS for https). Default 10 s. The wait for the response head is
   * not part of it: llama.cpp answers only once the first token exists, after the whole prefill.
   */
  connectTimeoutMs?: number
  /**
   * Longest silence from the engine: before the response head, and between bytes of the stream. Default
   * 120 s (a long prompt can take a while to prefill).
   */
  readTimeoutMs?: number
  /** Extra request headers, e.g. `authorization`. */
  headers?: Record<string, string>
  /** Largest single event accepted (see `SseReader`). Default 1 MiB. */
  maxEventBytes?: number
  /**
   * Most bytes one generation's stream may take, whatever its events hold (a runaway engine without a token
   * limit, or one sending events without ids). Default 256 MiB: far above a whole context's worth of events.
   */
  maxStreamBytes?: number
  /**
   * Keep connections to the engine open between generations and reuse them. Default true: a pool per client,
   * idle connections closed after 2 s (before the engine's server closes them: 5 s for uvicorn, llama.cpp's
   * server and the others) or sooner when the server's `Keep-Alive` says so; a connection is reused only after a
   * stream that ended cleanly, and a request lost to an idle connection the engine was closing at that moment is
   * sent again once on a new one. false: a connection per generation, closed at its end.
   */
  keepAlive?: boolean
}

export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000
export const DEFAULT_READ_TIMEOUT_MS = 120_000
export const DEFAULT_MAX_EVENT_BYTES = 1 << 20
export const DEFAULT_MAX_STREAM_BYTES = 256 * (1 << 20)
/** How much of an error body is read to find the engine's message, and how much of it a message keeps. */
const MAX_ERROR_BODY = 64 * 1024
const MAX_ERROR_TEXT = 1000

/** W3C Trace Context's `traceparent`: version, trace id, parent id, flags (lowercase hex). */
const TRACEPARENT = /^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/
/** `tracestate`: list members of printable characters, at most 512 of them (the specification's bound). */
const TRACESTATE = /^[\x20-\x7e]{1,512}$/

/**
 * `options` with the request's trace context as headers (`GenerateRequest.traceparent`, `.tracestate`), so the
 * engine joins the caller's trace; the same object when there is none, or when it is malformed.
 */
function withTrace(options: HttpOptions, request: { traceparent?: string; tracestate?: string }): HttpOptions {
  const { traceparent, tracestate } = request
  if (traceparent === undefined || !TRACEPARENT.test(traceparent)) return options
  const headers: Record<string, string> = { ...options.headers, traceparent }
  if (tracestate !== undefined && TRACESTATE.test(tracestate)) headers.tracestate = tracestate
  return { ...options, headers }
}

/**
 * POSTs `body` (as JSON) to `url`, with the trace context of `request` (`withTrace`), and yields the events of
 * the answer, as many at a time as one read of the socket completed (never an empty batch): an engine that
 * runs ahead of the gateway sends hundreds per read, and its caller handles them together (one step, one
 * write to the client) instead of one by one. `engineMessage` extracts the engine's
 * own error text from a JSON error body (null when it is not in the engine's shape: the raw text is kept
 * then). Nothing is sent until the first `next()`; breaking out of the loop, or aborting `signal`, closes the
 * connection at once.
 */
export async function* postEvents(
  engine: string,
  url: URL,
  body: unknown,
  options: HttpOptions,
  request: Pick<GenerateRequest, 'signal' | 'traceparent' | 'tracestate'>,
  engineMessage: (json: unknown) => string | null,
): AsyncGenerator<SseEvent[]> {
  const { signal } = request
  if (signal?.aborted) throw aborted(engine, 'before it was sent')
  const readTimeout = options.readTimeoutMs ?? DEFAULT_READ_TIMEOUT_MS
  const pool = poolOf(options, url)
  const response = await open(engine, url, body, withTrace(options, request), readTimeout, signal, pool)
  // From here on an abort destroys the response at once, even while the consumer is busy elsewhere and no
  // read is waiting: the engine must not keep generating for a caller that left.
  const onAbort = () => response.destroy()
  signal?.addEventListener('abort', onAbort, { once: true })
  const reader = new SseReader(options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES)
  // How the loop was left: its caller stopped at a yield ('left'; `sawDone`: the events it was last given ended
  // with `data: [DONE]`), the body was read to its end ('ended'), or anything failed.
  let outcome: 'failed' | 'left' | 'ended' = 'failed'
  let sawDone = false
  try {
    const status = response.statusCode ?? 0
    if (status < 200 || status >= 300) throw await httpError(engine, response, status, readTimeout, signal, engineMessage)
    let left = options.maxStreamBytes ?? DEFAULT_MAX_STREAM_BYTES
    for (;;) {
      const chunk = await nextChunk(engine, response, readTimeout, signal)
      if (chunk === null) break
      left -= chunk.length
      if (left < 0) {
        const limit = options.maxStreamBytes ?? DEFAULT_MAX_STREAM_BYTES
        throw new EngineError('engine-protocol-error', `${engine}: the stream passed ${limit} bytes (maxStreamBytes)`, { engine })
      }
      let events: SseEvent[]
      try {
        events = reader.push(chunk)
      } catch (error) {
        throw new EngineError('engine-protocol-error', `${engine}: ${(error as Error).message}`, { engine, cause: error })
      }
      if (events.length === 0) continue
      // Nothing more once aborted, not even what one chunk already held.
      if (signal?.aborted) throw aborted(engine)
      sawDone = events[events.length - 1]!.data === '[DONE]'
      outcome = 'left'
      yield events
      outcome = 'failed'
    }
    const last = reader.end()
    outcome = 'ended'
    if (last.length > 0) yield last
  } finally {
    signal?.removeEventListener('abort', onAbort)
    // Read to its end, the socket is back in the pool already (Node gives it back at the body's end); left at a
    // yield, it goes back if nothing but the body's end is left (`release`); else (an error, an abort, a timeout,
    // an HTTP error) the connection goes, and with it the sequence.
    if (outcome === 'left' && pool !== false && !signal?.aborted) release(response, reader, sawDone)
    else if (outcome !== 'ended' || !response.complete) response.destroy()
  }
}

export function aborted(engine: string, when = ''): EngineError {
  return new EngineError('engine-aborted', `${engine}: the request was aborted${when ? ` ${when}` : ''}`, { engine })
}

/**
 * Sends the request and resolves with the response head. Two clocks: `connectTimeoutMs` until the socket is
 * connected (and TLS done), then `readTimeout` until the head arrives. A request lost to a pooled socket the engine
 * was closing (`isLostRequest`) is sent once more, on a new connection, under both clocks and the signal again.
 */
async function open(
  engine: string,
  url: URL,
  body: unknown,
  options: HttpOptions,
  readTimeout: number,
  signal: AbortSignal | undefined,
  pool: Agent | false,
): Promise<IncomingMessage> {
  const payload = Buffer.from(JSON.stringify(body))
  const response = await send(engine, url, payload, options, readTimeout, signal, pool)
  if (response !== LOST) return response
  // Outside the pool: a new connection for sure (another idle one may be closing too), closed after this stream.
  const again = await send(engine, url, payload, options, readTimeout, signal, false)
  // A new connection is never retried, so never LOST; the check keeps the type honest.
  if (again === LOST) throw new EngineError('engine-connection-error', `${engine}: cannot reach ${url.origin}`, { engine })
  return again
}

/** What `send` resolves with when its request was lost to a closing pooled socket and may be sent again. */
const LOST = Symbol('lost')

/** One try of `open`: the response head, or LOST. */
function send(
  engine: string,
  url: URL,
  payload: Buffer,
  options: HttpOptions,
  readTimeout: number,
  signal: AbortSignal | undefined,
  pool: Agent | false,
): Promise<IncomingMessage | typeof LOST> {
  if (signal?.aborted) return Promise.reject(aborted(engine))
  const post = url.protocol === 'https:' ? httpsRequest : httpRequest
  const connectTimeout = options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined
    let settled = false
    // A reused socket: whether any byte of an answer came on it (then the request is never sent again).
    let reused: Socket | null = null
    let answered = false
    const onBytes = () => {
      answered = true
    }
    const settle = (error: EngineError | typeof LOST | null, response?: IncomingMessage) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      reused?.off('data', onBytes)
      if (error === LOST) {
        request.destroy()
        resolve(LOST)
      } else if (error !== null) {
        request.destroy()
        reject(error)
      } else resolve(response!)
    }
    const waitForHead = () => {
      clearTimeout(timer)
      timer = setTimeout(
        () =>
          settle(
            new EngineError(
              'engine-read-timeout',
              `${engine}: no response from ${url.origin} within ${readTimeout} ms of sending the request`,
              { engine },
            ),
          ),
        readTimeout,
      )
    }
    const onAbort = () => settle(aborted(engine))
    const request: ClientRequest = post(
      url,
      {
        method: 'POST',
        // The engine's own framing needs these; the caller's headers come first so they cannot break it.
        headers: { accept: 'text/event-stream', ...options.headers, 'content-type': 'application/json', 'content-length': payload.length },
        agent: pool,
      },
      (response) => {
        // Paused: bytes are read only when `nextChunk` asks, so TCP holds the engine back.
        response.pause()
        // An error answer's body is read to its end too (`httpError`): its connection is closed all the same, not
        // given back (Node closes it at the body's end then), as a failed stream's is.
        const status = response.statusCode ?? 0
        if (status < 200 || status >= 300) request.shouldKeepAlive = false
        settle(null, response)
      },
    )
    timer = setTimeout(
      () =>
        settle(
          new EngineError('engine-connect-timeout', `${engine}: could not connect to ${url.origin} within ${connectTimeout} ms`, {
            engine,
          }),
        ),
      connectTimeout,
    )
    request.on('socket', (socket: Socket) => {
      if (request.reusedSocket) {
        reused = socket
        socket.once('data', onBytes)
      }
      // A new socket is still connecting here and reports `connect` (plain) or `secureConnect` (TLS, after the
      // handshake); a pooled one is connected already, and the wait for the head starts now.
      if (socket.connecting) socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', waitForHead)
      else waitForHead()
    })
    request.on('error', (error) =>
      settle(
        isLostRequest(request, error, answered)
          ? LOST
          : new EngineError('engine-connection-error', `${engine}: cannot reach ${url.origin}: ${error.message}`, { engine, cause: error }),
      ),
    )
    signal?.addEventListener('abort', onAbort, { once: true })
    request.end(payload)
  })
}

/**
 * The next chunk of the body (null at its end), waiting at most `timeoutMs` for it. The stream is in paused
 * mode: `read()` takes what is buffered, and only an empty buffer makes Node read more from the socket.
 */
function nextChunk(engine: string, response: IncomingMessage, timeoutMs: number, signal: AbortSignal | undefined): Promise<Buffer | null> {
  // Aborted while the caller was busy with the last events (the abort destroyed the response then).
  if (signal?.aborted) return Promise.reject(aborted(engine))
  const ready = response.read() as Buffer | null
  if (ready !== null) return Promise.resolve(ready)
  if (response.readableEnded) return Promise.resolve(null)
  // The connection broke while nobody was waiting: its `close` event has come and gone.
  if (response.destroyed) return Promise.reject(broken(engine))
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer)
      response.off('readable', onReadable).off('end', onEnd).off('error', onError).off('close', onClose)
      signal?.removeEventListener('abort', onAbort)
    }
    const onReadable = () => {
      const chunk = response.read() as Buffer | null
      if (chunk === null) return
      done()
      resolve(chunk)
    }
    const onEnd = () => {
      done()
      resolve(null)
    }
    const onError = (error: Error) => {
      done()
      reject(new EngineError('engine-connection-error', `${engine}: the stream broke: ${error.message}`, { engine, cause: error }))
    }
    const onClose = () => {
      done()
      if (response.readableEnded) resolve(null)
      else reject(signal?.aborted ? aborted(engine) : broken(engine))
    }
    const onAbort = () => {
      done()
      reject(aborted(engine))
    }
    const timer = setTimeout(() => {
      done()
      reject(new EngineError('engine-read-timeout', `${engine}: nothing received for ${timeoutMs} ms`, { engine }))
    }, timeoutMs)
    response.on('readable', onReadable).on('end', onEnd).on('error', onError).on('close', onClose)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

function broken(engine: string): EngineError {
  return new EngineError('engine-connection-error', `${engine}: the connection closed before the stream ended`, { engine })
}

/**
 * A non-2xx answer as an EngineError: the engine's message from its JSON error body when it has one in the
 * engine's shape, else the start of the raw text. The body is read bounded and under the read timeout.
 */
async function httpError(
  engine: string,
  response: IncomingMessage,
  status: number,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  engineMessage: (json: unknown) => string | null,
): Promise<EngineError> {
  const chunks: Buffer[] = []
  let size = 0
  try {
    for (
      let chunk = await nextChunk(engine, response, timeoutMs, signal);
      chunk !== null && size < MAX_ERROR_BODY;
      chunk = await nextChunk(engine, response, timeoutMs, signal)
    ) {
      chunks.push(chunk)
      size += chunk.length
    }
  } catch (error) {
    // An abort stays an abort; a body cut short still says what status the engine answered.
    if ((error as EngineError).code === 'engine-aborted') return error as EngineError
  }
  const text = Buffer.concat(chunks).toString('utf8').slice(0, MAX_ERROR_BODY).trim()
  let message: string | null = null
  try {
    message = engineMessage(JSON.parse(text))
  } catch {
    // Not JSON: the raw text below.
  }
  message ??= text === '' ? null : text.slice(0, MAX_ERROR_TEXT)
  // 429 and 503: the engine is busy (full queue, rate limit, still loading): a client may retry, when it says.
  const overloaded = status === 429 || status === 503
  return new EngineError(
    overloaded ? 'engine-overloaded' : 'engine-http-error',
    `${engine} answered HTTP ${status}${message ? `: ${message}` : ''}`,
    {
      engine,
      status,
      engineMessage: message,
      retryAfter: overloaded ? retryAfterOf(response.headers['retry-after']) : null,
    },
  )
}

/** A `Retry-After` value as RFC 9110 defines it (delay seconds, or an HTTP date), else null: nothing else is passed on. */
function retryAfterOf(value: string | undefined): string | null {
  if (value === undefined) return null
  const trimmed = value.trim()
  if (/^\d{1,10}$/.test(trimmed)) return trimmed
  return trimmed.length <= 64 &&
    /^[A-Za-z]{3}, \d{2} [A-Za-z]{3} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(trimmed) &&
    !Number.isNaN(Date.parse(trimmed))
    ? trimmed
    : null
}
