/**
 * The gateway object every step reads, made once from the settings: each API's slice (`ChatGateway`,
 * `ResponsesGateway`…) filled in, the parts one folder plugs into another's (background runs into Responses'
 * `detach`) joined here, at the top, so that no folder below imports one beside it.
 */
import { setMaxListeners } from 'node:events'

import { type BackgroundGateway, serveBackground } from '../background/detached'
import { BackgroundResponses } from '../background/runs'
import type { ChatGateway } from '../chat/chat-face'
import type { CompactionGateway } from '../compaction/compact-route'
import type { Compactor } from '../compaction/compactor'
import { MemoryKeyLimiter } from '../keys/key-limits'
import { GatewayMetrics } from '../observe/metrics'
import { inSpan } from '../observe/tracing'
import { CallIdCache } from '../pipeline/call-ids'
import type { GatewayDiagnostic } from '../pipeline/context'
import { RenderWorkers } from '../pipeline/render-workers'
import type { SocketGateway } from '../socket/turns'
import type { ResponseStore } from '../stores/store'
import type { GatewaySettings } from './options'

/**
 * Every slice at once, on the settings it was made from (what only the gateway's own routes and its close read:
 * `stats`, `publicRoutes`, `ownStore`): what `createGatewayHandler` makes.
 */
export interface WholeGateway extends BackgroundGateway, CompactionGateway, SocketGateway, ChatGateway, GatewaySettings {
  compactor: Compactor
  /** Aborts `stopping`: what the end of a shutdown's grace period does (create-gateway.ts). */
  stop: AbortController
  /** The Unix time `/v1/models` gives as the model's `created`. */
  created: number
}

export function gatewayOf(settings: GatewaySettings): WholeGateway {
  const { renderWorkers, renderOptions, unknownFields, onError } = settings
  const parameterOptions = { unknownFields }
  const workers = renderWorkers > 0 ? new RenderWorkers({ size: renderWorkers, renderOptions, parameterOptions }) : null
  let background: BackgroundResponses | null = null
  const meters = settings.metrics
    ? new GatewayMetrics(
        { renderQueue: () => workers?.queued ?? 0, backgroundRuns: () => background?.runs ?? 0 },
        settings.metrics === 'cluster',
      )
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
  const stop = new AbortController()
  // Every running generation listens to it (limitedSteps' `stop`): past ten at once, Node would warn of a leak
  // that is none.
  setMaxListeners(0, stop.signal)
  return {
    ...settings,
    parameterOptions,
    onDiagnostic,
    store,
    callIds: settings.callIdCache === undefined ? new CallIdCache(store === null ? {} : { store }) : settings.callIdCache,
    sealer: settings.compactor.sealer,
    workers,
    meters,
    caller: null,
    limiter: settings.keyLimiter ?? new MemoryKeyLimiter(),
    outcomes: { completed: 0, failed: 0, clientClosed: 0 },
    inFlight: new Set(),
    stop,
    stopping: stop.signal,
    created: Math.floor(Date.now() / 1000),
    background,
    detach: background === null ? null : serveBackground,
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
