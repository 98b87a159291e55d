/**
 * OpenAI-shaped HTTP errors: `{ error: { message, type, param, code } }` with the status OpenAI uses for the
 * case, so OpenAI clients raise their usual typed errors (BadRequestError, …).
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { HarmonyError, HarmonyRequestError } from '../../base/errors'
import { EngineError } from '../engines/errors'
import { StoreError } from '../store/store'

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null }
}

/** An error to answer a request with; what `sendError` and `pipeSse` turn other errors into. */
export class HttpError extends HarmonyError {
  readonly status: number
  readonly type: string
  readonly param: string | null

  constructor(status: number, message: string, options: { type?: string; param?: string | null; code?: string; cause?: unknown } = {}) {
    super(options.code ?? `http-${status}`, message, { cause: options.cause })
    this.status = status
    this.type = options.type ?? (status >= 500 ? 'server_error' : 'invalid_request_error')
    this.param = options.param ?? null
  }

  toOpenAIError(): OpenAIErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } }
  }
}

/**
 * What a client is told of an engine failure, by code: enough to decide whether to retry, nothing of the
 * engine's address or its own error text, which go to the server's log (`onError`).
 */
const ENGINE_FAILED: Record<string, string> = {
  'engine-http-error': 'the inference engine answered with an error',
  'engine-connect-timeout': 'the inference engine could not be reached in time',
  'engine-read-timeout': 'the inference engine stopped sending',
  'engine-connection-error': 'the connection to the inference engine failed',
  'engine-protocol-error': 'the inference engine sent something this gateway cannot read',
  'engine-stream-error': 'the inference engine reported an error while generating',
  'engine-aborted': 'the inference engine aborted the request',
  'engine-overloaded': 'the inference engine is overloaded; retry later',
}

/**
 * The HTTP status, body and extra headers for any error: `HttpError` as it is, `HarmonyRequestError` → 400, an
 * engine's failure (`EngineError`) → 502 with its code and a generic message (the engine's URL and error text
 * stay in the log), an overloaded engine → 503 with its `Retry-After`, anything else → 500 with a generic
 * message (the details belong in the server's log, not in the answer).
 */
export function errorResponse(error: unknown): { status: number; body: OpenAIErrorBody; headers?: Record<string, string> } {
  if (error instanceof HttpError) return { status: error.status, body: error.toOpenAIError() }
  if (error instanceof HarmonyRequestError) return { status: 400, body: error.toOpenAIError() }
  if (error instanceof EngineError) {
    const message = ENGINE_FAILED[error.code] ?? 'the inference engine failed'
    const body = { error: { message, type: 'server_error', param: null, code: error.code } }
    // An overloaded engine is the gateway's 503 too, with the engine's Retry-After: clients back off as it asks.
    if (error.code !== 'engine-overloaded') return { status: 502, body }
    return { status: 503, body, ...(error.retryAfter !== null ? { headers: { 'retry-after': error.retryAfter } } : {}) }
  }
  // A store that cannot answer: the gateway is unavailable for what needs it (its cause goes to the log).
  if (error instanceof StoreError)
    return {
      status: 503,
      body: { error: { message: 'the response store is unavailable', type: 'server_error', param: null, code: error.code } },
    }
  return { status: 500, body: { error: { message: 'internal error', type: 'server_error', param: null, code: 'internal-error' } } }
}

/**
 * Answers with the OpenAI error body and status for `error` (see `errorResponse`); when the request's body was
 * not read to its end (a 413, or any refusal before reading), the connection is closed with the answer.
 */
/** Whether the request has a body that was not read to its end. */
function unreadBody(request: IncomingMessage | undefined): boolean {
  if (request === undefined || request.complete) return false
  const { 'transfer-encoding': chunked, 'content-length': length } = request.headers
  return chunked !== undefined || (length !== undefined && length !== '0')
}

export function sendError(response: ServerResponse, error: unknown): number {
  const { status, body, headers: extra } = errorResponse(error)
  if (response.headersSent) {
    response.end()
    return status
  }
  const headers: Record<string, string> = { 'content-type': 'application/json', ...extra }
  // A refusal sent before the body was read (404, 405, 415, 413, a bad header…) closes the connection, so the
  // rest of the body is dropped with it instead of read: an endless body must not keep the server reading.
  if (status === 413 || unreadBody(response.req)) headers.connection = 'close'
  response.writeHead(status, headers)
  response.end(JSON.stringify(body))
  return status
}
