/**
 * The options of `createGateway`, checked by the option kit (a misspelt one is a TypeError naming it and the
 * closest name), and the settings they resolve to: every default in one place.
 */

import { implementation as defaultImplementation } from '../../backend/choose'
import { checkOptions, is, type OptionSpec, optionError } from '../../base/options'
import type { Implementation } from '../../base/types'
import { failoverIdleMsOf } from '../../engines/failover'
import { EngineGroup } from '../../engines/group'
import { ReplayEngine } from '../../engines/replay'
import { type EngineTimeLimits, engineTimeLimits } from '../../engines/time-limits'
import type { Engine } from '../../engines/types'
import { DEFAULT_BODY_LIMIT } from '../../http/body'
import type { ServerLimits } from '../../http/server'
import { DEFAULT_WRITE_TIMEOUT_MS } from '../../http/sse'
import type { RenderRequestOptions } from '../../render/index'
import type { ResponsesDialect } from '../../wire/responses'
import { Compactor } from '../compaction/compactor'
import { type ApiKey, ApiKeys } from '../keys/api-keys'
import type { KeyLimiter } from '../keys/key-limits'
import type { RequestLogger } from '../observe/request-log'
import type { CallIdCache } from '../pipeline/call-ids'
import type { GatewayDiagnostic } from '../pipeline/context'
import type { ReasoningSummaryRule } from '../responses/responses-gateway'
import { DEFAULT_SOCKET_IDLE_MS, DEFAULT_SOCKET_LIFETIME_MS } from '../socket/protocol'
import { DEFAULT_MAX_SOCKETS } from '../socket/turns'
import { MemoryResponseStore, type ResponseStore } from '../stores/store'
import type { SearchBackend } from '../tools/browser'
import type { PythonRunner } from '../tools/python'

export type { GatewayDiagnostic }

/**
 * `createGateway`'s options: what generates at the top (the engine or several, the model's name, the parser's
 * backend), every other option in the group of what it configures (`http`, `responses`, `chat`, `tools`,
 * `access`, `observability`). The flat names (one option each, as the first versions took them) are still taken, deprecated; one setting given both ways is a
 * TypeError.
 */
