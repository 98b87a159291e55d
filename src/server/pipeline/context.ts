/**
 * What every step of a request reads: the gateway's settings and the machinery it made from them, the slice
 * every API shares. One object, made once by `createGatewayHandler` (gateway/compose.ts), handed to the steps
 * (prepare → generate → respond → keep) instead of closures. Each API's folder reads a wider slice of the
 * same object (`ChatGateway`, `ResponsesGateway`): what only it needs is declared there, not here.
 */

import type { Implementation } from '../../base/types'
import type { EngineTimeLimits } from '../../engines/time-limits'
import type { Engine } from '../../engines/types'
import { HttpError } from '../../http/errors'
import type { GenerationParameterOptions } from '../../http/validate'
import type { RenderRequestOptions } from '../../render/index'
import type { ApiKeys, Caller } from '../keys/api-keys'
import type { KeyLimiter } from '../keys/key-limits'
import type { GatewayMetrics } from '../observe/metrics'
import type { RequestLogger } from '../observe/request-log'
import { ownedStore } from '../stores/owned-store'
import type { Sealer } from '../stores/seal'
import type { ResponseStore } from '../stores/store'
import type { CallIdCache } from './call-ids'
import type { RenderWorkers } from './render-workers'

/** What the parser recovered from, and tool arguments that are not JSON: worth a log line, not a failure. */
export interface GatewayDiagnostic {
  code: string
  message: string
  /**
   * The engine whose output it is about, named as the metrics name engines (a group's member: `vllm/0`; after a
   * failover, the one that generated what it points at: observe/engine-trail.ts). Absent: it is about the
   * request (`not-applied`, `prompt-re-rendered`), which the metrics count under `none`.
   */
  engine?: string
}

/** How streams ended: `clientClosed` is a client that left (counted, never logged: it is no error). */
export interface Outcomes {
  completed: number
  failed: number
  clientClosed: number
}

export interface Gateway {
  engine: Engine
  /** The parser's backend every adapter uses. */
  implementation: Implementation
  /** The model id answers carry and `/v1/models` lists. */
  model: string
  bodyLimit: number
  renderOptions: RenderRequestOptions
  /** With render workers: bodies up to this many bytes are rendered inline. */
  renderInlineBytes: number
  /** How request fields no table knows are answered (`'refuse'`: a 400). */
  unknownFields: 'refuse' | 'ignore'
  parameterOptions: GenerationParameterOptions
  engineTimeLimits: Readonly<Required<EngineTimeLimits>>
  /** Built-in tool calls run per answer. */
  toolCalls: number
  frames: 'sse' | 'objects'
  coalesceMs: number
  /** How long a write waits for a client that takes nothing before the client is dropped; null: no bound. */
  writeTimeoutMs: number | null
  onDiagnostic: (diagnostic: GatewayDiagnostic) => void
  onError: (error: unknown) => void
  /** Where answers are kept (narrowed to the caller's records in a gateway with keys); null: none. */
  store: ResponseStore | null
  /** The ids behind the tool calls the gateway returned, for exact prompts of the requests answering them; null: off. */
  callIds: CallIdCache | null
  /** The gateway's key: what it seals for clients to carry (compactions, reasoning, thinking signatures). */
  sealer: Sealer
  /** Threads that render off the event loop; null: all inline. */
  workers: RenderWorkers | null
  /** Prometheus metrics (`GET /metrics`); null with `metrics: false`. */
  meters: GatewayMetrics | null
  requestLog: RequestLogger | null
  /** The keys this gateway takes; null: none (open). */
  apiKeys: ApiKeys | null
  /** The API key's holder a request is served for; null in a gateway without keys. */
  caller: Caller | null
  /** What each key is using of its limits (in this process, or in Redis). */
  limiter: KeyLimiter
  outcomes: Outcomes
  /**
   * The work of requests and WebSocket turns not yet done (a response still being kept after its stream ended):
   * what a shutdown waits for before it closes the store.
   */
  inFlight: Set<Promise<unknown>>
  /**
   * Aborted when the gateway's shutdown grace period ends (`GatewayHandler.close`), with `gatewayShutdown()` as
   * its reason: every generation still running ends with it (an SSE stream with its API's error event, a
   * WebSocket turn with `response.failed`, a background run kept failed), rather than being cut.
   */
  stopping: AbortSignal
}

/**
 * What a generation still running when the gateway's shutdown grace period ends is answered with: a 503 (the
 * request may be sent again, to this gateway's successor), `gateway_shutdown`.
 */
export function gatewayShutdown(): HttpError {
  return new HttpError(503, 'the gateway shut down before this response was complete; send the request again', {
    code: 'gateway-shutdown',
  })
}

/** The gateway's bound on an SSE client's writes (`writeTimeoutMs`), each drop counted (`harmony_write_timeouts_total`). */
export function writeBound(gateway: Gateway): { writeTimeoutMs: number | null; onWriteTimeout: () => void } {
  return { writeTimeoutMs: gateway.writeTimeoutMs, onWriteTimeout: () => gateway.meters?.writeTimedOut('sse') }
}

/** Runs `work` counted in `gateway.inFlight` until it settles. */
export function tracked<T>(gateway: Gateway, work: Promise<T>): Promise<T> {
  gateway.inFlight.add(work)
  const done = () => gateway.inFlight.delete(work)
  work.then(done, done)
  return work
}

/**
 * The gateway as one API key's holder sees it: the same gateway, its store narrowed to what that caller kept
 * (null: a gateway without keys, seen whole).
 */
export function gatewayFor<G extends Gateway>(gateway: G, caller: Caller | null): G {
  if (caller === null) return gateway
  return { ...gateway, caller, store: gateway.store === null ? null : ownedStore(gateway.store, caller.name) }
}
