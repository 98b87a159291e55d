/**
 * The gateway's own third-party packages, loaded in this one module: they are harmony-stream-gateway's dependencies,
 * not harmony-stream's, so that a parser user does not install a server (base/optional-package.ts says where
 * they are looked up). Without harmony-stream-gateway, loading harmony-stream/server stops here with one line
 * that says to install it. Their types stay static imports (`import type`), which load nothing.
 */
import type * as OpenTelemetry from '@opentelemetry/api'
import type * as Pino from 'pino'
import type * as PromClient from 'prom-client'
import type * as Ws from 'ws'

import { requireGatewayPackage } from '../base/optional-package'

export const { pino } = requireGatewayPackage<typeof Pino>('pino')
export const { AggregatorRegistry, Counter, Gauge, Histogram, Registry } = requireGatewayPackage<typeof PromClient>('prom-client')
export const { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } =
  requireGatewayPackage<typeof OpenTelemetry>('@opentelemetry/api')

/** The WebSocket transport, loaded when the WebSocket mode is first set up, not with the gateway. */
export function webSockets(): typeof Ws {
  return requireGatewayPackage<typeof Ws>('ws')
}