export interface GatewayOptions {
  /** The inference engine (any `Engine` of harmony-stream/engines). Default: a `ReplayEngine` of `replay`. */
  engine?: Engine
  /**
   * Several engine servers of one model instead of `engine`: an `EngineGroup` over them (cache affinity,
   * balancing on running generations, failover before the first token and mid-stream). docs/API.md "Several engines".
   */
  engines?: readonly Engine[]
  /** Without `engine`: the completions (token id arrays) a replay engine serves in turn. */
  replay?: number[][]
  /** Without `engine`: tokens per step of the replay engine. Default 1. */
  interval?: number
  /**
   * Time limits on every generation, counted in tokens (heartbeats are no progress): `firstTokenMs` (default
   * 120 s), `idleMs` between tokens (default 60 s), `deadlineMs` for the whole request (default none); null
   * lifts one. At a limit the engine request is aborted and the client gets a 504, or the stream's error,
   * naming it.
   */
  engineTimeLimits?: EngineTimeLimits
  /** The parser's implementation. Default: the package's (`implementation`). */
  implementation?: Implementation
  /** The model id `/v1/models` lists. Default `gpt-oss`. */
  model?: string
  /**
   * Exact prompts for clients that send their history back (Chat and Messages tool loops, Responses with
   * `store: false` or item references): the ids behind each answer that ended with tool calls, which a request
   * answering those calls is prompted with instead of a re-render (docs/API.md "Exact prompts"). Default: a
   * `CallIdCache` keeping them beside the responses, in the response store (shared by the gateways sharing it; a
   * memory store of its own where responses are not kept). null: off, every such request re-rendered.
   */
  callIdCache?: CallIdCache | null
  /** How requests are read and answered: bodies, the HTTP server, SSE writes, rendering. */
  http?: GatewayHttpOptions
  /** The Responses API: where responses are kept, continuations, compaction, its dialect and WebSocket mode. */
  responses?: GatewayResponsesOptions
  /**
   * Chat Completions.
   * @deprecated Its one option, `idCache`, is `callIdCache` now.
   */
  chat?: GatewayChatOptions
  /** gpt-oss's own tools and remote MCP servers, run inside a response. */
  tools?: GatewayToolsOptions
  /** API keys, the routes open without one, and where their limits are counted. */
  access?: GatewayAccessOptions
  /** Diagnostics, errors, metrics, the request log, `/stats`. */
  observability?: GatewayObservabilityOptions
  // The options flat, as the first versions took them: each is still taken, and now lives in its group.
  /**
   * The largest request body, in bytes. Default 4 MiB.
   * @deprecated Use `http.bodyLimit`.
   */
  bodyLimit?: number
  /**
   * Options of every render (`renderChatCompletionRequest`'s).
   * @deprecated Use `http.renderOptions`.
   */
  renderOptions?: RenderRequestOptions
  /**
   * Tools of a built-in type (`web_search`, `file_search`, `mcp`, …), which this gateway does not run: `'omit'`
   * (default) leaves them out of the prompt and says so in the `x-harmony-not-applied` header, so a client that
   * always offers them works; `'refuse'`: a 400 naming them. (The render option of the same name.)
   * @deprecated Use `http.hostedTools`.
   */
  hostedTools?: 'omit' | 'refuse'
  /**
   * Responses reasoning items as summaries too, for clients that read only summaries (the AI SDK's OpenAI
   * provider): gpt-oss writes none, so a summary part carries the raw reasoning. `'asked'` (default): when the
   * request asks for one (`reasoning.summary`); `'always'`; `'never'`. The `reasoning_text` is there either way.
   * @deprecated Use `responses.reasoningSummary`.
   */
  reasoningSummary?: ReasoningSummaryRule
  /**
   * The Responses API's event names: `'openai'` (default) or `'open-responses'`, the Open Responses
   * specification's where they differ (`ResponsesAdapterOptions.dialect`). A request with an
   * `OpenResponses-Version` header gets the specification's whatever this says.
   * @deprecated Use `responses.dialect`.
   */
  responsesDialect?: ResponsesDialect
  /**
   * Called with what the parser recovered from. Default: one line on stderr.
   * @deprecated Use `observability.onDiagnostic`.
   */
  onDiagnostic?: (diagnostic: GatewayDiagnostic) => void
  /**
   * Called with errors worth an operator's look (5xx answers, engines failing mid-stream). Default: stderr.
   * @deprecated Use `observability.onError`.
   */
  onError?: (error: unknown) => void
  /**
   * `'sse'` (default): SSE bytes straight from the adapters; `'objects'`: events serialized (to compare).
   * @deprecated Use `http.frames`.
   */
  frames?: 'sse' | 'objects'
  /**
   * Collect each stream's frames for this many ms per write. Default 0: every step is written at once.
   * @deprecated Use `http.coalesceMs`.
   */
  coalesceMs?: number
  /**
   * `GET /stats` answers what this returns (with the stream outcomes); null (default): no such route.
   * @deprecated Use `observability.stats`.
   */
  stats?: (() => Record<string, unknown>) | null
  /**
   * Threads that render requests off the event loop; 0 (default): all inline.
   * @deprecated Use `http.renderWorkers`.
   */
  renderWorkers?: number
  /**
   * With render workers: bodies up to this many bytes are rendered inline. Default 16 KiB.
   * @deprecated Use `http.renderInlineBytes`.
   */
  renderInlineBytes?: number
  /**
   * The HTTP server's timeouts (`hardenServer`).
   * @deprecated Use `http.serverLimits`.
   */
  serverLimits?: ServerLimits
  /**
   * `'refuse'` (default): a request field no table knows is a 400, as OpenAI answers; `'ignore'`: taken without it.
   * @deprecated Use `http.unknownFields`.
   */
  unknownFields?: 'refuse' | 'ignore'
  /**
   * Where Responses are kept. Default: a `MemoryResponseStore`, closed with the server; null: none.
   * @deprecated Use `responses.store`.
   */
  responseStore?: ResponseStore | null
  /**
   * A continuation within a turn is made of the ids the engine saw and generated. Default true.
   * @deprecated Use `responses.exactContinuations`.
   */
  exactContinuations?: boolean
  /**
   * The same as `callIdCache`.
   * @deprecated Use `callIdCache`.
   */
  chatIdCache?: CallIdCache | null
  /**
   * Seals and opens compaction items, and reasoning for clients that keep nothing here (`include:
   * ['reasoning.encrypted_content']`). Default: one with a random key of this process.
   * @deprecated Use `responses.compactor`.
   */
  compactor?: Compactor
  /**
   * How long a Responses WebSocket connection lives, in ms. Default 60 minutes.
   * @deprecated Use `responses.socketLifetimeMs`.
   */
  socketLifetimeMs?: number
  /**
   * How long a Responses WebSocket connection may wait for its next turn before it is closed, in ms. Default 5 minutes.
   * @deprecated Use `responses.socketIdleMs`.
   */
  socketIdleMs?: number
  /**
   * Prometheus metrics at `GET /metrics` (docs/API.md "Metrics"). Default true.
   * @deprecated Use `observability.metrics`.
   */
  metrics?: boolean | 'cluster'
  /**
   * API keys (docs/API.md "API keys"): key strings, or `{ key | sha256, name, limits }`. With keys, a request
   * without a valid one is a 401, and what a key's requests keep belongs to its name. Default: none (open).
   * @deprecated Use `access.apiKeys`.
   */
  apiKeys?: readonly (string | ApiKey)[] | null
  /**
   * Paths served without a key in a gateway with keys. Default `['/health', '/metrics']`.
   * @deprecated Use `access.publicRoutes`.
   */
  publicRoutes?: readonly string[]
  /**
   * Where the keys' limits are counted: a `RedisKeyLimiter` shares them among every process and host that uses
   * its Redis. Default: in this process.
   * @deprecated Use `access.keyLimiter`.
   */
  keyLimiter?: KeyLimiter
  /**
   * One structured line per request to this logger (a pino logger, or anything with `info(object, message)`):
   * docs/API.md "Request log". Default null: none (`harmony-stream serve` logs JSON lines to stdout).
   * @deprecated Use `observability.requestLog`.
   */
  requestLog?: RequestLogger | null
  /**
   * Runs gpt-oss's own `python` tool (a `PyodidePython`, or an operator's `PythonRunner`): a Responses request's
   * `code_interpreter` tool is then offered to the model as trained, and its calls run here, inside the response
   * (docs/API.md "Built-in tools"). Closed with the gateway. Default null: `code_interpreter` is a hosted tool
   * (`hostedTools`).
   * @deprecated Use `tools.python`.
   */
  python?: PythonRunner | null
  /**
   * Runs gpt-oss's own `browser` tool on this search backend (a `LocalSearch`, or an operator's `SearchBackend`):
   * a Responses request's `web_search` tool is then offered to the model as trained, and its searches, pages and
   * finds run here, inside the response, its answer's citations given as `url_citation` annotations. Default
   * null: `web_search` is a hosted tool.
   * @deprecated Use `tools.browser`.
   */
  browser?: SearchBackend | null
  /**
   * URL prefixes of the remote MCP servers a Responses request may name (`{ type: 'mcp', server_url }` must
   * start with one): their tools are listed and their calls run here, inside the response (docs/API.md "Built-in
   * tools"). Default null: MCP off, `mcp` tools are hosted tools.
   * @deprecated Use `tools.mcpServers`.
   */
  mcpServers?: readonly string[] | null
  /**
   * Each request to an MCP server (connect, list, call), in ms. Default 30,000.
   * @deprecated Use `tools.mcpTimeMs`.
   */
  mcpTimeMs?: number
  /**
   * Built-in tool calls run per response; a call past it ends the response where it stands. Default 8.
   * @deprecated Use `tools.maxCalls`.
   */
  toolCalls?: number
}

