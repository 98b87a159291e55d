/**
 * The gateway's settings from the environment: one table (`SETTINGS`) gives each variable, its command-line
 * flag (`harmony-stream serve --flag`), and what it means, so the flags, the variables and `--help` cannot
 * disagree. The command turns its flags into the same variables (flags win), then reads them here.
 */
import { readFileSync } from 'node:fs'

import { join, resolve } from 'node:path'

import { HarmonySetupError } from '../../base/errors'
import { failoverIdleMsOf } from '../../engines/failover'
import { EngineGroup } from '../../engines/group'
import { createEngine, type EngineName } from '../../engines/registry'
import { DEFAULT_ENGINE_TIME_LIMITS } from '../../engines/time-limits'
import type { Engine } from '../../engines/types'
import { DEFAULT_WRITE_TIMEOUT_MS } from '../../http/sse'
import { Compactor } from '../compaction/compactor'
import { errorLogger, type GatewayOptions, logDiagnostic } from '../gateway/options'
import { pino } from '../gateway-packages'
import { type ApiKey, ApiKeys } from '../keys/api-keys'
import { RedisKeyLimiter } from '../keys/redis-key-limits'
import { processStats } from '../observe/stats'
import { RedisResponseStore } from '../stores/redis-store'
import { SqliteResponseStore } from '../stores/sqlite-store'
import { MemoryResponseStore, type ResponseStore } from '../stores/store'
import { LocalSearch, type SearchBackend } from '../tools/browser'
import { PyodidePython } from '../tools/python'
import { HttpSearch } from '../tools/web'
import { fittingPick } from './demo-replay'

/** One setting: its variable, its flag (null: the environment only), whether the flag takes a value, and its help. */
export interface Setting {
  env: string
  flag: string | null
  /** A flag that takes no value sets its variable to this. */
  switch?: string
  value: string
  help: string
}

