/**
 * harmony-stream/server: the gateway as a library (`createGateway`) and as a command (`serve`, which
 * `harmony-stream serve` runs). The subpath's whole public API, listed by name.
 */

export { BackgroundResponses, type BackgroundResponsesOptions, type BackgroundRun } from './server/background/runs'
export { pipeStreamLog, StreamLog, type StreamLogOptions, type StreamLogWriteBound } from './server/background/stream-log'
export {
  engineFromEnvironment,
  loadReplay,
  responseStoreFromEnvironment,
  SETTINGS,
  type ServeSettings,
  type Setting,
  SettingError,
  serveSettings,
} from './server/command/environment'
export { closeGracefully, SERVE_HELP, serve } from './server/command/serve'
export {
  type CompactionResource,
  Compactor,
  type CompactorOptions,
  checkCompactRequest,
  DEFAULT_MAX_OPENED_BYTES,
  DEFAULT_MAX_SEALED_LENGTH,
} from './server/compaction/compactor'
export { createGateway, createGatewayHandler, type GatewayHandler, type GatewayServer } from './server/gateway/create-gateway'
export type {
  GatewayAccessOptions,
  GatewayChatOptions,
  GatewayDiagnostic,
  GatewayHttpOptions,
  GatewayObservabilityOptions,
  GatewayOptions,
  GatewayResponsesOptions,
  GatewayToolsOptions,
} from './server/gateway/options'
export type { ApiKey, ApiKeyLimits } from './server/keys/api-keys'
export { RedisKeyLimiter, type RedisKeyLimiterOptions } from './server/keys/redis-key-limits'
export { MESSAGES_REQUEST_FIELDS } from './server/messages/fields'
export { renderMessagesRequest } from './server/messages/translate'
export { serveClusterMetrics } from './server/observe/cluster-metrics'
export {
  CallIdCache,
  /** @deprecated The same class: it serves every API now. Use `CallIdCache`. */
  CallIdCache as ChatIdCache,
  type CallIdCacheOptions,
  type ExactOutcome,
  type SentCall,
} from './server/pipeline/call-ids'
export { exactPrompt } from './server/pipeline/exact-prompt'
export { type ContinuationRequest, type PreparedRequest, RenderWorkers, type RenderWorkersOptions } from './server/pipeline/render-workers'
export {
  continuationItems,
  continuedBody,
  exactContinuation,
  inputItemsOf,
  previousItems,
  previousResponse,
  responseNotFound,
  responseRecord,
  storedResponse,
  storedResponseRoute,
} from './server/responses/conversation'
export {
  DEFAULT_SOCKET_IDLE_MS,
  DEFAULT_SOCKET_LIFETIME_MS,
  ResponsesSocket,
  type ResponsesSocketOptions,
  responseCreateBody,
  type ServeResponsesSocketOptions,
  type SocketTimers,
  type SocketTransport,
  type SocketTurn,
  serveResponsesSocket,
  sseEventTexts,
  type WebSocketLike,
} from './server/socket/protocol'
export { RedisResponseStore, type RedisResponseStoreOptions } from './server/stores/redis-store'
export { SqliteResponseStore, type SqliteResponseStoreOptions } from './server/stores/sqlite-store'
export {
  type EvictingStoreBounds,
  MemoryResponseStore,
  type ResponseStore,
  type ResponseStoreBounds,
  type StoredResponse,
  StoreError,
} from './server/stores/store'
export { type BrowserPage, BrowserSession, LocalSearch, type SearchBackend, type SearchHit } from './server/tools/browser'
export { PyodidePython, type PyodidePythonOptions, type PythonRunner } from './server/tools/python'
export { HttpSearch, type HttpSearchOptions } from './server/tools/web'
