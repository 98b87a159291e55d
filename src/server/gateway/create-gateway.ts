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

import { closeServer, delay, hardenServer, serverOptions } from '../../http/server'
import { DEFAULT_WRITE_TIMEOUT_MS } from '../../http/sse'
import { backgroundFeature } from '../background/detached'
import { chatFeature } from '../chat/chat-face'
import { compactionFeature } from '../compaction/compact-route'
import { conversationsFeature } from '../conversations/conversations-api'
import { messagesFeature } from '../messages/messages-face'
import { gatewayShutdown, type Outcomes, tracked } from '../pipeline/context'
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
   * Ends the gateway's own work. At once, WebSocket connections take no new turn (each closes, 1001, once it has
   * none running) and no new connection. What runs (streams, WebSocket turns, background runs) may go on for
   * `graceMs` (default 0), or until it has all ended; then every generation still running ends with its API's
   * error, saying the gateway shut down (`gateway_shutdown`, a 503): an SSE stream's error event (Chat's error
   * chunk, Responses' `response.failed`, Messages' `error`), a WebSocket turn's `response.failed`, a background
   * response kept `failed` (its followers told). Then what requests and turns were still doing (a failed
   * response being kept) is awaited, the render workers stopped and a store it made closed. Stop your server
   * from accepting first, and close its connections once their responses have ended; a store passed in can be
   * closed after.
   */
  close(graceMs?: number): Promise<void>
}

/** How a gateway's end goes: `stopped` once its grace period is over (what still ran was told to end), `settled` once all of it ended. */
interface Ending {
  stopped: Promise<void>
  settled: Promise<void>
}

/**
 * Resolves when nothing of the gateway runs (requests, WebSocket turns, background runs), or after `graceMs`,
 * whichever comes first.
 */
async function quiet(gateway: WholeGateway, graceMs: number): Promise<void> {
  const busy = () => gateway.inFlight.size > 0 || (gateway.background?.runs ?? 0) > 0
  if (graceMs <= 0 || !busy()) return
  let timer: NodeJS.Timeout | undefined
  // A timer past 2^31 - 1 ms would fire at once.
  const over = new Promise<true>((resolve) => (timer = setTimeout(() => resolve(true), Math.min(graceMs, 2 ** 31 - 1))))
  try {
    for (let ended = false; !ended && busy(); ) {
      const idle = Promise.allSettled([...gateway.inFlight, gateway.background?.idle()]).then(() => false)
      ended = await Promise.race([idle, over])
    }
  } finally {
    clearTimeout(timer)
  }
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

function handlerOf(settings: GatewaySettings): GatewayHandler & { end(graceMs: number): Ending } {
  const gateway = gatewayOf(settings)
  const handle = gatewayHandler(gateway, FEATURES)
  const sockets = responsesSockets(gateway)
  let ending: Ending | null = null
  const settle = async (stopped: Promise<void>) => {
    await stopped
    // The runs stopped fail as their engine would have failed (the gateway's `stopping` ends their steps too).
    await gateway.background?.close(gateway.stopping.reason)
    // Requests and turns that were stopped may still be keeping their responses.
    while (gateway.inFlight.size > 0) await Promise.allSettled([...gateway.inFlight])
    // Connections whose close (1001) has not been answered.
    sockets.end()
    await gateway.workers?.close()
    await gateway.python?.close()
    gateway.meters?.close()
    const { store, ownStore } = gateway
    if (ownStore && store !== null) await store.close()
  }
  const end = (graceMs: number): Ending => {
    if (ending === null) {
      const refusal = gatewayShutdown()
      sockets.goAway(refusal)
      const stopped = quiet(gateway, graceMs).then(() => gateway.stop.abort(refusal))
      ending = { stopped, settled: settle(stopped) }
    }
    return ending
  }
  return {
    handle: (request, response) => tracked(gateway, handle(request, response)),
    upgrade: sockets.upgrade,
    outcomes: gateway.outcomes,
    close: (graceMs = 0) => end(graceMs).settled,
    end,
  }
}

/** The gateway's HTTP server; `outcomes` counts how its streams ended. */
export interface GatewayServer extends Server {
  readonly outcomes: Outcomes
  /**
   * After `close()` or `shutdown()`: resolves once the gateway's own work has ended too: background runs kept as
   * failed, responses of requests that were stopped kept, the render workers stopped, a store it made closed. A
   * store passed in (`responses.store`) can be closed safely after it.
   */
  settled(): Promise<void>
  /**
   * Stops the server as `harmony-stream serve` does on SIGTERM (`closeGracefully`): it stops accepting at once
   * (idle keep-alive connections close now, others once their request has ended); what runs may finish for
   * `graceMs` (`GatewayHandler.close`); then every generation still running ends with its API's error, its
   * client given `writeTimeoutMs` to take its last bytes before what is still open is closed. Resolves once the
   * server has closed and the gateway's work has settled. (`close()` is the same with no grace period.)
   */
  shutdown(graceMs: number): Promise<void>
}

/** The gateway as a `node:http` server (`hardenServer`'s limits), created and not started. */
export function createGateway(options: GatewayOptions): GatewayServer {
  const settings = gatewaySettings(options)
  const gateway = handlerOf(settings)
  const limits = settings.serverLimits
  const server = hardenServer(createServer(serverOptions(limits), gateway.handle), limits)
  server.on('upgrade', gateway.upgrade)
  // What the gateway runs ends with the server (WebSocket connections and background runs would otherwise
  // hold it): at once, unless a shutdown began with a grace period.
  let ending: Ending | null = null
  const endGateway = (graceMs: number): Ending => {
    ending ??= gateway.end(graceMs)
    ending.settled.catch(() => {})
    return ending
  }
  const stopAccepting = server.close.bind(server)
  server.close = (callback?: (error?: Error) => void) => {
    endGateway(0)
    return stopAccepting(callback)
  }
  const closed = new Promise<void>((resolve) => server.once('close', resolve))
  const settled = async () => {
    await closed
    await endGateway(0).settled
  }
  return Object.assign(server, {
    outcomes: gateway.outcomes,
    settled,
    async shutdown(graceMs: number) {
      const { stopped, settled: ended } = endGateway(graceMs)
      // After the grace period the streams still open end with their errors; whatever is open once they have
      // ended, or once their clients had the write timeout to take their last bytes, is closed.
      const last = settings.writeTimeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS
      await closeServer(
        server,
        stopped.then(() => Promise.race([ended, delay(last)])),
      )
      await settled()
    },
  })
}