export const SETTINGS: readonly Setting[] = [
  {
    env: 'HARMONY_ENGINE',
    flag: '--engine',
    value: 'NAME',
    help: 'vllm | sglang | llamacpp | trtllm (default: asked of the engine URL) | replay (recorded completions)',
  },
  { env: 'ENGINE_URL', flag: '--engine-url', value: 'URL', help: "the engine's base URL, e.g. http://127.0.0.1:8000 (all but replay)" },
  {
    env: 'ENGINE_URLS',
    flag: '--engine-urls',
    value: 'URL,URL…',
    help: 'several engine servers of one model instead of ENGINE_URL: cache affinity, balancing, failover',
  },
  {
    env: 'ENGINE_FAILOVER',
    flag: '--no-engine-failover',
    switch: '0',
    value: '',
    help: "with ENGINE_URLS: a failure mid-stream is the client's, no other engine goes on (env: 0)",
  },
  { env: 'ENGINE_MODEL', flag: '--engine-model', value: 'NAME', help: 'the model the engine serves (vllm; required by trtllm)' },
  { env: 'ENGINE_API', flag: '--engine-api', value: 'API', help: 'vllm: completions (default) or generate (tokens only)' },
  {
    env: 'HARMONY_REPLAY',
    flag: '--replay',
    value: 'FILE',
    help: 'replay engine: [{ "tokens": number[] }, …] served in turn (default: the example, which answers what fits the request)',
  },
  { env: 'STREAM_INTERVAL', flag: '--stream-interval', value: 'N', help: 'replay engine: tokens per engine step (default 1)' },
  { env: 'HOST', flag: '--host', value: 'ADDRESS', help: 'the address to listen on (default 127.0.0.1)' },
  { env: 'PORT', flag: '--port', value: 'N', help: 'the port (default 8787; 0: any free one, printed)' },
  { env: 'MODEL', flag: '--model', value: 'ID', help: 'the model id /v1/models lists (default gpt-oss)' },
  { env: 'BODY_LIMIT', flag: '--body-limit', value: 'BYTES', help: 'largest request body (default 4 MiB)' },
  { env: 'GATEWAY_WORKERS', flag: '--workers', value: 'N', help: 'processes serving the port (default 1)' },
  {
    env: 'RENDER_WORKERS',
    flag: '--render-workers',
    value: 'N',
    help: 'threads rendering off the event loop (default cores - 1; 0: inline)',
  },
  {
    env: 'RENDER_INLINE_BYTES',
    flag: '--render-inline-bytes',
    value: 'BYTES',
    help: 'bodies up to this size render inline (default 16384)',
  },
  {
    env: 'HARMONY_RESPONSE_STORE',
    flag: '--response-store',
    value: 'STORE',
    help: 'sqlite:PATH (default sqlite:responses.sqlite) | memory | redis://HOST:PORT | none',
  },
  {
    env: 'CALL_ID_CACHE',
    flag: '--no-call-id-cache',
    switch: '0',
    value: '',
    help: 'tool loops sent back whole (Chat, Messages, stateless Responses) re-rendered, not prompted with the ids the engine saw (env: 0)',
  },
  {
    env: 'CHAT_ID_CACHE',
    flag: '--chat-id-cache',
    switch: '1',
    value: '',
    help: 'deprecated: the call id cache is on by default (CALL_ID_CACHE=0 turns it off; so does this one at 0)',
  },
  { env: 'UNKNOWN_FIELDS', flag: '--unknown-fields', value: 'RULE', help: 'refuse (default: a 400, as OpenAI) | ignore' },
  {
    env: 'HOSTED_TOOLS',
    flag: '--hosted-tools',
    value: 'RULE',
    help: 'omit (default: left out of the prompt, said in x-harmony-not-applied) | refuse (a 400)',
  },
  {
    env: 'REASONING_SUMMARY',
    flag: '--reasoning-summary',
    value: 'RULE',
    help: 'asked (default: reasoning as summary parts when a request asks) | always | never',
  },
  {
    env: 'RESPONSES_DIALECT',
    flag: '--responses-dialect',
    value: 'NAME',
    help: "openai (default) | open-responses (the Open Responses specification's event names, [DONE] at the end)",
  },
  {
    env: 'ENGINE_FIRST_TOKEN_MS',
    flag: '--engine-first-token-ms',
    value: 'MS',
    help: 'longest wait for the first token, then a 504 (default 120000; 0: none)',
  },
  {
    env: 'ENGINE_IDLE_MS',
    flag: '--engine-idle-ms',
    value: 'MS',
    help: 'longest wait between tokens; heartbeats do not count (default 60000; 0: none)',
  },
  { env: 'ENGINE_DEADLINE_MS', flag: '--engine-deadline-ms', value: 'MS', help: 'longest generation (default 0: none)' },
  {
    env: 'SOCKET_LIFETIME_MS',
    flag: '--socket-lifetime-ms',
    value: 'MS',
    help: 'Responses WebSocket connection lifetime (default 3600000)',
  },
  {
    env: 'SOCKET_IDLE_MS',
    flag: '--socket-idle-ms',
    value: 'MS',
    help: 'a Responses WebSocket connection waiting this long for a turn is closed (default 300000)',
  },
  {
    env: 'MAX_SOCKETS',
    flag: '--max-sockets',
    value: 'N',
    help: 'Responses WebSocket connections per process; at it, the one idle longest is closed for a new one (default 1024)',
  },
  { env: 'SSE_COALESCE_MS', flag: '--coalesce-ms', value: 'MS', help: "collect a stream's frames this long per write (default 0)" },
  {
    env: 'WRITE_TIMEOUT_MS',
    flag: '--write-timeout-ms',
    value: 'MS',
    help: 'a client whose socket takes nothing this long (SSE, a background follower, WebSocket) is dropped (default 30000; 0: none)',
  },
  { env: 'GATEWAY_FRAMES', flag: '--frames', value: 'KIND', help: 'sse (default) | objects (events serialized, to compare)' },
  { env: 'HEADERS_TIMEOUT_MS', flag: '--headers-timeout-ms', value: 'MS', help: "the server's header timeout (default 10000)" },
  { env: 'REQUEST_TIMEOUT_MS', flag: '--request-timeout-ms', value: 'MS', help: "the server's request timeout (default 30000)" },
  { env: 'KEEPALIVE_TIMEOUT_MS', flag: '--keepalive-timeout-ms', value: 'MS', help: "the server's keep-alive timeout (default 5000)" },
  {
    env: 'SHUTDOWN_GRACE_MS',
    flag: '--shutdown-grace-ms',
    value: 'MS',
    help: 'on SIGTERM, how long what runs may finish; then it ends with its error, gateway_shutdown (default 10000)',
  },
  {
    env: 'LOG_DIAGNOSTICS',
    flag: '--no-log-diagnostics',
    switch: '0',
    value: '',
    help: 'do not log what the parser recovered from (env: 0)',
  },
  {
    env: 'LOG_LEVEL',
    flag: '--log-level',
    value: 'LEVEL',
    help: 'info (default: a failure is one line with its code) | debug (and its stack)',
  },
  { env: 'GATEWAY_STATS', flag: '--stats', switch: '1', value: '', help: "GET /stats: this process's CPU, GC and heap (env: 1)" },
  { env: 'METRICS', flag: '--no-metrics', switch: '0', value: '', help: 'no Prometheus metrics at GET /metrics (env: 0)' },
  {
    env: 'REQUEST_LOG',
    flag: '--no-request-log',
    switch: '0',
    value: '',
    help: 'no JSON line per request on stdout (env: 0)',
  },
  {
    env: 'GATEWAY_API_KEYS_FILE',
    flag: '--api-keys-file',
    value: 'FILE',
    help: 'a JSON array of API keys ({ key | sha256, name, limits }): requests need one (default: open)',
  },
  {
    env: 'HARMONY_PYTHON',
    flag: '--python',
    value: 'KIND',
    help: "pyodide: run gpt-oss's python tool (Responses code_interpreter) in a sandbox here (default: off)",
  },
  {
    env: 'HARMONY_BROWSER',
    flag: '--browser',
    value: 'SOURCE',
    help: "run gpt-oss's browser tool (Responses web_search): local:FILE, a JSON Lines file of { url, title, text }; search:URL, a search API, pages fetched from the web (default: off)",
  },
  {
    env: 'HARMONY_MCP_SERVERS',
    flag: '--mcp-servers',
    value: 'PREFIXES',
    help: 'comma-separated URL prefixes of the remote MCP servers a Responses request may name (default: MCP off)',
  },
  {
    env: 'HARMONY_SEARCH_AUTHORIZATION',
    flag: null,
    value: 'VALUE',
    help: 'the Authorization header of every request to the search API of HARMONY_BROWSER=search:URL',
  },
  { env: 'HARMONY_PYTHON_TIME_MS', flag: '--python-time-ms', value: 'MS', help: 'longest python call (default 30000)' },
  { env: 'HARMONY_TOOL_CALLS', flag: '--tool-calls', value: 'N', help: 'built-in tool calls run per response (default 8)' },
  {
    env: 'HARMONY_COMPACTION_KEY',
    flag: null,
    value: 'HEX',
    help: '64 hex digits sealing compactions and reasoning (shared by gateways; default random)',
  },
]

