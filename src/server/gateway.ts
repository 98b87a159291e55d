/**
 * `createGateway(options)`: an OpenAI-compatible HTTP server (Chat Completions, Responses with memory,
 * background runs, compaction, the WebSocket mode) in front of a token-level inference engine. Created, not
 * started: `server.listen(port)`. A request follows one line, each step a module of this folder:
 *
 *   routes → prepare (inline or in a render worker) → generate → respond (JSON, SSE, WebSocket) → keep
 */
import { createServer, type Server } from 'node:http'

import { hardenServer } from '../serving/http/server'
import { type Gateway, gatewayOf, type Outcomes } from './context'
import { type GatewayOptions, gatewaySettings } from './options'
import { acceptResponsesSockets } from './responses/socket'
import { gatewayHandler } from './routes'

/** The gateway's HTTP server; `outcomes` counts how its streams ended. */
export interface GatewayServer extends Server {
  readonly outcomes: Outcomes
}

export function createGateway(options: GatewayOptions): GatewayServer {
  const gateway = gatewayOf(gatewaySettings(options))
  const server = hardenServer(createServer(gatewayHandler(gateway)), gateway.serverLimits)
  const endSockets = acceptResponsesSockets(gateway, server)
  closeWith(server, gateway, endSockets)
  return Object.assign(server, { outcomes: gateway.outcomes })
}

/**
 * What the server's close ends: upgraded connections are not the HTTP server's to end (close() would wait for
 * them), background runs end now (cancelled) rather than when their followers leave, then the render workers
 * stop and a store the gateway made closes.
 */
function closeWith(server: Server, gateway: Gateway, endSockets: () => void): void {
  let closing: Promise<void> | null = null
  const closeServer = server.close.bind(server)
  server.close = (callback?: (error?: Error) => void) => {
    endSockets()
    closing = gateway.background?.close() ?? Promise.resolve()
    return closeServer(callback)
  }
  server.on('close', () => {
    if (gateway.workers !== null) void gateway.workers.close()
    const ended = closing ?? gateway.background?.close() ?? Promise.resolve()
    const { store, ownStore } = gateway
    if (ownStore && store !== null) ended.then(() => store.close()).catch(gateway.onError)
  })
}
