/**
 * What every step of a request reads: the gateway's settings and the machinery it made from them. One object,
 * made once by `createGateway`, handed to the steps (prepare → generate → respond → keep) instead of closures.
 */

import type { GenerationParameterOptions } from '../serving/http/validate'
import { RenderWorkers } from '../serving/render-workers'
import { BackgroundResponses } from '../serving/responses/background'
import type { GatewaySettings } from './options'

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
  /** The Unix time `/v1/models` gives as the model's `created`. */
  created: number
}

export function gatewayOf(settings: GatewaySettings): Gateway {
  const { store, onError, onDiagnostic, renderWorkers, renderOptions, unknownFields } = settings
  const parameterOptions = { unknownFields }
  return {
    ...settings,
    background: store === null ? null : new BackgroundResponses({ store, onError, onDiagnostic }),
    workers: renderWorkers > 0 ? new RenderWorkers({ size: renderWorkers, renderOptions, parameterOptions }) : null,
    parameterOptions,
    outcomes: { completed: 0, failed: 0, clientClosed: 0 },
    created: Math.floor(Date.now() / 1000),
  }
}
