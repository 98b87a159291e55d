/**
 * Connections to an engine (http.ts): a pool per client of kept-alive connections, each a client of undici's with
 * one socket and one request at a time; idle ones closed before the engine's server closes them; one given back
 * only after a stream read to the end of its body; and a request that a closing idle connection lost sent again,
 * once, on a new one. A new connection costs event-loop turns on both sides before the first token can come
 * (issue 49); a router in front of the same workers (SMG) reuses its connections.
 *
 * A pool of one-connection clients rather than undici's own `Pool`: the rule that sends a lost request again needs
 * to know whether the request went out on a reused socket, which a `Pool` does not tell.
 */
import { EventEmitter } from 'node:events'
import type { Client } from 'undici'
import type { Exchange } from './exchange'
import type { SseReader } from './sse'

/**
 * How long an idle connection is kept: well under the 5 s after which the engines' servers close one. uvicorn's
 * default `timeout_keep_alive` is 5 (uvicorn/config.py, `Config.__init__`; armed when a response completes,
 * uvicorn/protocols/http/h11_impl.py and httptools_impl.py), and vLLM keeps it (vllm/envs.py,
 * `VLLM_HTTP_TIMEOUT_KEEP_ALIVE`, default "5"); SGLang passes `timeout_keep_alive=5` to `uvicorn.run`
 * (python/sglang/srt/entrypoints/http_server.py), trtllm-serve `TIMEOUT_KEEP_ALIVE = 5`
 * (tensorrt_llm/serve/openai_server.py, `OpenAIServer.__call__`); llama.cpp's server sets no keep-alive timeout
 * of its own (tools/server/server-http.cpp sets only read and write timeouts), so cpp-httplib's
 * `CPPHTTPLIB_KEEPALIVE_TIMEOUT_SECOND` 5 holds (vendor/cpp-httplib/httplib.h). uvicorn sends no `Keep-Alive`
 * header; cpp-httplib sends `Keep-Alive: timeout=5, max=100`, which undici honours (`HINT_MARGIN_MS`). Our clock
 * starts after the server's (once the end of the body is read), so 3 s of margin is for timers that fire late on a
 * loaded gateway; the race that is left is the retry's (`isLostRequest`).
 */
const KEEP_ALIVE_IDLE_MS = 2_000

/**
 * A server's `Keep-Alive: timeout=N` hint, less this, when that is shorter than `KEEP_ALIVE_IDLE_MS`; a hint of
 * this or less keeps nothing (undici's `keepAliveTimeoutThreshold`, read in lib/dispatcher/client-h1.js
 * `onHeadersComplete`; Node's agent made the same rule).
 */
const HINT_MARGIN_MS = 1_000

/**
 * Idle connections kept per engine: a generation holds its connection for its whole stream, so the connections
 * of a burst come free together; more than this are closed. The number in use is not bounded: a request never
 * waits for another generation's connection.
 */
const MAX_IDLE = 256

/**
 * After `data: [DONE]`, how long the end of the chunked body may take to come (the engine writes it right
 * after; usually it came in the same read). Past it the connection is closed instead of kept.
 */
const END_WAIT_MS = 250

/** Bytes read past the point where the reader stopped: a body's tail is `data: [DONE]` at most. */
const MAX_TAIL_BYTES = 4096

/**
 * undici, loaded with the first pool or connection (an engine client's construction), not with the module: loading
 * it takes tens of milliseconds, which a user of the package's other entries never needs, and which the first
 * request should not wait for.
 */
let undici: typeof import('undici') | undefined

/** Loads undici now (engine clients do at construction), so that the first request does not wait for it. */
export function loadUndici(): typeof import('undici') {
  undici ??= require('undici') as typeof import('undici')
  return undici
}

/** Time to open a connection (TCP, and TLS for https) when `HttpOptions.connectTimeoutMs` does not say. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000

/** Time to open a connection: `HttpOptions.connectTimeoutMs`, or the default. */
export function connectTimeoutOf(options: { connectTimeoutMs?: number }): number {
  return options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS
}

/** One connection to an engine: a client of undici's with at most one socket, and one request at a time. */
export class Connection {
  readonly client: Client
  /** Sockets it has connected so far (a request that went out on a socket connected before it was sent was reused). */
  connects = 0
  /** Whether its socket is connected now. */
  open = false

  constructor(origin: string, connectTimeoutMs: number, onClose?: (connection: Connection) => void) {
    this.client = new (loadUndici().Client)(origin, {
      connectTimeout: connectTimeoutMs,
      // http.ts times the wait for the head and the silences of the stream itself, only while a reader waits.
      headersTimeout: 0,
      bodyTimeout: 0,
      keepAliveTimeout: KEEP_ALIVE_IDLE_MS,
      keepAliveMaxTimeout: KEEP_ALIVE_IDLE_MS,
      keepAliveTimeoutThreshold: HINT_MARGIN_MS,
    })
    this.client.on('connect', () => {
      this.connects++
      this.open = true
    })
    this.client.on('disconnect', () => {
      this.open = false
      onClose?.(this)
    })
  }

