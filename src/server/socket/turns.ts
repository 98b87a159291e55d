/**
 * The Responses API's WebSocket mode at `/v1/responses` (`ResponsesSocket`: the protocol; the `ws` package:
 * the transport, loaded with the first gateway, not with the package). Each turn is prepared as a POST's body
 * (with the response the connection found for `previous_response_id`), its events emitted one by one.
 */
import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'

import { errorResponse, failureEvent } from '../../http/errors'
import { ResponsesStream } from '../../wire/responses'
import { webSockets } from '../gateway-packages'
import type { EngineTrail } from '../observe/engine-trail'
import { rememberCalls } from '../pipeline/answering-calls'
import { beginTurn } from '../pipeline/begin-budget'
import { gatewayFor, tracked } from '../pipeline/context'
import { admit, generate } from '../pipeline/generate'
import { reportPrepared, tellDiagnostics } from '../pipeline/serve-face'
import { responseRecord } from '../responses/conversation'
import { endingCalls, keepAnswer, recordOf } from '../responses/keep'
import { prepareResponsesBody } from '../responses/prepare-responses'
import { toolsOfResponse } from '../responses/response-tools'
import { responsesOptions } from '../responses/responses-face'
import type { ResponsesGateway } from '../responses/responses-gateway'
import type { StoredResponse } from '../stores/store'
import { type ResponsesSocket, type SocketTurn, serveResponsesSocket, sseEventTexts } from './protocol'

/** What the WebSocket mode reads of the gateway beyond what Responses does. */
export interface SocketGateway extends ResponsesGateway {
  /** How long a connection lives, in ms. */
  socketLifetimeMs: number
  /** How long a connection may wait for its next turn before it is closed, in ms. */
  socketIdleMs: number
  /**
   * Connections one gateway process holds at once: past it, the one idle longest is closed for the new one (a
   * 503 when none is idle).
   */
  maxSockets: number
}

/** Responses WebSocket connections one gateway process holds at once, by default. */
export const DEFAULT_MAX_SOCKETS = 1024
/** …and one API key at most, unless its `limits.webSockets` says otherwise (more are answered 429). */
const DEFAULT_SOCKETS_PER_KEY = 64

/**
 * One turn: returns the record a continuation on the connection starts from (also when not stored). An engine
 * that fails before its first step is answered with an error frame (a 502); one that fails later ends the
 * response with `response.failed`.
 */
async function socketTurn(gateway: SocketGateway, request: IncomingMessage, turn: SocketTurn): Promise<StoredResponse> {
  const { body, previous, emit, signal, size } = turn
  // Begun a few a turn as HTTP requests are (begin-budget.ts).
  const due = beginTurn(gateway)
  if (due !== null) await due
  const prepared = await prepareResponsesBody(gateway, body, previous, size > gateway.renderInlineBytes)
  // No headers on a WebSocket turn: what was not applied goes to the log.
  reportPrepared(gateway, prepared, null)
  const options = responsesOptions(gateway, prepared, request)
  const tools = toolsOfResponse(gateway, prepared, options)
  const adapter = new ResponsesStream(options)
  const generated: number[] = []
  let started = false
  let kept = false
  // Which engine generated what, for the diagnostics (none yet: a turn that fails before it generates has none).
  let served: EngineTrail | null = null
  try {
    const generation = generate(gateway, request, prepared, signal, generated, await admit(gateway), tools)
    served = generation.served
    // The adapter's SSE face (its fast lane) cut into the events' JSON texts: one WebSocket message each.
    for await (const step of generation.steps) {
      started = true
      for (const text of sseEventTexts(adapter.pushSse(step))) await emit(text)
      // A client that stopped reading: nothing more is read from the engine.
      if (signal.aborted) break
    }
    for (const text of sseEventTexts(adapter.settleSse())) await emit(text)
    // Kept (and added to its conversation) before `response.completed` says so (or says `store: false` when the store fails).
    if (!(await keepAnswer(gateway, adapter.response(), prepared, generated))) adapter.unstore()
    // A client that sends its history back on a later turn (or connection) finds the ids behind these calls.
    await rememberCalls(gateway, endingCalls(adapter.response()), prepared, generated)
    kept = true
    for (const text of sseEventTexts(adapter.concludeSse())) await emit(text)
  } catch (error) {
    if (!started || signal.aborted) throw error
    gateway.onError(error)
    for (const event of adapter.error(...failureEvent(error))) await emit(event)
  }
  // Counted, not noted in a request's line: a turn is no HTTP request, and has none.
  if (served !== null) tellDiagnostics(gateway, null, adapter.diagnostics, served)
  const object = adapter.response()
  if (!kept && !(await keepAnswer(gateway, object, prepared, generated))) object.store = false
  return recordOf(object, prepared, generated)
}

/** The WebSocket mode of a gateway: what answers an HTTP upgrade, and what ends every connection. */
export interface ResponsesSockets {
  /**
   * Answers an upgrade request (a server's `upgrade` event): `/v1/responses` only, at most `maxSockets` at once
   * (the one idle longest closed for a new one).
   */
  upgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void
  /**
   * The gateway is shutting down: no connection or turn is taken any more (`refusal` answers them); each
   * connection closes (1001) once it has no turn running (`ResponsesSocket.goAway`).
   */
  goAway(refusal: unknown): void
  /** Ends every connection still open (at close: upgraded connections are not an HTTP server's to end). */
  end(): void
}

