/**
 * harmony-stream/http: the HTTP kit for a server of your own over the parser (read a body, check its generation
 * fields, stream an adapter as SSE with backpressure, answer errors in OpenAI's shape, harden a node:http
 * server). It needs no package beyond harmony-stream's own. The subpath's whole public API, listed by name.
 */

export { DEFAULT_BODY_LIMIT, type ReadJsonOptions, readJsonBody, readJsonBytes } from './http/body'
export { errorResponse, HttpError, type OpenAIErrorBody, sendError } from './http/errors'
export {
  CHAT_REQUEST_FIELDS,
  type FieldHandling,
  INPUT_TOKENS_REQUEST_FIELDS,
  RESPONSES_REQUEST_FIELDS,
  type RequestField,
  type RequestFields,
} from './http/fields'
export { generateRequestOf } from './http/generate-request'
export { DEFAULT_SERVER_LIMITS, hardenServer, type ServerLimits, serverOptions } from './http/server'
export {
  chatFrames,
  type PipeSseOptions,
  type PipeSseResult,
  pipeSse,
  responsesFrames,
  SSE_HEADERS,
  type SseAdapter,
  type SseStep,
} from './http/sse'
export {
  chatGenerationParameters,
  DEFAULT_MAX_MODEL_LENGTH,
  type GenerationParameterOptions,
  type GenerationParameters,
  responsesGenerationParameters,
} from './http/validate'
