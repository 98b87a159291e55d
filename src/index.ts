/**
 * harmony-stream: a streaming parser for the Harmony format of OpenAI's gpt-oss models.
 *
 *   import { HarmonyStreamParser } from 'harmony-stream'
 *   const parser = new HarmonyStreamParser()          // after a prompt ending in <|start|>assistant
 *   for await (const tokens of engine) handle(parser.push(tokens))
 *   handle(parser.finish())
 */
export { HarmonyError, HarmonyParseError, HarmonyRequestError, HarmonyStateError } from './api/errors'
export { implementation } from './backend/choose'
export { HarmonyStreamParser, parseCompletion } from './api/parser'
export { HarmonyStreamPool, type HarmonyStreamOptions, type HarmonyStreamPoolOptions } from './api/pool'
export { SseFrames, SsePool, type SsePoolOptions, type SseStreamError } from './serving/sse-pool'
export {
  COMPACT_DIAGNOSTICS,
  COMPACT_FIRST_RECORD,
  COMPACT_RECORDS,
  COMPACT_RECORD_SLOTS,
  COMPACT_STATE,
  COMPACT_STATUS,
  COMPACT_STATUS_INTERNAL_ERROR,
  COMPACT_STATUS_OK,
  COMPACT_STATUS_PARSE_ERROR,
  NAME_NOT_INTERNED,
  RECORD_CLOSE,
  RECORD_FIELDS,
  RECORD_OPEN,
  RECORD_STREAM,
  RECORD_TEXT,
  compactCapacity,
} from './backend/compact'
export { HarmonyTokens, STOP_TOKENS, ASSISTANT_ACTION_STOP_TOKENS } from './api/special-tokens'
export type {
  HarmonyBatch,
  HarmonyDiagnostic,
  HarmonyHeader,
  HarmonyMessage,
  HarmonyOpened,
  HarmonySegment,
  HarmonyStreamParserOptions,
  Implementation,
  ParserState,
  Role,
  Terminator,
} from './api/types'
export {
  type AdapterDiagnostic,
  type ChatAdapterOptions,
  type ChatCompletion,
  type ChatCompletionChunk,
  type ChatDelta,
  type ChatToolCall,
  type ChatToolCallDelta,
  type ChatUsage,
  ChatCompletionsStream,
  type FinishOptions,
  type FinishReason,
  chatCompletion,
} from './wire/chat'
export type { InputKind } from './wire/message-stream'
export {
  type ResponseEvent,
  type ResponseItem,
  type ResponseObject,
  type ResponseUsage,
  type ResponsesAdapterOptions,
  ResponsesStream,
  responseObject,
} from './wire/responses'
export type { RoutingOptions } from './wire/routing'
export { DEFAULT_MAX_HEADER_BYTES, HarmonyTextParser, type HarmonyTextParserOptions } from './api/text-parser'
export {
  DEFAULT_RENDER_CACHE_BYTES,
  RenderCache,
  defaultRenderCache,
  renderChatCompletionRequest,
  renderConversation,
  renderForTraining,
  renderResponsesRequest,
  type ConversationMessage,
  type DeveloperContent,
  type DeveloperMessage,
  type FunctionTool,
  type ReasoningEffort,
  type RenderCacheOptions,
  type RenderCacheStats,
  type RenderConversationOptions,
  type RenderEngineOptions,
  type RenderForTrainingOptions,
  type RenderRequestOptions,
  type RenderedPrompt,
  type SystemContent,
  type SystemMessage,
  type TextMessage,
  type TrainingRender,
} from './render'
export { DEFAULT_BODY_LIMIT, type ReadJsonOptions, readJsonBody } from './serving/http/body'
export { HttpError, type OpenAIErrorBody, errorResponse, sendError } from './serving/http/errors'
export { SSE_HEADERS, type PipeSseOptions, type PipeSseResult, type SseStep, chatFrames, pipeSse, responsesFrames } from './serving/http/sse'
export { type GenerationParameters, chatGenerationParameters, responsesGenerationParameters } from './serving/http/validate'
