/**
 * Kept-alive connections to an engine (http.ts): a pool per client, idle sockets closed before the engine's server
 * closes them, a socket given back only after a stream read to the end of its body, and a request that a closing
 * idle socket lost sent again, once, on a new connection. A new connection costs event-loop turns on both sides
 * before the first token can come (issue 49); a router in front of the same workers (SMG) reuses its connections.
 */
import { type ClientRequest, type ClientRequestArgs, Agent as HttpAgent, type IncomingMessage } from 'node:http'
import { Agent as HttpsAgent } from 'node:https'
import type { Socket } from 'node:net'
import type { Duplex } from 'node:stream'
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
 * header; cpp-httplib sends `Keep-Alive: timeout=5, max=100`, which Node's agent honours (`keepSocketAlive`: the
 * hint less a second when that is shorter than the agent's own timeout, and a hint of a second or less keeps
 * nothing). Our clock starts after the server's (once the end of the body is read), so 3 s of margin is for
 * timers that fire late on a loaded gateway; the race that is left is the retry's (`isLostRequest`).
 */
const KEEP_ALIVE_IDLE_MS = 2_000

/**
 * Idle sockets kept per engine: a generation holds its socket for its whole stream, so the sockets of a burst
 * come free together; more than this are closed (Node's own default, said here so that it stays bounded). The
 * number in use is not bounded: a request never waits for another generation's socket.
 */
const MAX_FREE_SOCKETS = 256

/**
 * After `data: [DONE]`, how long the end of the chunked body may take to come (the engine writes it right
 * after; usually it came in the same read). Past it the socket is closed instead of kept.
 */
const END_WAIT_MS = 250

/** Bytes read past the point where the reader stopped: a body's tail is `data: [DONE]` at most. */
const MAX_TAIL_BYTES = 4096

/** The pools, one per client: keyed by the options object a client passes with every request. */
const pools = new WeakMap<object, HttpAgent>()

/**
 * The pool of the client whose options are `options` (`HttpEngine` keeps its own copy, so a pool lives as long as
 * its client and is never shared by another: one client is one engine server, and its pool follows its own
 * options), or false, a connection per request, with `keepAlive: false`.
 */
export function poolOf(options: { keepAlive?: boolean }, url: URL): HttpAgent | false {
  if (options.keepAlive === false) return false
  let pool = pools.get(options)
  if (pool === undefined) {
    const settings = { keepAlive: true, timeout: KEEP_ALIVE_IDLE_MS, maxFreeSockets: MAX_FREE_SOCKETS, scheduling: 'lifo' } as const
    // lifo: the socket used last is the one the engine is least likely to be closing.
    pool = url.protocol === 'https:' ? new EngineHttpsAgent(settings) : new EngineHttpAgent(settings)
    pools.set(options, pool)
  }
  return pool
}

/*
 * The agent's `timeout` is meant for idle sockets only: Node sets it on each new socket too, where it would time
 * a stream (whose silences http.ts times itself) and be re-armed on every read. So it is left off a new socket and
 * cleared when an idle one is taken; `keepSocketAlive` (Node's) sets it when a socket goes idle.
 */
// biome-ignore lint/suspicious/noExplicitAny: TypeScript takes a class to extend only as a constructor of any[].
type AgentClass = new (...args: any[]) => HttpAgent

/** `Agent` (http's or https's, which extends it) with its `timeout` on idle sockets only. */
function idleTimeoutOnly<Base extends AgentClass>(Agent: Base) {
  return class extends Agent {
    override createConnection(options: ClientRequestArgs, callback?: (error: Error | null, stream: Duplex) => void) {
      return super.createConnection({ ...options, timeout: undefined }, callback)
    }
    override reuseSocket(socket: Duplex, request: ClientRequest): void {
      super.reuseSocket(socket, request)
      ;(socket as Socket).setTimeout(0)
    }
  }
}

const EngineHttpAgent = idleTimeoutOnly(HttpAgent)
const EngineHttpsAgent = idleTimeoutOnly(HttpsAgent)

/** What a socket the peer closed says when a request is written on it, or read from it (`socket hang up` is ECONNRESET). */
const LOST = new Set(['ECONNRESET', 'EPIPE'])

/**
 * Whether a request failed only because the idle socket it was given was closing at the engine's end: sent on a
 * reused socket, nothing of an answer received, and the connection reset. The engine never saw such a request
 * (an idle connection is closed between requests), so sending it again is safe; on a new socket, or once any byte
 * came back, it is not (Node's documentation of `request.reusedSocket` gives the same rule).
 */
export function isLostRequest(request: ClientRequest, error: Error, answered: boolean): boolean {
  return request.reusedSocket && !answered && LOST.has((error as NodeJS.ErrnoException).code ?? '')
}

/**
 * The stream's reader stopped at an event (postEvents' caller left its loop): its socket goes back to the pool only
 * if nothing but `data: [DONE]` is left in the body and the body ends. What has arrived already is read at once;
 * when the engine had said `[DONE]` (`sawDone`, or in what had arrived) the end is waited for, `END_WAIT_MS` at
 * most. Anything else (an event: the engine was still generating, so the stream was cut short; bytes past what a
 * tail holds; a broken framing; no end in time) closes the connection at once, which is how the engine learns
 * to free the sequence. Node gives the socket back to the pool itself when the body's end is read.
 */
export function release(response: IncomingMessage, reader: SseReader, sawDone: boolean): void {
  if (response.destroyed || response.readableEnded) return
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
  for (let chunk = response.read() as Buffer | null; chunk !== null; chunk = response.read() as Buffer | null) {
    if (!take(chunk)) {
      response.destroy()
      return
    }
  }
  // Cut short, as far as anything that came says: the engine may be generating still.
  if (!done && !response.complete) {
    response.destroy()
    return
  }
  const stop = () => {
    clearTimeout(timer)
    response.off('data', onData).off('end', stop).off('close', stop).off('error', stop)
  }
  const fail = () => {
    stop()
    response.destroy()
  }
  const onData = (chunk: Buffer) => {
    if (!take(chunk)) fail()
  }
  const timer = setTimeout(fail, END_WAIT_MS).unref()
  response.on('data', onData).on('end', stop).on('close', stop).on('error', stop)
  response.resume()
}
