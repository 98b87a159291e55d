/**
 * harmony-stream: a streaming parser for the Harmony format of OpenAI's gpt-oss models.
 *
 *   import { HarmonyStreamParser } from 'harmony-stream'
 *   const parser = new HarmonyStreamParser()          // after a prompt ending in <|start|>assistant
 *   for await (const tokens of engine) handle(parser.push(tokens))
 *   handle(parser.finish())
 */
export { HarmonyError, HarmonyParseError, HarmonyRequestError, HarmonyStateError } from './errors'
export { implementation } from './loader'
export { HarmonyStreamParser, parseCompletion } from './parser'
export { HarmonyStreamPool, type HarmonyStreamOptions, type HarmonyStreamPoolOptions } from './pool'
export { SseFrames, SsePool, type SsePoolOptions, type SseStreamError } from './sse-pool'
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
} from './compact'
export { HarmonyTokens, STOP_TOKENS, ASSISTANT_ACTION_STOP_TOKENS } from './special-tokens'
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
} from './types'
export * from './adapters'
export { DEFAULT_MAX_HEADER_BYTES, HarmonyTextParser, type HarmonyTextParserOptions } from './text-parser'
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
export {
  DEFAULT_BODY_LIMIT,
  HttpError,
  SSE_HEADERS,
  chatFrames,
  chatGenerationParameters,
  errorResponse,
  pipeSse,
  readJsonBody,
  responsesFrames,
  responsesGenerationParameters,
  sendError,
  type GenerationParameters,
  type OpenAIErrorBody,
  type PipeSseOptions,
  type PipeSseResult,
  type ReadJsonOptions,
  type SseStep,
} from './http'
