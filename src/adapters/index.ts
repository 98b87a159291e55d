/** Gateway adapters: parser output in OpenAI's wire formats (Chat Completions and Responses). */
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
} from './chat'
export { type InputKind, type MessageEvent, MessageStream } from './message-stream'
export {
  type ResponseEvent,
  type ResponseItem,
  type ResponseObject,
  type ResponseUsage,
  type ResponsesAdapterOptions,
  ResponsesStream,
  responseObject,
} from './responses'
export { type Route, type RoutingOptions, routeOf } from './routing'