/** The search backend `HARMONY_BROWSER` asks for (`local:FILE`, loaded now; `search:URL`); null when unset. */
function browserFromEnvironment(env: Env): SearchBackend | null {
  const text = env.HARMONY_BROWSER
  if (text === undefined || text === '') return null
  if (text.startsWith('search:') && /^https?:\/\//.test(text.slice('search:'.length))) {
    const authorization = env.HARMONY_SEARCH_AUTHORIZATION
    return new HttpSearch({ searchUrl: text.slice('search:'.length), ...(authorization ? { headers: { authorization } } : {}) })
  }
  if (!text.startsWith('local:') || text.length === 'local:'.length)
    throw new SettingError(`${flagOf('HARMONY_BROWSER')} must be local:FILE or search:URL, not ${JSON.stringify(text)}`)
  const file = text.slice('local:'.length)
  try {
    return LocalSearch.fromFile(file)
  } catch (error) {
    if ((error as { code?: string }).code === 'package-missing') throw error
    throw new SettingError(`${flagOf('HARMONY_BROWSER')}: ${(error as Error).message}`)
  }
}

/** `HARMONY_MCP_SERVERS`: each an http(s) URL prefix (a bare host would let `https://host.evil` through). */
function mcpPrefixes(text: string): string[] {
  const prefixes = text
    .split(',')
    .map((prefix) => prefix.trim())
    .filter((prefix) => prefix !== '')
  for (const prefix of prefixes) {
    if (!/^https?:\/\/[^/]+\//.test(prefix))
      throw new SettingError(
        `${flagOf('HARMONY_MCP_SERVERS')}: ${JSON.stringify(prefix)} must be an http(s) URL prefix ending its host with '/'`,
      )
  }
  return prefixes
}

/** A bad variable (or the flag that set it): the command prints it and exits 2. */
export class SettingError extends Error {
  readonly code = 'invalid-setting'
}

type Env = Record<string, string | undefined>

function flagOf(name: string): string {
  const setting = SETTINGS.find((s) => s.env === name)
  return setting?.flag ? `${name} (${setting.flag})` : name
}

function integer(env: Env, name: string, fallback: number, min = 0): number {
  const text = env[name]
  if (text === undefined || text === '') return fallback
  if (!/^\d+$/.test(text) || Number(text) < min || !Number.isSafeInteger(Number(text)))
    throw new SettingError(`${flagOf(name)} must be an integer of at least ${min}, not ${JSON.stringify(text)}`)
  return Number(text)
}

function oneOf<T extends string>(env: Env, name: string, values: readonly T[]): T | undefined {
  const text = env[name]
  if (text === undefined || text === '') return undefined
  if (!values.includes(text as T)) throw new SettingError(`${flagOf(name)} must be ${values.join(' or ')}, not ${JSON.stringify(text)}`)
  return text as T
}

/** The completions of a replay file; a file that is missing or not one is a `SettingError` naming it. */
/**
 * The API keys of a JSON file (`GATEWAY_API_KEYS_FILE`): checked now, so that a bad file stops the start naming
 * the file and the entry, never showing a key.
 */
function apiKeysFile(path: string): (string | ApiKey)[] {
  let keys: unknown
  try {
    keys = JSON.parse(readFileSync(path, 'utf8'))
  } catch (error) {
    throw new SettingError(`${flagOf('GATEWAY_API_KEYS_FILE')}: ${path}: ${(error as Error).message}`)
  }
  try {
    new ApiKeys(keys as (string | ApiKey)[], path)
  } catch (error) {
    throw new SettingError(`${flagOf('GATEWAY_API_KEYS_FILE')}: ${(error as Error).message}`)
  }
  return keys as (string | ApiKey)[]
}

export function loadReplay(path: string): number[][] {
  let replay: unknown
  try {
    replay = JSON.parse(readFileSync(path, 'utf8'))
  } catch (error) {
    throw new SettingError(`${path}: ${(error as Error).message}`)
  }
  if (!Array.isArray(replay) || !replay.every((entry) => Array.isArray(entry?.tokens))) {
    throw new SettingError(`${path}: expected [{ "tokens": number[] }, …]`)
  }
  return replay.map((entry) => entry.tokens)
}

/** The example completions the package ships (examples/gateway/replay.json). */
const EXAMPLE_REPLAY = join(__dirname, '..', '..', '..', 'examples', 'gateway', 'replay.json')

/** The engine the environment asks for. */
export function engineFromEnvironment(env: Env = process.env): Engine {
  const name = env.HARMONY_ENGINE || 'replay'
  // Read first, so that a bad value fails whatever the engine.
  const failover = oneOf(env, 'ENGINE_FAILOVER', ['0', '1']) !== '0'
  if (name === 'replay') {
    // An engine URL beside the replay engine is an engine the operator meant to use: not ignored in silence.
    if (env.ENGINE_URL || env.ENGINE_URLS)
      throw new SettingError(
        `${flagOf(env.ENGINE_URL ? 'ENGINE_URL' : 'ENGINE_URLS')} names an engine, and the replay engine uses none: name the engine with ${flagOf('HARMONY_ENGINE')}`,
      )
    const completions = loadReplay(env.HARMONY_REPLAY || EXAMPLE_REPLAY)
    const interval = integer(env, 'STREAM_INTERVAL', 1, 1)
    // The demo's recordings answer what fits the request; an operator's own are served as recorded.
    return createEngine('replay', { completions, interval, ...(env.HARMONY_REPLAY ? {} : { pick: fittingPick(completions) }) })
  }
  if (!['vllm', 'sglang', 'llamacpp', 'trtllm'].includes(name))
    throw new SettingError(`${flagOf('HARMONY_ENGINE')} must be replay, vllm, sglang, llamacpp or trtllm, not ${JSON.stringify(name)}`)
  if (env.ENGINE_URL && env.ENGINE_URLS) throw new SettingError(`${flagOf('ENGINE_URL')} and ${flagOf('ENGINE_URLS')} exclude each other`)
  const urls = engineUrls(env)
  if (urls.length === 0 || urls.some((url) => url === ''))
    throw new SettingError(`HARMONY_ENGINE=${name} needs ${flagOf('ENGINE_URL')} (e.g. http://127.0.0.1:8000) or ${flagOf('ENGINE_URLS')}`)
  if (name !== 'vllm' && env.ENGINE_API) throw new SettingError(`${flagOf('ENGINE_API')} applies to HARMONY_ENGINE=vllm only`)
  if (name !== 'vllm' && name !== 'trtllm' && env.ENGINE_MODEL)
    throw new SettingError(`${flagOf('ENGINE_MODEL')} applies to HARMONY_ENGINE=vllm and trtllm only`)
  const engines = urls.map((url) =>
    createEngine(
      name as Exclude<EngineName, 'replay'>,
      {
        url,
        ...(env.ENGINE_MODEL ? { model: env.ENGINE_MODEL } : {}),
        ...(env.ENGINE_API ? { api: env.ENGINE_API } : {}),
      } as never,
    ),
  )
  if (engines.length === 1) return engines[0]!
  // A stalled engine is failed over at half the idle limit, within it (engines/failover.ts).
  const idleMs = integer(env, 'ENGINE_IDLE_MS', DEFAULT_ENGINE_TIME_LIMITS.idleMs ?? 0)
  return new EngineGroup(engines, failover ? { failoverIdleMs: failoverIdleMsOf(idleMs === 0 ? null : idleMs) } : { failover: false })
}

/** The engine URLs the environment names (ENGINE_URLS, or ENGINE_URL). */
export function engineUrls(env: Env): string[] {
  if (env.ENGINE_URLS) return env.ENGINE_URLS.split(',').map((url) => url.trim())
  return env.ENGINE_URL ? [env.ENGINE_URL] : []
}

/** Where the store HARMONY_RESPONSE_STORE names keeps responses, as the startup line says it. */
function storeWhere(env: Env): string {
  const { kind, where } = storeChoice(env)
  if (kind === 'sqlite') return `the SQLite file ${resolve(where)}`
  if (kind === 'redis') return `Redis at ${redactedUrl(where)}`
  return kind === 'memory' ? 'memory' : 'nowhere (no response store)'
}

/** A URL without the password it may hold (redis://user:secret@host). */
function redactedUrl(url: string): string {
  try {
    const parsed = new URL(url)
    if (parsed.password !== '') parsed.password = '***'
    return parsed.toString()
  } catch {
    return url
  }
}

/** Which store HARMONY_RESPONSE_STORE names, checked without opening it. */
function storeChoice(env: Env): { kind: 'none' | 'memory' | 'sqlite' | 'redis'; where: string } {
  const chosen = env.HARMONY_RESPONSE_STORE || 'sqlite:responses.sqlite'
  if (chosen === 'none' || chosen === 'memory') return { kind: chosen, where: '' }
  if (chosen.startsWith('sqlite:') && chosen.length > 'sqlite:'.length) return { kind: 'sqlite', where: chosen.slice('sqlite:'.length) }
  if (chosen.startsWith('redis://') || chosen.startsWith('rediss://')) return { kind: 'redis', where: chosen }
  throw new SettingError(`${flagOf('HARMONY_RESPONSE_STORE')} must be sqlite:PATH, memory, redis://HOST:PORT or none`)
}

/** The store the environment asks for (HARMONY_RESPONSE_STORE); a SQLite file that cannot be opened is a `SettingError`. */
export function responseStoreFromEnvironment(env: Env = process.env): ResponseStore | null {
  const { kind, where } = storeChoice(env)
  if (kind === 'none') return null
  if (kind === 'memory') return new MemoryResponseStore()
  if (kind === 'redis') return new RedisResponseStore({ url: where })
  for (let attempt = 1; ; attempt++) {
    try {
      return new SqliteResponseStore({ path: where })
    } catch (error) {
      if (error instanceof HarmonySetupError) throw error
      // Processes that start together (`--workers`) open one file at once: SQLite answers "locked" while another
      // creates its table. That passes; a file that cannot be opened does not.
      if (/locked|busy/i.test((error as Error).message) && attempt < SQLITE_OPEN_ATTEMPTS) {
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100)
        continue
      }
      throw new SettingError(`${flagOf('HARMONY_RESPONSE_STORE')}: the SQLite file ${where} cannot be opened: ${(error as Error).message}`)
    }
  }
}

