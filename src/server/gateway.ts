/**
 * `createGateway(options)`: an OpenAI-compatible HTTP server (Chat Completions, Responses with memory,
 * background runs, compaction, the WebSocket mode) in front of a token-level inference engine. Created, not
 * started: `server.listen(port)`. A request follows one line, each step a module of this folder:
 *
 *   routes → prepare (inline or in a render worker) → generate → respond (JSON, SSE, WebSocket) → keep
 */
import { createServer, type Server } from 'node:http'

import { hardenServer } from '../serving/http/server'
import { type Gateway, gatewayOf, type Outcomes, tracked } from './context'
import { type GatewayOptions, gatewaySettings } from './options'
import { acceptResponsesSockets } from './responses/socket'
import { gatewayHandler } from './routes'

/** The gateway's HTTP server; `outcomes` counts how its streams ended. */
export interface GatewayServer extends Server {
  readonly outcomes: Outcomes
  /**
   * After `close()`: resolves once the gateway's own work has ended too: background runs kept as cancelled,
   * responses of requests that were cut still being kept, the render workers stopped, a store it made closed.
   * A store passed in (`responseStore`) can be closed safely after it.
   */
  settled(): Promise<void>
}

export function createGateway(options: GatewayOptions): GatewayServer {
  const gateway = gatewayOf(gatewaySettings(options))
  const handle = gatewayHandler(gateway)
  const server = hardenServer(
    createServer((request, response) => tracked(gateway, handle(request, response))),
    gateway.serverLimits,
  )
  const endSockets = acceptResponsesSockets(gateway, server)
  const settled = closeWith(server, gateway, endSockets)
  return Object.assign(server, { outcomes: gateway.outcomes, settled })
}

/**
 * What the server's close ends: upgraded connections are not the HTTP server's to end (close() would wait for
 * them), background runs end now (cancelled) rather than when their followers leave, then the render workers
 * stop and a store the gateway made closes.
 */
function closeWith(server: Server, gateway: Gateway, endSockets: () => void): () => Promise<void> {
  let closing: Promise<void> | null = null
  let settled: Promise<void> | null = null
  const closeServer = server.close.bind(server)
  server.close = (callback?: (error?: Error) => void) => {
    endSockets()
    closing = gateway.background?.close() ?? Promise.resolve()
    return closeServer(callback)
  }
  const closed = new Promise<void>((resolve) => server.once('close', resolve))
  const settle = async () => {
    await closed
    await (closing ?? gateway.background?.close())
    // Requests and turns that were cut may still be keeping their responses.
    while (gateway.inFlight.size > 0) await Promise.allSettled([...gateway.inFlight])
    await gateway.workers?.close()
    const { store, ownStore } = gateway
    if (ownStore && store !== null) await store.close()
  }
  server.once('close', () => {
    settled ??= settle()
    settled.catch(gateway.onError)
  })
  return () => {
    settled ??= settle()
    return settled
  }
}