/** How requests are read and answered: bodies, the HTTP server, SSE writes, rendering. */
export interface GatewayHttpOptions {
  /** The largest request body, in bytes. Default 4 MiB. */
  bodyLimit?: number
  /** The HTTP server's timeouts (`hardenServer`). */
  serverLimits?: ServerLimits
  /** `'refuse'` (default): a request field no table knows is a 400, as OpenAI answers; `'ignore'`: taken without it. */
  unknownFields?: 'refuse' | 'ignore'
  /** `'sse'` (default): SSE bytes straight from the adapters; `'objects'`: events serialized (to compare). */
  frames?: 'sse' | 'objects'
  /** Collect each stream's frames for this many ms per write. Default 0: every step is written at once. */
  coalesceMs?: number
  /**
   * How long a write may wait for a client to take it, in ms: a client whose socket does not drain within this
   * (an SSE stream, a background stream's follower, a WebSocket connection), also once its stream has ended with
   * its last bytes unread, is dropped and its connection closed; a stream's engine request is aborted as for a
   * client that leaves. Counted in `harmony_write_timeouts_total`. Default 30 s; null: no bound.
   */
  writeTimeoutMs?: number | null
  /** Threads that render requests off the event loop; 0 (default): all inline. */
  renderWorkers?: number
  /** With render workers: bodies up to this many bytes are rendered inline. Default 16 KiB. */
  renderInlineBytes?: number
  /** Options of every render (`renderChatCompletionRequest`'s). */
  renderOptions?: RenderRequestOptions
  /**
   * Tools of a built-in type (`web_search`, `file_search`, `mcp`, …), which this gateway does not run: `'omit'`
   * (default) leaves them out of the prompt and says so in the `x-harmony-not-applied` header, so a client that
   * always offers them works; `'refuse'`: a 400 naming them. (The render option of the same name.)
   */
  hostedTools?: 'omit' | 'refuse'
}