  /** Closes its socket at once (the engine sees it close and frees the sequence); a request on it fails. */
  close(): void {
    this.client.destroy().catch(() => {})
  }
}

/** Connections to one engine server, for one client: the idle ones, and new ones as needed. */
export class EnginePool extends EventEmitter<{ idle: [] }> {
  private readonly idle: Connection[] = []

  constructor(
    private readonly origin: string,
    private readonly connectTimeoutMs: number,
  ) {
    super()
  }

  /** The idle connection used last (the one the engine is least likely to be closing), or a new one. */
  take(): Connection {
    return this.idle.pop() ?? new Connection(this.origin, this.connectTimeoutMs, (closed) => this.forget(closed))
  }

  /** A connection whose stream was read to the end of its body: kept for the next request (emits `idle`), or closed. */
  give(connection: Connection): void {
    if (!connection.open || this.idle.length >= MAX_IDLE) {
      connection.close()
      return
    }
    this.idle.push(connection)
    this.emit('idle')
  }

  /** Connections idle now. */
  get idleCount(): number {
    return this.idle.length
  }

  /** An idle connection whose socket closed (its idle time was up, or the engine closed it) leaves the pool. */
  private forget(connection: Connection): void {
    const at = this.idle.indexOf(connection)
    if (at < 0) return
    this.idle.splice(at, 1)
    connection.close()
  }
}

/** The pools, one per client: keyed by the options object a client passes with every request. */
const pools = new WeakMap<object, EnginePool>()

/**
 * The pool of the client whose options are `options` (`HttpEngine` keeps its own copy, so a pool lives as long as
 * its client and is never shared by another: one client is one engine server, and its pool follows its own
 * options), or false, a connection per request, with `keepAlive: false`.
 */
export function poolOf(options: { keepAlive?: boolean; connectTimeoutMs?: number }, url: URL): EnginePool | false {
  if (options.keepAlive === false) return false
  let pool = pools.get(options)
  if (pool === undefined) {
    pool = new EnginePool(url.origin, connectTimeoutOf(options))
    pools.set(options, pool)
  }
  return pool
}

/**
 * What undici says when the socket a request went out on was closed by the peer before an answer (`other side
 * closed` is UND_ERR_SOCKET), or reset.
 */
const LOST = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE'])

/**
 * Whether a request failed only because the idle connection it was given was closing at the engine's end: sent on
 * a socket connected before it (`reused`, and no new socket since: `connects` as it was then), nothing of an answer
 * received, and the connection closed or reset. The engine never saw such a request (an idle connection is closed
 * between requests), so sending it again is safe; on a new socket, or once any byte came back, it is not (Node's
 * documentation of `request.reusedSocket` gives the same rule). undici itself sends a request again on a new
 * socket when it finds the idle one closed before writing (its check of an idle socket, client-h1.js
 * `scheduleIdleSocketValidation`); this is the race it cannot see, a close that comes after the request was written.
 */
export function isLostRequest(connection: Connection, reused: boolean, connects: number, exchange: Exchange): boolean {
  const code = (exchange.failure as NodeJS.ErrnoException | null)?.code ?? ''
  return reused && connection.connects === connects && !exchange.answered && LOST.has(code)
}

/**
 * The stream's reader stopped at an event (postEvents' caller left its loop): its connection is kept (`keep`) only
 * if nothing but `data: [DONE]` is left in the body and the body ends. What has arrived already is read at once;
 * when the engine had said `[DONE]` (`sawDone`, or in what had arrived) the end is waited for, `END_WAIT_MS` at
 * most. Anything else (an event: the engine was still generating, so the stream was cut short; bytes past what a
 * tail holds; a broken framing; no end in time) closes the connection at once (`drop`), which is how the engine
 * learns to free the sequence.
 */
export function release(exchange: Exchange, reader: SseReader, sawDone: boolean, keep: () => void, drop: () => void): void {
  let left = MAX_TAIL_BYTES
  let done = sawDone
  /** False when `chunk` makes the tail more than `[DONE]` and the body's end. */
  const take = (chunk: Buffer): boolean => {
    left -= chunk.length
    if (left < 0) return false
    try {
      for (const event of reader.push(chunk)) {
        if (event.data !== '[DONE]') return false
        done = true
      }
    } catch {
      return false
    }
    return true
  }
  /** True once the tail is settled either way. */
  const settled = (): boolean => {
    for (let chunk = exchange.read(); chunk !== null; chunk = exchange.read()) {
      if (!take(chunk)) {
        drop()
        return true
      }
    }
    // All that came is taken (the loop above): complete, the body ended with it.
    if (exchange.complete) keep()
    // Failed, or cut short as far as anything that came says: the engine may be generating still.
    else if (exchange.failure !== null || !done) drop()
    else return false
    return true
  }
  if (settled()) return
  const timer = setTimeout(() => {
    exchange.stopWaiting()
    drop()
  }, END_WAIT_MS).unref()
  const look = () => {
    if (settled()) clearTimeout(timer)
    else exchange.wait(look)
  }
  exchange.wait(look)
}
