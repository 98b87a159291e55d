/** What any Node gateway needs around the adapters: JSON bodies with limits, parameter checks, OpenAI errors, SSE. */
export { DEFAULT_BODY_LIMIT, readJsonBody, type ReadJsonOptions } from './body'
export { HttpError, errorResponse, type OpenAIErrorBody } from './errors'
export { SSE_HEADERS, chatFrames, pipeSse, responsesFrames, type PipeSseOptions, type PipeSseResult, type SseStep } from './sse'
export { chatGenerationParameters, responsesGenerationParameters, type GenerationParameters } from './validate'

import type { ServerResponse } from 'node:http'

import { errorResponse } from './errors'

/**
 * Answers with the OpenAI error body and status for `error` (see `errorResponse`); a 413 also closes the
 * connection, so the unread rest of the body is dropped instead of read.
 */
export function sendError(response: ServerResponse, error: unknown): number {
  const { status, body } = errorResponse(error)
  if (response.headersSent) {
    response.end()
    return status
  }
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (status === 413) headers.connection = 'close'
  response.writeHead(status, headers)
  response.end(JSON.stringify(body))
  return status
}