/** The Responses API: where responses are kept, continuations, compaction, its dialect and WebSocket mode. */
export interface GatewayResponsesOptions {
  /** Where Responses are kept. Default: a `MemoryResponseStore`, closed with the server; null: none. */
  store?: ResponseStore | null
  /** A continuation within a turn is made of the ids the engine saw and generated. Default true. */
  exactContinuations?: boolean
  /**
   * Responses reasoning items as summaries too, for clients that read only summaries (the AI SDK's OpenAI
   * provider): gpt-oss writes none, so a summary part carries the raw reasoning. `'asked'` (default): when the
   * request asks for one (`reasoning.summary`); `'always'`; `'never'`. The `reasoning_text` is there either way.
   */
  reasoningSummary?: ReasoningSummaryRule
  /**
   * The Responses API's event names: `'openai'` (default) or `'open-responses'`, the Open Responses
   * specification's where they differ (`ResponsesAdapterOptions.dialect`). A request with an
   * `OpenResponses-Version` header gets the specification's whatever this says.
   */
  dialect?: ResponsesDialect
  /**
   * Seals and opens compaction items, and reasoning for clients that keep nothing here (`include:
   * ['reasoning.encrypted_content']`). Default: one with a random key of this process.
   */
  compactor?: Compactor
  /** How long a Responses WebSocket connection lives, in ms. Default 60 minutes. */
  socketLifetimeMs?: number
  /** How long a Responses WebSocket connection may wait for its next turn before it is closed, in ms. Default 5 minutes. */
  socketIdleMs?: number
  /**
   * Responses WebSocket connections this process holds at once. Default 1,024. At it, a new connection takes the
   * place of the one idle longest (no turn running or asked for), which is closed (1000, `idle`); when none is
   * idle the upgrade is a 503.
   */
  maxSockets?: number
}

/** Chat Completions. */
export interface GatewayChatOptions {
  /**
   * The same as `callIdCache`, which serves every API now.
   * @deprecated Use `callIdCache`.
   */
  idCache?: CallIdCache | null
}

