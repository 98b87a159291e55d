/**
 * What every step of a request reads: the gateway's settings and the machinery it made from them. One object,
 * made once by `createGateway`, handed to the steps (prepare → generate → respond → keep) instead of closures.
 */

import type { GenerationParameterOptions } from '../../http/validate'
import { BackgroundResponses } from '../background/runs'
import type { Caller } from '../keys/api-keys'
import { type KeyLimiter, MemoryKeyLimiter } from '../keys/key-limits'
import { GatewayMetrics } from '../observe/metrics'
import { inSpan } from '../observe/tracing'
import type { ResponseStore } from '../stores/store'
import type { GatewayDiagnostic, GatewaySettings } from './options'
import { RenderWorkers } from './render-workers'

/** How streams ended: `clientClosed` is a client that left (counted, never logged: it is no error). */
export interface Outcomes {
  completed: number
  failed: number
  clientClosed: number
}

export interface Gateway extends GatewaySettings {
  /** Background responses this process runs (and cancels, and streams); null without a store. */
  background: BackgroundResponses | null
  /** Threads that render off the event loop; null: all inline. */
  workers: RenderWorkers | null
  parameterOptions: GenerationParameterOptions
  outcomes: Outcomes
  /**
   * The work of requests and WebSocket turns not yet done (a response still being kept after its stream ended):
   * what a shutdown waits for before it closes the store.
   */
  inFlight: Set<Promise<unknown>>
  /** The Unix time `/v1/models` gives as the model's `created`. */
  created: number
  /** Prometheus metrics (`GET /metrics`); null with `metrics: false`. */
  meters: GatewayMetrics | null
  /** The API key's holder a request is served for (`gatewayFor`); null in a gateway without keys. */
  caller: Caller | null
  /** What each key is using of its limits (in this process, or in Redis: `keyLimiter`). */
  limiter: KeyLimiter
}

/** Runs `work` counted in `gateway.inFlight` until it settles. */
export function tracked<T>(gateway: Gateway, work: Promise<T>): Promise<T> {
  gateway.inFlight.add(work)
  const done = () => gateway.inFlight.delete(work)
  work.then(done, done)
  return work
}

export function gatewayOf(settings: GatewaySettings): Gateway {
  const { renderWorkers, renderOptions, unknownFields, onError } = settings
  const parameterOptions = { unknownFields }
  const workers = renderWorkers > 0 ? new RenderWorkers({ size: renderWorkers, renderOptions, parameterOptions }) : null
  let background: BackgroundResponses | null = null
  const meters = settings.metrics
    ? new GatewayMetrics({ renderQueue: () => workers?.queued ?? 0, backgroundRuns: () => background?.runs ?? 0 })
    : null
  // Traced and counted where they happen: every store operation, every diagnostic.
  const store = settings.store === null ? null : observedStore(settings.store, meters)
  const onDiagnostic =
    meters === null
      ? settings.onDiagnostic
      : (diagnostic: GatewayDiagnostic) => {
          meters.diagnostic(diagnostic)
          settings.onDiagnostic(diagnostic)
        }
  background = store === null ? null : new BackgroundResponses({ store, onError, onDiagnostic })
  return {
    ...settings,
    store,
    onDiagnostic,
    background,
    workers,
    parameterOptions,
    outcomes: { completed: 0, failed: 0, clientClosed: 0 },
    inFlight: new Set(),
    created: Math.floor(Date.now() / 1000),
    meters,
    caller: null,
    limiter: settings.keyLimiter ?? new MemoryKeyLimiter(),
  }
}

/** `store` with each operation in a span of its own (`store.get`, `store.put`, `store.delete`) and, with metrics, counted. */
function observedStore(store: ResponseStore, meters: GatewayMetrics | null): ResponseStore {
  const observe = <T>(op: string, work: () => Promise<T>) =>
    inSpan(`store.${op}`, meters === null ? work : () => meters.storeOperation(op, work))
  return {
    get: (id) => observe('get', () => store.get(id)),
    put: (record) => observe('put', () => store.put(record)),
    delete: (id) => observe('delete', () => store.delete(id)),
    close: () => store.close(),
  }
}
