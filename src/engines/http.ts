/**
 * The one HTTP client of the engine clients: a JSON POST whose answer streams back as server-sent events,
 * read only as fast as the caller asks for them (undici's parser stops between reads, exchange.ts, so a slow
 * gateway holds the engine back through TCP instead of buffering its output), with connect and idle timeouts,
 * an AbortSignal that closes the connection (the engine sees it close and frees the sequence), and every
 * failure as an `EngineError`. Connections are kept alive and reused (keep-alive.ts): a stream read to its end
 * gives its connection back, any other closes it.
 */
import { TurnBudget } from '../base/turn-budget'
import { EngineError } from './errors'
import { Exchange } from './exchange'
import { Connection, connectTimeoutOf, type EnginePool, isLostRequest, poolOf, release } from './keep-alive'
import { engineReads } from './read-budget'
import { type SseEvent, SseReader } from './sse'
import type { GenerateRequest } from './types'

export { DEFAULT_CONNECT_TIMEOUT_MS } from './keep-alive'

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
  const { connection, exchange } = await open(engine, url, body, withTrace(options, request), readTimeout, signal, pool)
  // From here on an abort closes the connection at once, even while the consumer is busy elsewhere and no read is
  // waiting: the engine must not keep generating for a caller that left.
  const onAbort = () => connection.close()
  signal?.addEventListener('abort', onAbort, { once: true })
  const reader = new SseReader(options.maxEventBytes ?? DEFAULT_MAX_EVENT_BYTES)
  // How the loop was left: its caller stopped at a yield ('left'; `sawDone`: the events it was last given ended
  // with `data: [DONE]`), the body was read to its end ('ended'), or anything failed.
  let outcome: 'failed' | 'left' | 'ended' = 'failed'
  let sawDone = false
  try {
    const status = exchange.statusCode
    if (status < 200 || status >= 300) throw await httpError(engine, exchange, status, readTimeout, signal, engineMessage)
    let left = options.maxStreamBytes ?? DEFAULT_MAX_STREAM_BYTES
    for (;;) {
      const chunk = await nextChunk(engine, exchange, readTimeout, signal)
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
    // Read to its end, the connection goes back to the pool; left at a yield, it goes back if nothing but the body's
    // end is left (`release`); else (an error, an abort, a timeout, an HTTP error) the connection goes, and with it
    // the sequence.
    if (pool === false || exchange.closing || signal?.aborted || outcome === 'failed') connection.close()
    else if (outcome === 'ended') pool.give(connection)
    else
      release(
        exchange,
        reader,
        sawDone,
        () => pool.give(connection),
        () => connection.close(),
      )
  }
}

export function aborted(engine: string, when = ''): EngineError {
  return new EngineError('engine-aborted', `${engine}: the request was aborted${when ? ` ${when}` : ''}`, { engine })
}

/** A request's connection and its answer, once the answer's head came. */
interface Answer {
  connection: Connection
  exchange: Exchange
}

/**
 * Sends the request and resolves with the answer's head. Two clocks: `connectTimeoutMs` until the socket is
 * connected (and TLS done: undici's own clock, set on the connection), then `readTimeout` until the head arrives.
 * A request lost to a pooled connection the engine was closing (`isLostRequest`) is sent once more, on a new
 * connection, under both clocks and the signal again.
 */
async function open(
  engine: string,
  url: URL,
  body: unknown,
  options: HttpOptions,
  readTimeout: number,
  signal: AbortSignal | undefined,
  pool: EnginePool | false,
): Promise<Answer> {
  const payload = Buffer.from(JSON.stringify(body))
  const answer = await send(engine, url, payload, options, readTimeout, signal, pool)
  if (answer !== LOST) return answer
  // Outside the pool: a new connection for sure (another idle one may be closing too), closed after this stream.
  const again = await send(engine, url, payload, options, readTimeout, signal, false)
  // A new connection is never retried, so never LOST; the check keeps the type honest.
  if (again === LOST) throw new EngineError('engine-connection-error', `${engine}: cannot reach ${url.origin}`, { engine })
  return again
}

/** What `send` resolves with when its request was lost to a closing pooled connection and may be sent again. */
const LOST = Symbol('lost')

/** One try of `open`: the answer, or LOST. */
function send(
  engine: string,
  url: URL,
  payload: Buffer,
  options: HttpOptions,
  readTimeout: number,
  signal: AbortSignal | undefined,
  pool: EnginePool | false,
): Promise<Answer | typeof LOST> {
  if (signal?.aborted) return Promise.reject(aborted(engine))
  const connectTimeout = connectTimeoutOf(options)
  const connection = pool === false ? new Connection(url.origin, connectTimeout) : pool.take()
  // Whether it goes out on a socket connected before it, and which (isLostRequest).
  const reused = connection.open
  const connects = connection.connects
  const exchange = new Exchange()
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined
    const settle = (error: EngineError | typeof LOST | null) => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      connection.client.off('connect', waitForHead)
      exchange.stopWaiting()
      if (error === null) {
        resolve({ connection, exchange })
        return
      }
      connection.close()
      if (error === LOST) resolve(LOST)
      else reject(error)
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
    const onEvent = () => {
      const { failure } = exchange
      if (failure !== null)
        settle(isLostRequest(connection, reused, connects, exchange) ? LOST : unreachable(engine, url, connectTimeout, failure))
      else if (exchange.statusCode !== 0) settle(null)
      else exchange.wait(onEvent)
    }
    exchange.wait(onEvent)
    signal?.addEventListener('abort', onAbort, { once: true })
    // A new connection connects first (undici's clock): the wait for the head starts when it has; on a pooled one, now.
    if (reused) waitForHead()
    else connection.client.once('connect', waitForHead)
    connection.client.dispatch(
      {
        method: 'POST',
        path: url.pathname + url.search,
        // The engine's own framing needs these; the caller's headers come first so they cannot break it.
        // Names in lower case, as undici sends them as given: `Accept` beside `accept` would go out twice.
        headers: { accept: 'text/event-stream', ...credentialsOf(url), ...lowerCased(options.headers), 'content-type': 'application/json' },
        body: payload,
      },
      exchange,
    )
    // undici writes a request on a kept-alive connection only at the end of the turn's I/O (its check of the idle
    // socket, client-h1.js `scheduleIdleSocketValidation`): the reads left in this turn would hold it back, and so
    // would what the budgets let go on at the turn's end, were it to come first.
    // Postponed first: closing the reads then schedules their end after the write too, only if none was.
    if (reused) {
      TurnBudget.postponeTurnEnds()
      engineReads.exhaust()
    }
  })
}

