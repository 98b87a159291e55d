/**
 * The gateway's HTTP routes, and the one handler that dispatches to them and turns every failure into its
 * OpenAI-style answer (`sendError`).
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { context } from '@opentelemetry/api'
import { EngineGroup } from '../engines/group'
import { errorResponse, HttpError, sendError } from '../http/errors'
import { anthropicAnswer } from '../wire/messages'
import { pipeStreamLog } from './background/stream-log'
import { serveCompaction } from './compaction/compact-route'

import type { Caller } from './keys/api-keys'
import { belongsTo, gatewayFor } from './keys/caller'
import { answerRequestId, countMessageTokens, serveMessages } from './messages/serve-messages'
import { recordOf, startRecord } from './observe/request-log'
import { endRequestSpan, requestSpan } from './observe/tracing'
import type { Gateway } from './pipeline/context'
import { serveGeneration } from './pipeline/respond'
import { sendJson } from './pipeline/send'
import { responseIdOf, responseNotFound, responseRecord, storedResponseRoute } from './responses/conversation'

/** A route's handler, given the gateway as the request's caller sees it (`gatewayFor`). */
type Handler = (gateway: Gateway, request: IncomingMessage, response: ServerResponse) => Promise<void> | void

function methodNotAllowed(response: ServerResponse, path: string, method: string | undefined, allow: string): HttpError {
  response.setHeader('allow', allow)
  return new HttpError(405, `${path} accepts ${allow}, not ${method}`, { code: 'method-not-allowed' })
}

/** The routes of fixed paths. */
function fixedRoutes(gateway: Gateway): Record<string, Record<string, Handler>> {
  const { model, created, engine, implementation, stats, outcomes } = gateway
  const routes: Record<string, Record<string, Handler>> = {
    '/v1/chat/completions': { POST: (view, request, response) => serveGeneration(view, 'chat', request, response) },
    '/v1/responses': { POST: (view, request, response) => serveGeneration(view, 'responses', request, response) },
    '/v1/responses/compact': { POST: (view, request, response) => serveCompaction(view, request, response) },
    '/v1/messages': { POST: (view, request, response) => serveMessages(view, request, response) },
    '/v1/messages/count_tokens': { POST: (view, request, response) => countMessageTokens(view, request, response) },
    '/v1/models': {
      GET: (_view, request, response) =>
        sendJson(
          response,
          200,
          // Anthropic's clients send their API version: they get their list's shape.
          request.headers['anthropic-version'] === undefined
            ? { object: 'list', data: [{ id: model, object: 'model', created, owned_by: 'harmony-stream' }] }
            : {
                data: [{ type: 'model', id: model, display_name: model, created_at: new Date(created * 1000).toISOString() }],
                has_more: false,
                first_id: model,
                last_id: model,
              },
        ),
    },
    '/health': {
      GET: (_view, _request, response) =>
        sendJson(response, 200, {
          status: 'ok',
          engine: engine.name,
          implementation,
          // Several engines: each one's state (running generations, whether it is in).
          ...(engine instanceof EngineGroup ? { engines: engine.status() } : {}),
        }),
    },
  }
  if (stats !== null) routes['/stats'] = { GET: (_view, _request, response) => sendJson(response, 200, { ...stats(), outcomes }) }
  const { meters } = gateway
  if (meters !== null)
    routes['/metrics'] = {
      GET: async (_view, _request, response) => {
        const text = await meters.registry.metrics()
        response.writeHead(200, { 'content-type': meters.registry.contentType })
        response.end(text)
      },
    }
  return routes
}

/**
 * `id`, when the caller may act on it (always, in a gateway without keys); else the 404 of a response that is not
 * there: another caller's response is not shown to exist.
 */
async function owned(gateway: Gateway, id: string): Promise<string> {
  if (gateway.caller === null || gateway.store === null) return id
  if ((await responseRecord(gateway.store, id)) === null) throw responseNotFound(id)
  return id
}

/** The route a path is counted under: one of the gateway's own patterns, never the path as sent (it holds ids). */
function routeLabel(routes: Record<string, unknown>, target: string | undefined): string {
  const path = (target ?? '').split('?', 1)[0]!
  if (Object.hasOwn(routes, path)) return path
  const id = /^\/v1\/responses\/[^/]+(\/cancel|\/input_items)?$/.exec(path)
  return id === null ? 'other' : `/v1/responses/{id}${id[1] ?? ''}`
}

/**
 * The routes whose path holds a response id: `POST /v1/responses/{id}/cancel`, `GET /v1/responses/{id}?stream=true`
 * (a background response's events), `GET`/`DELETE /v1/responses/{id}` and `GET …/input_items` (the kept
 * responses). False when the path is none of them.
 */