/** gpt-oss's own tools and remote MCP servers, run inside a response. */
export interface GatewayToolsOptions {
  /**
   * Runs gpt-oss's own `python` tool (a `PyodidePython`, or an operator's `PythonRunner`): a Responses request's
   * `code_interpreter` tool is then offered to the model as trained, and its calls run here, inside the response
   * (docs/API.md "Built-in tools"). Closed with the gateway. Default null: `code_interpreter` is a hosted tool
   * (`hostedTools`).
   */
  python?: PythonRunner | null
  /**
   * Runs gpt-oss's own `browser` tool on this search backend (a `LocalSearch`, or an operator's `SearchBackend`):
   * a Responses request's `web_search` tool is then offered to the model as trained, and its searches, pages and
   * finds run here, inside the response, its answer's citations given as `url_citation` annotations. Default
   * null: `web_search` is a hosted tool.
   */
  browser?: SearchBackend | null
  /**
   * URL prefixes of the remote MCP servers a Responses request may name (`{ type: 'mcp', server_url }` must
   * start with one): their tools are listed and their calls run here, inside the response (docs/API.md "Built-in
   * tools"). Default null: MCP off, `mcp` tools are hosted tools.
   */
  mcpServers?: readonly string[] | null
  /** Each request to an MCP server (connect, list, call), in ms. Default 30,000. */
  mcpTimeMs?: number
  /** Built-in tool calls run per response; a call past it ends the response where it stands. Default 8. */
  maxCalls?: number
}

/** API keys, the routes open without one, and where their limits are counted. */
export interface GatewayAccessOptions {
  /**
   * API keys (docs/API.md "API keys"): key strings, or `{ key | sha256, name, limits }`. With keys, a request
   * without a valid one is a 401, and what a key's requests keep belongs to its name. Default: none (open).
   */
  apiKeys?: readonly (string | ApiKey)[] | null
  /** Paths served without a key in a gateway with keys. Default `['/health', '/metrics']`. */
  publicRoutes?: readonly string[]
  /**
   * Where the keys' limits are counted: a `RedisKeyLimiter` shares them among every process and host that uses
   * its Redis. Default: in this process.
   */
  keyLimiter?: KeyLimiter
}

/** Diagnostics, errors, metrics, the request log, `/stats`. */
export interface GatewayObservabilityOptions {
  /** Called with what the parser recovered from. Default: one line on stderr. */
  onDiagnostic?: (diagnostic: GatewayDiagnostic) => void
  /** Called with errors worth an operator's look (5xx answers, engines failing mid-stream). Default: stderr. */
  onError?: (error: unknown) => void
  /**
   * Prometheus metrics at `GET /metrics` (docs/API.md "Metrics"). Default true. `'cluster'`: in a node:cluster worker
   * whose primary runs `serveClusterMetrics()` (as `harmony-stream serve --workers` does), a scrape answers for every
   * worker of the cluster; outside a worker, as true.
   */
  metrics?: boolean | 'cluster'
  /**
   * One structured line per request to this logger (a pino logger, or anything with `info(object, message)`):
   * docs/API.md "Request log". Default null: none (`harmony-stream serve` logs JSON lines to stdout).
   */
  requestLog?: RequestLogger | null
  /** `GET /stats` answers what this returns (with the stream outcomes); null (default): no such route. */
  stats?: (() => Record<string, unknown>) | null
}

const hasMethods = (what: string, ...methods: string[]) => ({
  what,
  test: (value: unknown) =>
    value !== null && typeof value === 'object' && methods.every((m) => typeof (value as Record<string, unknown>)[m] === 'function'),
})