export function responsesSockets(gateway: SocketGateway): ResponsesSockets {
  // Loaded here, not at the top: importing the package must not load the transport.
  const { WebSocketServer } = webSockets()
  // Messages up to the body limit; a larger one closes the connection (1009).
  const sockets = new WebSocketServer({ noServer: true, maxPayload: gateway.bodyLimit })
  /** Connections each key holds now. */
  const perKey = new Map<string, number>()
  /** The sessions of the open connections (not those closing: an evicted one counts no more). */
  const sessions = new Set<ResponsesSocket>()
  /** The idle ones, the longest idle first (a Map keeps the order they were set in). */
  const idle = new Map<ResponsesSocket, true>()
  /** Closes the connection idle longest (1000, `idle`); false when none is idle. */
  const evictIdlest = (): boolean => {
    for (const session of idle.keys()) {
      idle.delete(session)
      sessions.delete(session)
      if (session.evict()) {
        gateway.meters?.socketEvicted()
        return true
      }
    }
    return false
  }
  /** Set once the gateway shuts down: what new connections and turns are refused with. */
  let refusal: unknown = null
  return {
    upgrade(request, socket, head) {
      if (new URL(request.url ?? '/', 'http://localhost').pathname !== '/v1/responses') {
        socket.end('HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n')
        return
      }
      if (refusal !== null) {
        socket.end('HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 0\r\n\r\n')
        return
      }
      // A connection is its key holder's, as each of its turns is (a gateway with keys refuses one without).
      let view: SocketGateway
      try {
        view = gatewayFor(gateway, gateway.apiKeys === null ? null : gateway.apiKeys.caller(request.headers))
      } catch (error) {
        const body = JSON.stringify(errorResponse(error).body)
        socket.end(
          `HTTP/1.1 401 Unauthorized\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
        )
        return
      }
      // One key cannot take every connection the process holds.
      const caller = view.caller
      if (caller !== null) {
        const cap = caller.limits.webSockets ?? DEFAULT_SOCKETS_PER_KEY
        const held = perKey.get(caller.name) ?? 0
        if (held >= cap) {
          const body = JSON.stringify({
            error: {
              message: `this key holds ${cap} WebSocket connections, its limit`,
              type: 'requests',
              param: null,
              code: 'rate_limit_exceeded',
            },
          })
          socket.end(
            `HTTP/1.1 429 Too Many Requests\r\nconnection: close\r\nretry-after: 5\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
          )
          return
        }
      }
      // At the cap, the connection idle longest makes way (idle connections cannot lock new clients out, as they
      // did for up to socketIdleMs, and as a client reopening them could for ever); only a connection the gateway
      // takes (its key checked) does. Not a cap per address: behind a load balancer or a NAT every client has the
      // same one, and an attacker with IPv6 has as many as it likes; a connection running a turn is never closed
      // for another. OpenAI documents no such cap (its WebSocket mode guide: a 60-minute lifetime,
      // `websocket_connection_limit_reached`), nor an idle timeout.
      if (sessions.size >= gateway.maxSockets && !evictIdlest()) {
        socket.end('HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\nretry-after: 5\r\ncontent-length: 0\r\n\r\n')
        return
      }
      const { store } = view
      sockets.handleUpgrade(request, socket, head, (ws) => {
        if (caller !== null) {
          // Counted once the connection is open (a handshake that fails takes nothing), given back when it closes.
          perKey.set(caller.name, (perKey.get(caller.name) ?? 0) + 1)
          ws.once('close', () => perKey.set(caller.name, (perKey.get(caller.name) ?? 1) - 1))
        }
        // Its idle clock's starts and stops keep the order of the idle connections; the first start comes from its
        // constructor, before `session` is set, and is taken below.
        let session: ResponsesSocket | null = null
        const idleOrder = (waiting: boolean) => {
          if (session === null) return
          idle.delete(session)
          if (waiting) idle.set(session, true)
        }
        session = serveResponsesSocket(ws, {
          respond: (turn) => tracked(gateway, socketTurn(view, request, turn)),
          ...(store === null ? {} : { lookup: (id: string) => responseRecord(store, id) }),
          onError: gateway.onError,
          lifetimeMs: gateway.socketLifetimeMs,
          idleMs: gateway.socketIdleMs,
          // A client that reads nothing is let go at the gateway's write timeout, as an SSE client is.
          stallTimeoutMs: gateway.writeTimeoutMs,
          onWriteTimeout: () => gateway.meters?.writeTimedOut('websocket'),
          onIdle: idleOrder,
        })
        const opened = session
        sessions.add(opened)
        // Idle from the start: its first wait for a turn began in its constructor.
        idle.set(opened, true)
        ws.once('close', () => {
          sessions.delete(opened)
          idle.delete(opened)
        })
        // Upgraded while the gateway began to shut down.
        if (refusal !== null) session.goAway(refusal)
      })
    },
    goAway(why) {
      refusal ??= why
      for (const session of sessions) session.goAway(refusal)
    },
    end() {
      for (const ws of sockets.clients) ws.terminate()
    },
  }
}