/** Header names in lower case (a later name that differs only in case wins). */
function lowerCased(headers: Record<string, string> | undefined): Record<string, string> {
  const lower: Record<string, string> = {}
  if (headers !== undefined) for (const [name, value] of Object.entries(headers)) lower[name.toLowerCase()] = value
  return lower
}

/**
 * The user and password of the base URL (`http://user:secret@host`) as Basic authorization, as `node:http` sends
 * them (its `urlToHttpOptions`); undici connects to the origin alone and would drop them.
 */
function credentialsOf(url: URL): { authorization?: string } {
  if (url.username === '' && url.password === '') return {}
  const pair = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`
  return { authorization: `Basic ${Buffer.from(pair).toString('base64')}` }
}

/** Why a request got no answer, as an EngineError: undici's connect timeout, or any other failure to reach the engine. */
function unreachable(engine: string, url: URL, connectTimeout: number, failure: Error): EngineError {
  if ((failure as NodeJS.ErrnoException).code === 'UND_ERR_CONNECT_TIMEOUT')
    return new EngineError('engine-connect-timeout', `${engine}: could not connect to ${url.origin} within ${connectTimeout} ms`, {
      engine,
      cause: failure,
    })
  return new EngineError('engine-connection-error', `${engine}: cannot reach ${url.origin}: ${failure.message}`, { engine, cause: failure })
}

/**
 * The next chunk of the body (null at its end), waiting at most `timeoutMs` for it: all the exchange gathered
 * since the last one (a socket read's worth), or the next that comes.
 */
function nextChunk(engine: string, exchange: Exchange, timeoutMs: number, signal: AbortSignal | undefined): Promise<Buffer | null> {
  // Aborted while the caller was busy with the last events (the abort closed the connection then).
  if (signal?.aborted) return Promise.reject(aborted(engine))
  const ready = exchange.read()
  if (ready !== null) return Promise.resolve(ready)
  if (exchange.complete) return Promise.resolve(null)
  if (exchange.failure !== null) return Promise.reject(broken(engine, exchange.failure, signal))
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer)
      exchange.stopWaiting()
      signal?.removeEventListener('abort', onAbort)
    }
    const look = () => {
      const chunk = exchange.read()
      if (chunk !== null || exchange.complete) {
        done()
        resolve(chunk)
      } else if (exchange.failure !== null) {
        done()
        reject(broken(engine, exchange.failure, signal))
      } else exchange.wait(look)
    }
    const onAbort = () => {
      done()
      reject(aborted(engine))
    }
    const timer = setTimeout(() => {
      done()
      reject(new EngineError('engine-read-timeout', `${engine}: nothing received for ${timeoutMs} ms`, { engine }))
    }, timeoutMs)
    signal?.addEventListener('abort', onAbort, { once: true })
    exchange.wait(look)
  })
}

/** A stream that failed before its end: the connection closed (or was reset) under it, or anything else broke it. */
function broken(engine: string, failure: Error, signal: AbortSignal | undefined): EngineError {
  if (signal?.aborted) return aborted(engine)
  // Closed under the answer: undici's own error, or its parser's when a `Connection: close` answer ended mid-body.
  const code = (failure as NodeJS.ErrnoException).code
  if (code === 'UND_ERR_SOCKET' || code === 'HPE_INVALID_EOF_STATE')
    return new EngineError('engine-connection-error', `${engine}: the connection closed before the stream ended`, {
      engine,
      cause: failure,
    })
  return new EngineError('engine-connection-error', `${engine}: the stream broke: ${failure.message}`, { engine, cause: failure })
}

/**
 * A non-2xx answer as an EngineError: the engine's message from its JSON error body when it has one in the
 * engine's shape, else the start of the raw text. The body is read bounded and under the read timeout.
 */
async function httpError(
  engine: string,
  exchange: Exchange,
  status: number,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  engineMessage: (json: unknown) => string | null,
): Promise<EngineError> {
  const chunks: Buffer[] = []
  let size = 0
  try {
    for (
      let chunk = await nextChunk(engine, exchange, timeoutMs, signal);
      chunk !== null && size < MAX_ERROR_BODY;
      chunk = await nextChunk(engine, exchange, timeoutMs, signal)
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
      retryAfter: overloaded ? retryAfterOf(exchange.retryAfter) : null,
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