const OPTIONS: OptionSpec = {
  engine: hasMethods('an engine (an object with generate)', 'generate'),
  engines: is.arrayOf(hasMethods('an engine (an object with generate)', 'generate')),
  replay: is.array,
  interval: is.integer(1),
  implementation: is.oneOf('native', 'js'),
  model: is.nonEmptyString,
  bodyLimit: is.integer(1),
  renderOptions: is.object,
  hostedTools: is.oneOf('omit', 'refuse'),
  reasoningSummary: is.oneOf('asked', 'always', 'never'),
  responsesDialect: is.oneOf('openai', 'open-responses'),
  engineTimeLimits: is.object,
  onDiagnostic: is.function,
  onError: is.function,
  frames: is.oneOf('sse', 'objects'),
  coalesceMs: is.number(0),
  writeTimeoutMs: is.nullable(is.integer(1)),
  stats: is.nullable(is.function),
  renderWorkers: is.integer(0, 256),
  renderInlineBytes: is.integer(0),
  serverLimits: is.object,
  unknownFields: is.oneOf('refuse', 'ignore'),
  responseStore: is.nullable(hasMethods('a response store (get, put, delete, close)', 'get', 'put', 'delete', 'close')),
  exactContinuations: is.boolean,
  callIdCache: is.nullable(hasMethods('a CallIdCache', 'remember', 'exactPrompt')),
  chatIdCache: is.nullable(hasMethods('a CallIdCache', 'remember', 'exactPrompt')),
  compactor: hasMethods('a Compactor', 'compaction', 'expand'),
  socketLifetimeMs: is.integer(1),
  socketIdleMs: is.integer(1),
  maxSockets: is.integer(1),
  metrics: is.oneOf(true, false, 'cluster'),
  apiKeys: is.nullable(is.array),
  publicRoutes: is.arrayOf(is.string),
  keyLimiter: hasMethods('a key limiter (an object with admit)', 'admit'),
  requestLog: is.nullable(hasMethods('a logger (an object with info)', 'info')),
  python: is.nullable(hasMethods('a python runner (run, end, close)', 'run', 'end', 'close')),
  browser: is.nullable(hasMethods('a search backend (search, open)', 'search', 'open')),
  mcpServers: is.nullable(is.arrayOf(is.nonEmptyString)),
  mcpTimeMs: is.integer(1),
  toolCalls: is.integer(1),
}

/** Every option by the flat name the settings are made from, those taken in their group only included. */
type FlatOptions = GatewayOptions & Pick<GatewayHttpOptions, 'writeTimeoutMs'> & Pick<GatewayResponsesOptions, 'maxSockets'>

/** Each group's options, by the flat name the settings are made from. */
const GROUPS: Readonly<Record<string, Readonly<Record<string, keyof FlatOptions>>>> = {
  http: {
    bodyLimit: 'bodyLimit',
    serverLimits: 'serverLimits',
    unknownFields: 'unknownFields',
    frames: 'frames',
    coalesceMs: 'coalesceMs',
    writeTimeoutMs: 'writeTimeoutMs',
    renderWorkers: 'renderWorkers',
    renderInlineBytes: 'renderInlineBytes',
    renderOptions: 'renderOptions',
    hostedTools: 'hostedTools',
  },
  responses: {
    store: 'responseStore',
    exactContinuations: 'exactContinuations',
    reasoningSummary: 'reasoningSummary',
    dialect: 'responsesDialect',
    compactor: 'compactor',
    socketLifetimeMs: 'socketLifetimeMs',
    socketIdleMs: 'socketIdleMs',
    maxSockets: 'maxSockets',
  },
  chat: { idCache: 'chatIdCache' },
  tools: { python: 'python', browser: 'browser', mcpServers: 'mcpServers', mcpTimeMs: 'mcpTimeMs', maxCalls: 'toolCalls' },
  access: { apiKeys: 'apiKeys', publicRoutes: 'publicRoutes', keyLimiter: 'keyLimiter' },
  observability: { onDiagnostic: 'onDiagnostic', onError: 'onError', metrics: 'metrics', requestLog: 'requestLog', stats: 'stats' },
}

