/**
 * OpenAI-shaped HTTP errors: `{ error: { message, type, param, code } }` with the status OpenAI uses for the
 * case, so OpenAI clients raise their usual typed errors (BadRequestError, …).
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { HarmonyError, type OpenAIAnswer, type OpenAIErrorBody, wireCode } from '../base/errors'

export type { OpenAIErrorBody } from '../base/errors'

/** An error to answer a request with; what `sendError` and `pipeSse` turn other errors into. */
export class HttpError extends HarmonyError {
  readonly status: number
  readonly type: string
  readonly param: string | null
  /** Headers the answer carries (a 429's `retry-after`). */
  readonly headers: Record<string, string> | undefined

  constructor(
    status: number,
    message: string,
    options: { type?: string; param?: string | null; code?: string; cause?: unknown; headers?: Record<string, string> } = {},
  ) {
    super(options.code ?? `http-${status}`, message, { cause: options.cause })
    this.status = status
    this.type = options.type ?? (status >= 500 ? 'server_error' : 'invalid_request_error')
    this.param = options.param ?? null
    this.headers = options.headers
  }

  toOpenAIError(): OpenAIErrorBody {
    return { error: { message: this.message, type: this.type, param: this.param, code: wireCode(this.code) } }
  }

  openAIAnswer(): OpenAIAnswer {
    return { status: this.status, body: this.toOpenAIError(), ...(this.headers === undefined ? {} : { headers: this.headers }) }
  }
}

/**
 * The 400 of a `previous_response_id` that names no stored response, as OpenAI answers it (and as the WebSocket
 * mode does, from the specification): code `previous_response_not_found` on every transport.
 */
export function previousResponseNotFound(id: string): HttpError {
  return new HttpError(400, `Previous response with id '${id.slice(0, 100)}' not found.`, {
    param: 'previous_response_id',
    code: 'previous-response-not-found',
  })
}

/** A whole answer whose engine request was aborted (its last step says `abort`): a 502, on every API. */
export function engineAborted(): HttpError {
  return new HttpError(502, 'the inference engine aborted the request', { code: 'engine-aborted' })
}

/** An error that says how a gateway answers it (`HttpError`, `HarmonyRequestError`, `EngineError`, `StoreError`). */
function answers(error: unknown): error is { openAIAnswer(): OpenAIAnswer } {
  return error instanceof HarmonyError && typeof (error as { openAIAnswer?: unknown }).openAIAnswer === 'function'
}

/**
 * The HTTP status, body and extra headers for any error: each of the package's errors that a gateway answers
 * says how itself (`openAIAnswer`: `HttpError` as it is, `HarmonyRequestError` a 400, an engine's failure a 502
 * with its code and a generic message, an overloaded engine a 503 with its `Retry-After`, a store that cannot
 * answer a 503); anything else is a 500 with a generic message (the details belong in the server's log, not in
 * the answer). Codes are snake_case on the wire (`wireCode`).
 */
export function errorResponse(error: unknown): OpenAIAnswer {
  if (answers(error)) return error.openAIAnswer()
  return { status: 500, body: { error: { message: 'internal error', type: 'server_error', param: null, code: 'internal_error' } } }
}

/**
 * The `error` event of a Responses stream that failed after it started (`ResponsesStream.error`'s arguments):
 * the same message and code as the HTTP answer to the same error, on every transport (SSE, WebSocket, a
 * background run's log).
 */
export function failureEvent(error: unknown): [message: string, code: string, type: string] {
  const { message, code, type } = errorResponse(error).body.error
  return [message, code ?? 'server_error', type]
}

/** Whether the request has a body that was not read to its end. */
function unreadBody(request: IncomingMessage | undefined): boolean {
  if (request === undefined || request.complete) return false
  const { 'transfer-encoding': chunked, 'content-length': length } = request.headers
  return chunked !== undefined || (length !== undefined && length !== '0')
}

/** How an API shapes its answer to an error (`errorResponse`: OpenAI's; another API's adapter gives its own). */
export type ErrorShape = (error: unknown) => { status: number; body: unknown; headers?: Record<string, string> }

/**
 * Answers with the error body and status for `error`, in the API's shape (`shape`; default `errorResponse`,
 * OpenAI's); when the request's body was not read to its end (a 413, or any refusal before reading), the
 * connection is closed with the answer.
 */
export function sendError(response: ServerResponse, error: unknown, shape: ErrorShape = errorResponse): number {
  const { status, body, headers: extra } = shape(error)
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