async function responseIdRoute(gateway: Gateway, request: IncomingMessage, response: ServerResponse, url: URL): Promise<boolean> {
  const { background, store } = gateway
  const path = url.pathname
  const cancelled = background === null ? null : /^\/v1\/responses\/([^/]+)\/cancel$/.exec(path)
  if (background !== null && cancelled !== null) {
    if (request.method !== 'POST') throw methodNotAllowed(response, path, request.method, 'POST')
    sendJson(response, 200, await background.cancel(await owned(gateway, responseIdOf(cancelled[1]!))))
    return true
  }
  const resumed =
    background !== null && request.method === 'GET' && url.searchParams.get('stream') === 'true'
      ? /^\/v1\/responses\/([^/]+)$/.exec(path)
      : null
  if (background !== null && resumed !== null) {
    const { log, after } = await background.stream(await owned(gateway, responseIdOf(resumed[1]!)), url.searchParams.get('starting_after'))
    await pipeStreamLog(response, log, after)
    return true
  }
  // A DELETE stops a background run first, so that how it ends does not bring the response back.
  const deleted = background !== null && request.method === 'DELETE' ? /^\/v1\/responses\/([^/]+)$/.exec(path) : null
  if (background !== null && deleted !== null) {
    const id = await owned(gateway, responseIdOf(deleted[1]!))
    if (await background.delete(id)) {
      sendJson(response, 200, { id, object: 'response', deleted: true })
      return true
    }
  }
  // A poll of a run whose process is gone ends it (kept as failed), rather than answering in_progress forever.
  const polled = background !== null && request.method === 'GET' ? /^\/v1\/responses\/([^/]+)$/.exec(path) : null
  if (background !== null && polled !== null) {
    const id = responseIdOf(polled[1]!)
    const record = await background.reapOrphan(id)
    if (record === null || !belongsTo(record, gateway.caller)) throw responseNotFound(id)
    sendJson(response, 200, record.response)
    return true
  }
  const stored = store === null ? null : await storedResponseRoute(store, request.method ?? 'GET', url)
  if (stored === null) return false
  if (stored.status === 405) throw methodNotAllowed(response, path, request.method, stored.allow ?? 'GET')
  sendJson(response, stored.status, stored.body)
  return true
}

/** The request's URL; a request target no URL parser takes (`GET http://[` …) is a 400, not a failure. */
function urlOf(request: IncomingMessage): URL {
  try {
    return new URL(request.url ?? '/', 'http://localhost')
  } catch {
    throw new HttpError(400, `the request target is not a URL: ${JSON.stringify(request.url ?? '').slice(0, 100)}`, {
      code: 'invalid-path',
    })
  }
}

/** The caller of a request (a 401 without a valid key), or null: a gateway without keys, or a route open to all. */
function callerOf(gateway: Gateway, path: string, request: IncomingMessage): Caller | null {
  const { apiKeys, publicRoutes } = gateway
  if (apiKeys === null || publicRoutes.includes(path)) return null
  const caller = apiKeys.caller(request.headers)
  // The request's log line names the key's holder (never the key).
  const record = recordOf(request)
  if (record !== undefined) record.key = caller.name
  return caller
}

/** The request handler of a gateway's HTTP server. */
export function gatewayHandler(gateway: Gateway): (request: IncomingMessage, response: ServerResponse) => Promise<void> {
  const routes = fixedRoutes(gateway)
  const { meters } = gateway
  return (request, response) => {
    // Counted and traced under its route's pattern, once its answer has ended.
    const label = routeLabel(routes, request.url)
    const started = performance.now()
    const traced = requestSpan(request.method ?? 'GET', label, request.headers)
    if (gateway.requestLog !== null) startRecord(gateway.requestLog, request, response, label)
    response.once('close', () => {
      meters?.answered(label, response.statusCode, (performance.now() - started) / 1000)
      endRequestSpan(traced.span, response.statusCode)
    })
    return context.with(traced.context, () => answer(request, response))
  }

  async function answer(request: IncomingMessage, response: ServerResponse): Promise<void> {
    try {
      const url = urlOf(request)
      const path = url.pathname
      if (path === '/v1/messages' || path === '/v1/messages/count_tokens') answerRequestId(response)
      const route = routes[path]
      if (route === undefined) {
        if (await responseIdRoute(gatewayFor(gateway, callerOf(gateway, path, request)), request, response, url)) return
        throw new HttpError(404, `no route for ${request.method} ${path}`, { code: 'not-found', type: 'not_found' })
      }
      const handle = request.method === undefined ? undefined : route[request.method]
      if (handle === undefined) throw methodNotAllowed(response, path, request.method, Object.keys(route).join(', '))
      await handle(gatewayFor(gateway, callerOf(gateway, path, request)), request, response)
    } catch (error) {
      // A client that left before its first step (the engine request was aborted with it) is an outcome.
      if (response.destroyed && !response.writableFinished) {
        gateway.outcomes.clientClosed++
        return
      }
      // The Messages API's routes answer in Anthropic's shape.
      const path = request.url?.split('?', 1)[0]
      const messages = path === '/v1/messages' || path === '/v1/messages/count_tokens'
      const shape = messages ? (failure: unknown) => anthropicAnswer(errorResponse(failure)) : errorResponse
      if (sendError(response, error, shape) >= 500) gateway.onError(error)
    }
  }
}