/** Tries to open a SQLite file another process holds locked, 100 ms apart (at startup only). */
const SQLITE_OPEN_ATTEMPTS = 50

/** Where and how `serve` runs a gateway: the listening address, the processes, and the gateway's options. */
export interface ServeSettings {
  host: string
  port: number
  workers: number
  shutdownGraceMs: number
  /** The engine's kind and URLs (none for the replay engine), for the startup line and its probe. */
  engine: { kind: EngineName; urls: readonly string[] }
  /** Where responses are kept, in words: `memory`, a SQLite file's absolute path, a Redis URL, or none. */
  storeWhere: string
  /** The gateway's options, made in the process that serves (a store and an engine are per process). */
  options(): GatewayOptions
}

export function serveSettings(env: Env = process.env, cores = 1): ServeSettings {
  const serverLimits: Record<string, number> = {}
  for (const [name, key] of [
    ['HEADERS_TIMEOUT_MS', 'headersTimeoutMs'],
    ['REQUEST_TIMEOUT_MS', 'requestTimeoutMs'],
    ['KEEPALIVE_TIMEOUT_MS', 'keepAliveTimeoutMs'],
  ] as const) {
    if (env[name]) serverLimits[key] = integer(env, name, 0, 1)
  }
  // Every variable is read now, so a bad one fails before anything listens.
  const frames = oneOf(env, 'GATEWAY_FRAMES', ['sse', 'objects']) ?? 'sse'
  const unknownFields = oneOf(env, 'UNKNOWN_FIELDS', ['refuse', 'ignore']) ?? 'refuse'
  const hostedTools = oneOf(env, 'HOSTED_TOOLS', ['omit', 'refuse']) ?? 'omit'
  const reasoningSummary = oneOf(env, 'REASONING_SUMMARY', ['asked', 'always', 'never']) ?? 'asked'
  const responsesDialect = oneOf(env, 'RESPONSES_DIALECT', ['openai', 'open-responses']) ?? 'openai'
  const numbers = {
    bodyLimit: integer(env, 'BODY_LIMIT', 4 * 1024 * 1024, 1),
    coalesceMs: integer(env, 'SSE_COALESCE_MS', 0),
    renderWorkers: integer(env, 'RENDER_WORKERS', Math.min(256, Math.max(1, cores - 1))),
    renderInlineBytes: integer(env, 'RENDER_INLINE_BYTES', 16 * 1024),
  }
  // 0 lifts a limit.
  const limit = (name: string, fallback: number | null) => {
    const ms = integer(env, name, fallback ?? 0)
    return ms === 0 ? null : ms
  }
  const engineTimeLimits = {
    firstTokenMs: limit('ENGINE_FIRST_TOKEN_MS', DEFAULT_ENGINE_TIME_LIMITS.firstTokenMs),
    idleMs: limit('ENGINE_IDLE_MS', DEFAULT_ENGINE_TIME_LIMITS.idleMs),
    deadlineMs: limit('ENGINE_DEADLINE_MS', DEFAULT_ENGINE_TIME_LIMITS.deadlineMs),
  }
  const writeTimeoutMs = limit('WRITE_TIMEOUT_MS', DEFAULT_WRITE_TIMEOUT_MS)
  const socketLifetimeMs = env.SOCKET_LIFETIME_MS ? { socketLifetimeMs: integer(env, 'SOCKET_LIFETIME_MS', 0, 1) } : {}
  const socketIdleMs = env.SOCKET_IDLE_MS ? { socketIdleMs: integer(env, 'SOCKET_IDLE_MS', 0, 1) } : {}
  const maxSockets = env.MAX_SOCKETS ? { maxSockets: integer(env, 'MAX_SOCKETS', 0, 1) } : {}
  const key = env.HARMONY_COMPACTION_KEY
  if (key && !/^[0-9a-fA-F]{64}$/.test(key)) throw new SettingError('HARMONY_COMPACTION_KEY must be 64 hex digits (its value is not shown)')
  const apiKeys = env.GATEWAY_API_KEYS_FILE ? apiKeysFile(env.GATEWAY_API_KEYS_FILE) : null
  const flags = {
    CALL_ID_CACHE: oneOf(env, 'CALL_ID_CACHE', ['0', '1']),
    CHAT_ID_CACHE: oneOf(env, 'CHAT_ID_CACHE', ['0', '1']),
    LOG_DIAGNOSTICS: oneOf(env, 'LOG_DIAGNOSTICS', ['0', '1']),
    METRICS: oneOf(env, 'METRICS', ['0', '1']),
    REQUEST_LOG: oneOf(env, 'REQUEST_LOG', ['0', '1']),
  }
  const logLevel = oneOf(env, 'LOG_LEVEL', ['info', 'debug'])
  const stats = oneOf(env, 'GATEWAY_STATS', ['0', '1']) === '1'
  const python = oneOf(env, 'HARMONY_PYTHON', ['pyodide'])
  const browser = browserFromEnvironment(env)
  const mcpServers = env.HARMONY_MCP_SERVERS ? mcpPrefixes(env.HARMONY_MCP_SERVERS) : null
  const pythonTimeMs = integer(env, 'HARMONY_PYTHON_TIME_MS', 30_000, 1)
  const toolCalls = integer(env, 'HARMONY_TOOL_CALLS', 8, 1)
  // Made now, so that a bad engine setting fails before anything listens; the serving process uses this one.
  const engine = engineFromEnvironment(env)
  const settings: ServeSettings = {
    host: env.HOST || '127.0.0.1',
    port: integer(env, 'PORT', 8787),
    workers: integer(env, 'GATEWAY_WORKERS', 1, 1),
    shutdownGraceMs: integer(env, 'SHUTDOWN_GRACE_MS', 10_000),
    engine: { kind: (env.HARMONY_ENGINE || 'replay') as EngineName, urls: engineUrls(env) },
    storeWhere: storeWhere(env),
    options: () => ({
      engine,
      model: env.MODEL || 'gpt-oss',
      engineTimeLimits,
      // On by default, beside the responses in the response store (shared by --workers and replicas).
      ...(flags.CALL_ID_CACHE === '0' || flags.CHAT_ID_CACHE === '0' ? { callIdCache: null } : {}),
      http: { frames, unknownFields, hostedTools, serverLimits, writeTimeoutMs, ...numbers },
      responses: {
        store: responseStoreFromEnvironment(env),
        reasoningSummary,
        dialect: responsesDialect,
        ...socketLifetimeMs,
        ...socketIdleMs,
        ...maxSockets,
        ...(key ? { compactor: new Compactor({ key, maxOpenedBytes: numbers.bodyLimit }) } : {}),
      },
      tools: {
        ...(python === 'pyodide' ? { python: new PyodidePython({ timeMs: pythonTimeMs }) } : {}),
        ...(browser === null ? {} : { browser }),
        ...(mcpServers === null ? {} : { mcpServers }),
        maxCalls: toolCalls,
      },
      access: {
        ...(apiKeys === null ? {} : { apiKeys }),
        // Keys' limits counted where the responses are kept when that is Redis: once for every process and host.
        ...(apiKeys !== null && storeChoice(env).kind === 'redis'
          ? { keyLimiter: new RedisKeyLimiter({ url: storeChoice(env).where }) }
          : {}),
      },
      observability: {
        stats: stats ? processStats() : null,
        onDiagnostic: flags.LOG_DIAGNOSTICS === '0' ? () => {} : logDiagnostic,
        onError: errorLogger(logLevel === 'debug'),
        // With --workers, a scrape reaches one worker, and answers for them all (the primary gathers them).
        metrics: flags.METRICS === '0' ? false : settings.workers > 1 ? 'cluster' : true,
        // A JSON line per request on stdout (pino), after the line that says where the gateway listens.
        ...(flags.REQUEST_LOG === '0' ? {} : { requestLog: pino({ base: { pid: process.pid } }) }),
      },
    }),
  }
  if (settings.port > 65535) throw new SettingError(`${flagOf('PORT')} must be at most 65535`)
  // The store is opened by the process that serves; its variable is checked now all the same.
  storeChoice(env)
  return settings
}