/** The options with every default filled in. */
export interface GatewaySettings {
  engine: Engine
  implementation: Implementation
  model: string
  bodyLimit: number
  renderOptions: RenderRequestOptions
  reasoningSummary: ReasoningSummaryRule
  responsesDialect: ResponsesDialect
  engineTimeLimits: Readonly<Required<EngineTimeLimits>>
  onDiagnostic: (diagnostic: GatewayDiagnostic) => void
  onError: (error: unknown) => void
  frames: 'sse' | 'objects'
  coalesceMs: number
  writeTimeoutMs: number | null
  stats: (() => Record<string, unknown>) | null
  renderWorkers: number
  renderInlineBytes: number
  serverLimits: ServerLimits
  unknownFields: 'refuse' | 'ignore'
  store: ResponseStore | null
  /** The store was made here (the default): the gateway closes it. */
  ownStore: boolean
  exactContinuations: boolean
  /** undefined: the default, made with the gateway's store (gateway/compose.ts), which the settings do not hold yet. */
  callIdCache: CallIdCache | null | undefined
  compactor: Compactor
  socketLifetimeMs: number
  socketIdleMs: number
  maxSockets: number
  metrics: boolean | 'cluster'
  apiKeys: ApiKeys | null
  publicRoutes: readonly string[]
  keyLimiter: KeyLimiter | null
  requestLog: RequestLogger | null
  python: PythonRunner | null
  browser: SearchBackend | null
  mcpServers: readonly string[] | null
  mcpTimeMs: number
  toolCalls: number
}

/**
 * An `onError` that logs a failure as one line with its code, beside the request log's lines, and its stack too
 * only with `stacks` (`serve --log-level debug`): an unreachable engine is an operator's matter, not a bug to trace.
 */
export function errorLogger(stacks: boolean): (error: unknown) => void {
  return (error) => {
    const failure = error as { code?: unknown; message?: unknown; stack?: unknown } | null
    const code = typeof failure?.code === 'string' ? `${failure.code}: ` : ''
    const text = typeof failure?.message === 'string' ? failure.message : String(error)
    const stack = stacks && typeof failure?.stack === 'string' ? `\n${failure.stack}` : ''
    console.error(`harmony-stream gateway: ${code}${text.replace(/\s*\n\s*/g, ' ')}${stack}`)
  }
}

const logError = errorLogger(false)

export function logDiagnostic(diagnostic: GatewayDiagnostic): void {
  console.warn(`harmony-stream: ${diagnostic.code}: ${diagnostic.message}`)
}

/** Options newer than the groups: taken in their group only, with no flat name of their own. */
const GROUP_ONLY = new Set(['writeTimeoutMs', 'maxSockets'])

/** The top level's rules: what generates, the groups, and the flat names. */
const TOP_LEVEL: OptionSpec = {
  ...Object.fromEntries(Object.entries(OPTIONS).filter(([name]) => !GROUP_ONLY.has(name))),
  ...Object.fromEntries(Object.keys(GROUPS).map((group) => [group, is.object])),
}

/** Each group's rules: the rule of the flat option each of its names stands for. */
const GROUP_RULES: Readonly<Record<string, OptionSpec>> = Object.fromEntries(
  Object.entries(GROUPS).map(([group, names]) => [
    group,
    Object.fromEntries(Object.entries(names).map(([name, flat]) => [name, OPTIONS[flat]!])),
  ]),
)

/**
 * The options as one flat object, the groups checked (a misspelt name inside one is a TypeError naming
 * `group: option`) and read into the flat names the settings are made from.
 */
function flattened(options: unknown): FlatOptions {
  const given = checkOptions<Record<string, unknown>>(options, TOP_LEVEL, 'createGateway')
  const flat: Record<string, unknown> = {}
  for (const [name, value] of Object.entries(given)) if (!Object.hasOwn(GROUPS, name)) flat[name] = value
  for (const [group, names] of Object.entries(GROUPS)) {
    const values = checkOptions<Record<string, unknown>>(given[group], GROUP_RULES[group]!, `createGateway: ${group}`)
    for (const [name, value] of Object.entries(values)) {
      if (value === undefined) continue
      const old = names[name]!
      if (flat[old] !== undefined)
        throw optionError(
          TypeError,
          `createGateway: options '${old}' and '${group}.${name}' set the same thing: give '${group}.${name}' only`,
        )
      flat[old] = value
    }
  }
  return flat as FlatOptions
}

