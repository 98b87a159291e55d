/**
 * harmony-stream: a streaming parser for the Harmony format of OpenAI's gpt-oss models.
 *
 *   import { HarmonyStreamParser } from 'harmony-stream'
 *   const parser = new HarmonyStreamParser()          // after a prompt ending in <|start|>assistant
 *   for await (const tokens of engine) handle(parser.push(tokens))
 *   handle(parser.finish())
 */

export { HarmonyStreamParser, parseCompletion } from './api/parser'
export { type HarmonyStreamOptions, HarmonyStreamPool, type HarmonyStreamPoolOptions } from './api/pool'
export { ASSISTANT_ACTION_STOP_TOKENS, HarmonyTokens, STOP_TOKENS } from './api/special-tokens'
export { DEFAULT_MAX_HEADER_BYTES, HarmonyTextParser, type HarmonyTextParserOptions } from './api/text-parser'
export { implementation } from './backend/choose'
export {
  COMPACT_DIAGNOSTICS,
  COMPACT_FIRST_RECORD,
  COMPACT_RECORD_SLOTS,
  COMPACT_RECORDS,
  COMPACT_STATE,
  COMPACT_STATUS,
  COMPACT_STATUS_INTERNAL_ERROR,
  COMPACT_STATUS_OK,
  COMPACT_STATUS_PARSE_ERROR,
  compactCapacity,
  NAME_NOT_INTERNED,
  RECORD_CLOSE,
  RECORD_FIELDS,
  RECORD_OPEN,
  RECORD_STREAM,
  RECORD_TEXT,
} from './backend/compact'
export {
  HarmonyError,
  HarmonyLimitError,
  HarmonyParseError,
  HarmonyRequestError,
  HarmonySetupError,
  HarmonyStateError,
  type OpenAIAnswer,
  wireCode,
} from './base/errors'
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
} from './base/types'
export {
  type ArgumentSchema,
  type BuiltinTool,
  type ConversationMessage,
  DEFAULT_RENDER_CACHE_BYTES,
  type DeveloperContent,
  type DeveloperMessage,
  defaultRenderCache,
  type FunctionTool,
  type HostedTools,
  type NotApplied,
  type OfferedFunction,
  type OutputSchema,
  type ReasoningEffort,
  RenderCache,
  type RenderCacheOptions,
  type RenderCacheStats,
  type RenderConversationOptions,
  type RenderEngineOptions,
  type RenderedPrompt,
  type RenderForTrainingOptions,
  type RenderRequestOptions,
  type ResponseFormat,
  renderChatCompletionRequest,
  renderConversation,
  renderForTraining,
  renderResponsesRequest,
  type SystemContent,
  type SystemMessage,
  type TextMessage,
  type ToolNamespace,
  type TrainingRender,
} from './render'
export type { AdapterDiagnostic } from './wire/adapter'
export {
  type ChatAdapterOptions,
  type ChatCompletion,
  type ChatCompletionChunk,
  ChatCompletionsStream,
  type ChatDelta,
  type ChatLogprobs,
  type ChatToolCall,
  type ChatToolCallDelta,
  type ChatUsage,
  chatCompletion,
} from './wire/chat'
export type { FinishOptions, FinishReason } from './wire/finish'
export type { OutputLogprob } from './wire/logprobs'
export type { InputKind } from './wire/message-stream'
export {
  type AnthropicContentBlock,
  type AnthropicDelta,
  type AnthropicEvent,
  type AnthropicMessage,
  AnthropicMessagesStream,
  type AnthropicStopReason,
  type AnthropicUsage,
  anthropicMessage,
  type MessagesAdapterOptions,
} from './wire/messages'
export {
  type ResponseEvent,
  type ResponseFunctionTool,
  type ResponseItem,
  type ResponseObject,
  type ResponseRequestEcho,
  type ResponsesAdapterOptions,
  type ResponsesDialect,
  ResponsesStream,
  type ResponseUsage,
  responseObject,
  responsesRequestEcho,
  type UrlCitation,
  type WebSearchAction,
} from './wire/responses'
export type { RoutingOptions } from './wire/routing'
export { SseFrames, SsePool, type SsePoolOptions, type SseStreamError } from './wire/sse-pool'
