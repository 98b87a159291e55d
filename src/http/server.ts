/**
 * What a gateway's `http.Server` needs beyond the request handler: explicit timeouts (Node's defaults let a
 * client take a minute to send its headers and five to send its body), and the answers Node writes by itself
 * (a malformed request, headers too large, a request too slow) in OpenAI's error shape rather than as bare
 * text, each closing the connection; and a close as a shutdown wants it (`closeServer`).
 */
import type { Server } from 'node:http'
import type { Socket } from 'node:net'

import { checkOptions, is, type OptionSpec } from '../base/options'
import type { OpenAIErrorBody } from './errors'

export interface ServerLimits {
  /** Time a client has to send the request's headers. Default 10 s (Node: 60 s). */
  headersTimeoutMs?: number
  /** Time a client has to send the whole request, body included. Default 30 s (Node: 300 s). */
  requestTimeoutMs?: number
  /** How long an idle keep-alive connection stays open. Default 5 s (as Node). */
  keepAliveTimeoutMs?: number
}

export const DEFAULT_SERVER_LIMITS: Readonly<Required<ServerLimits>> = Object.freeze({
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
})

const SERVER_LIMIT_OPTIONS: OptionSpec = {
  headersTimeoutMs: is.integer(1),
  requestTimeoutMs: is.integer(1),
  keepAliveTimeoutMs: is.integer(1),
}

/** Node's client errors (`ERR_HTTP_*`, `HPE_*`) → the status and body to answer with. */
function clientErrorAnswer(code: string | undefined): { status: number; reason: string; body: OpenAIErrorBody } {
  const answer = (status: number, reason: string, message: string, type: string, errorCode: string) => ({
    status,
    reason,
    body: { error: { message, type, param: null, code: errorCode } },
  })
  if (code === 'ERR_HTTP_REQUEST_TIMEOUT')
    return answer(408, 'Request Timeout', 'the request was not received in time', 'invalid_request_error', 'request_timeout')
  if (code === 'HPE_HEADER_OVERFLOW')
    return answer(431, 'Request Header Fields Too Large', 'the request headers are too large', 'invalid_request_error', 'headers_too_large')
  return answer(400, 'Bad Request', 'the request is not valid HTTP', 'invalid_request_error', 'malformed_request')
}

/**
 * The `node:http` server options that make the timeouts act when they say: Node checks the header and request
 * timeouts only every `connectionsCheckingInterval` (default 30 s), so a 10 s header timeout used to act at 30 s.
 * Pass them to `createServer` of a server that `hardenServer` is to harden.
 */
export function serverOptions(limits: ServerLimits = {}): { connectionsCheckingInterval: number } {
  const checked = { ...DEFAULT_SERVER_LIMITS, ...checkOptions<ServerLimits>(limits, SERVER_LIMIT_OPTIONS, 'serverOptions') }
  // A tenth of the shorter timeout: each acts within 10% of what it says.
  return { connectionsCheckingInterval: Math.max(10, Math.floor(Math.min(checked.headersTimeoutMs, checked.requestTimeoutMs) / 10)) }
}

/**
 * Sets `server`'s timeouts (checked, defaults above) and answers the requests Node refuses by itself with an
 * OpenAI-shaped error, closing the connection. Returns the server. Its timeouts act when they say only with
 * `serverOptions(limits)` given to `createServer`.
 */
export function hardenServer<S extends Server>(server: S, limits: ServerLimits = {}): S {
  const checked = { ...DEFAULT_SERVER_LIMITS, ...checkOptions<ServerLimits>(limits, SERVER_LIMIT_OPTIONS, 'hardenServer') }
  server.headersTimeout = checked.headersTimeoutMs
  server.requestTimeout = checked.requestTimeoutMs
  server.keepAliveTimeout = checked.keepAliveTimeoutMs
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    // A connection reset or closed by the client: nobody to answer.
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy()
      return
    }
    const { status, reason, body } = clientErrorAnswer(error.code)
    const json = JSON.stringify(body)
    socket.end(
      `HTTP/1.1 ${status} ${reason}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(json)}\r\nconnection: close\r\n\r\n${json}`,
    )
  })
  return server
}

/** Resolves after `ms` (on a timer that does not keep the process alive). */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.min(ms, 2 ** 31 - 1)).unref())
}

/**
 * Closes `server` as a shutdown wants: it stops accepting at once, its idle keep-alive connections close now and
 * each other one as soon as its request has ended (not at its keep-alive timeout), and whatever is still open
 * when `cut` resolves is closed then. Resolves once the server has closed (every connection ended).
 */
export function closeServer(server: Server, cut: Promise<unknown>): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let closed = false
    void cut.then(() => {
      if (!closed) server.closeAllConnections()
    })
    // A keep-alive connection whose request finishes turns idle, and would be held until its keep-alive timeout.
    const idle = setInterval(() => server.closeIdleConnections(), 50)
    idle.unref()
    server.close((error) => {
      closed = true
      clearInterval(idle)
      if (error) reject(error)
      else resolve()
    })
    server.closeIdleConnections()
  })
}