export function gatewaySettings(options: unknown): GatewaySettings {
  const o = flattened(options)
  if (o.engine !== undefined && o.engines !== undefined)
    throw optionError(TypeError, "createGateway: options 'engine' and 'engines' exclude each other: give one engine, or several")
  if (o.engines !== undefined && o.engines.length === 0)
    throw optionError(TypeError, "createGateway: option 'engines' must list at least one engine")
  if (o.engine === undefined && o.engines === undefined && o.replay === undefined)
    throw optionError(
      TypeError,
      "createGateway: option 'engine' is required (or 'engines', or 'replay', the completions of a replay engine)",
    )
  if (o.callIdCache !== undefined && o.chatIdCache !== undefined)
    throw optionError(TypeError, "createGateway: options 'callIdCache' and 'chat.idCache' set the same thing: give 'callIdCache' only")
  const ownStore = o.responseStore === undefined
  const limits = engineTimeLimits(o.engineTimeLimits ?? {}, 'createGateway: engineTimeLimits')
  return {
    engine:
      o.engines !== undefined
        ? o.engines.length === 1
          ? o.engines[0]!
          : // A stalled engine is failed over at half the idle limit, within it (engines/failover.ts).
            new EngineGroup(o.engines, { failoverIdleMs: failoverIdleMsOf(limits.idleMs) })
        : (o.engine ?? new ReplayEngine({ completions: o.replay as number[][], interval: o.interval ?? 1 })),
    implementation: o.implementation ?? defaultImplementation,
    model: o.model ?? 'gpt-oss',
    bodyLimit: o.bodyLimit ?? DEFAULT_BODY_LIMIT,
    renderOptions: {
      ...o.renderOptions,
      ...(o.hostedTools === undefined ? {} : { hostedTools: o.hostedTools }),
      // The tools this gateway runs are offered to the model as gpt-oss's own.
      builtinTools: [...(o.browser == null ? [] : ['browser' as const]), ...(o.python == null ? [] : ['python' as const])],
    },
    reasoningSummary: o.reasoningSummary ?? 'asked',
    responsesDialect: o.responsesDialect ?? 'openai',
    engineTimeLimits: limits,
    onDiagnostic: o.onDiagnostic ?? logDiagnostic,
    onError: o.onError ?? logError,
    frames: o.frames ?? 'sse',
    coalesceMs: o.coalesceMs ?? 0,
    writeTimeoutMs: o.writeTimeoutMs === undefined ? DEFAULT_WRITE_TIMEOUT_MS : o.writeTimeoutMs,
    stats: o.stats ?? null,
    renderWorkers: o.renderWorkers ?? 0,
    renderInlineBytes: o.renderInlineBytes ?? 16 * 1024,
    serverLimits: o.serverLimits ?? {},
    unknownFields: o.unknownFields ?? 'refuse',
    // The library's default: responses kept in this process (bounded); null keeps none.
    store: ownStore ? new MemoryResponseStore() : (o.responseStore ?? null),
    ownStore,
    exactContinuations: o.exactContinuations ?? true,
    callIdCache: o.callIdCache !== undefined ? o.callIdCache : o.chatIdCache,
    // A compaction opens to no more than a body may carry.
    compactor: o.compactor ?? new Compactor({ maxOpenedBytes: o.bodyLimit ?? DEFAULT_BODY_LIMIT }),
    socketLifetimeMs: o.socketLifetimeMs ?? DEFAULT_SOCKET_LIFETIME_MS,
    socketIdleMs: o.socketIdleMs ?? DEFAULT_SOCKET_IDLE_MS,
    maxSockets: o.maxSockets ?? DEFAULT_MAX_SOCKETS,
    metrics: o.metrics ?? true,
    apiKeys: o.apiKeys == null ? null : new ApiKeys(o.apiKeys, "createGateway: option 'apiKeys'"),
    publicRoutes: o.publicRoutes ?? ['/health', '/metrics'],
    keyLimiter: o.keyLimiter ?? null,
    requestLog: o.requestLog ?? null,
    python: o.python ?? null,
    browser: o.browser ?? null,
    mcpServers: o.mcpServers ?? null,
    mcpTimeMs: o.mcpTimeMs ?? 30_000,
    toolCalls: o.toolCalls ?? 8,
  }
}
