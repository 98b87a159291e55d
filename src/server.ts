/**
 * harmony-stream/server: the gateway as a library (`createGateway`) and as a command (`serve`, which
 * `harmony-stream serve` runs). The subpath's whole public API, listed by name.
 */

export type { ApiKey, ApiKeyLimits } from './server/api-keys'
export {
  engineFromEnvironment,
  loadReplay,
  responseStoreFromEnvironment,
  SETTINGS,
  type ServeSettings,
  type Setting,
  SettingError,
  serveSettings,
} from './server/environment'
export { createGateway, createGatewayHandler, type GatewayHandler, type GatewayServer } from './server/gateway'
export type { GatewayDiagnostic, GatewayOptions } from './server/options'
export { RedisKeyLimiter, type RedisKeyLimiterOptions } from './server/redis-key-limits'
export { closeGracefully, SERVE_HELP, serve } from './server/serve'
export { type BrowserPage, BrowserSession, LocalSearch, type SearchBackend, type SearchHit } from './serving/tools/browser'
export { PyodidePython, type PyodidePythonOptions, type PythonRunner } from './serving/tools/python'
export { HttpSearch, type HttpSearchOptions } from './serving/tools/web'
