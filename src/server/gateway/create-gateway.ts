/**
 * `createGateway(options)`: an OpenAI-compatible HTTP server (Chat Completions, Responses with memory,
 * background runs, compaction, conversations, the WebSocket mode, and each API its folder adds) in front of a token-level inference
 * engine. Created, not started: `server.listen(port)`. Each API is a feature of its own folder; a request
 * follows one line, the steps of pipeline/:
 *
 *   routes → prepare (inline or in a render worker) → generate → respond (JSON, SSE, WebSocket) → keep
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'

import { hardenServer, serverOptions } from '../../http/server'
import { backgroundFeature } from '../background/detached'
import { chatFeature } from '../chat/chat-face'
import { compactionFeature } from '../compaction/compact-route'
import { conversationsFeature } from '../conversations/conversations-api'
import { messagesFeature } from '../messages/messages-face'
import { type Outcomes, tracked } from '../pipeline/context'
import type { Feature } from '../pipeline/face'
import { responsesFeature } from '../responses/responses-face'
import { responsesSockets } from '../socket/turns'
import { gatewayOf, type WholeGateway } from './compose'
import { type GatewayOptions, type GatewaySettings, gatewaySettings } from './options'
import { gatewayHandler } from './routes'

/**
 * The gateway without a server of its own, for a gateway author who brings one (plain `node:http`, or a
 * framework that hands over Node's request and response): `handle` answers a request on the gateway's routes,
 * `upgrade` an HTTP upgrade (the WebSocket mode), `close` ends it.
 */
export interface GatewayHandler {
  /** Answers one request (any path: what is no route of the gateway is its 404). Never rejects. */
  handle(request: IncomingMessage, response: ServerResponse): Promise<void>
  /** Answers an upgrade request (a server's `upgrade` event): the WebSocket mode at `/v1/responses`. */
  upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void
  /** How streams ended: `completed`, `failed`, `clientClosed`. */
  readonly outcomes: Outcomes
  /**
   * Ends the gateway's own work: WebSocket connections closed and background runs cancelled at once, then what
   * requests and turns were still doing (a cut response being kept) awaited, the render workers stopped and a
   * store it made closed. Close your server's connections as you see fit; a store passed in can be closed after.
   */
  close(): Promise<void>
}

/**
 * The APIs a gateway answers, each its folder's routes; in order, since the first that takes a path with an id
 * answers it (a background run's before a kept response's).
 */
const FEATURES: readonly Feature<WholeGateway>[] = [
  backgroundFeature,
  chatFeature,
  responsesFeature,
  compactionFeature,
  conversationsFeature,
  messagesFeature,
]

/** What `serve` prints beside the /v1 base: for each API whose clients take the root, that root. */
export function rootBaseLines(root: string): string[] {
  return FEATURES.flatMap((feature) => (feature.rootClients === undefined ? [] : [`${feature.rootClients}: ${root}`]))
}

export function createGatewayHandler(options: GatewayOptions): GatewayHandler {
  return handlerOf(gatewaySettings(options))
}

function handlerOf(settings: GatewaySettings): GatewayHandler {
  const gateway = gatewayOf(settings)
  const handle = gatewayHandler(gateway, FEATURES)
  const sockets = responsesSockets(gateway)
  let closing: Promise<void> | null = null
  const settle = async (cancelled: Promise<void>) => {
    await cancelled
    // Requests and turns that were cut may still be keeping their responses.
    while (gateway.inFlight.size > 0) await Promise.allSettled([...gateway.inFlight])
    await gateway.workers?.close()
    await gateway.python?.close()
    gateway.meters?.close()
    const { store, ownStore } = gateway
    if (ownStore && store !== null) await store.close()
  }
  return {
    handle: (request, response) => tracked(gateway, handle(request, response)),
    upgrade: sockets.upgrade,
    outcomes: gateway.outcomes,
    close() {
      if (closing === null) {
        sockets.end()
        closing = settle(gateway.background?.close() ?? Promise.resolve())
      }
      return closing
    },
  }
}

/** The gateway's HTTP server; `outcomes` counts how its streams ended. */
export interface GatewayServer extends Server {
  readonly outcomes: Outcomes
  /**
   * After `close()`: resolves once the gateway's own work has ended too: background runs kept as cancelled,
   * responses of requests that were cut kept, the render workers stopped, a store it made closed. A store
   * passed in (`responses.store`) can be closed safely after it.
   */
  settled(): Promise<void>
}

/** The gateway as a `node:http` server (`hardenServer`'s limits), created and not started. */
export function createGateway(options: GatewayOptions): GatewayServer {
  const settings = gatewaySettings(options)
  const gateway = handlerOf(settings)
  const limits = settings.serverLimits
  const server = hardenServer(createServer(serverOptions(limits), gateway.handle), limits)
  server.on('upgrade', gateway.upgrade)
  // Upgraded connections and background runs end with the server (close() would otherwise wait for them).
  let settled: Promise<void> | null = null
  const closeServer = server.close.bind(server)
  server.close = (callback?: (error?: Error) => void) => {
    settled ??= gateway.close()
    settled.catch(() => {})
    return closeServer(callback)
  }
  const closed = new Promise<void>((resolve) => server.once('close', resolve))
  return Object.assign(server, {
    outcomes: gateway.outcomes,
    settled: async () => {
      await closed
      await (settled ??= gateway.close())
    },
  })
}
