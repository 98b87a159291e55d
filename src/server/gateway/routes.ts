/**
 * The gateway's HTTP routes, gathered from its features (each API's folder gives its own), and the one handler
 * that dispatches to them and turns every failure into its answer (`sendError`, in the shape of the feature whose
 * route failed). Nothing here knows an API by name.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { EngineGroup } from '../../engines/group'
import { type ErrorShape, HttpError, sendError } from '../../http/errors'
import { context } from '../gateway-packages'
import type { Caller } from '../keys/api-keys'
import { recordOf, startRecord } from '../observe/request-log'
import { endRequestSpan, requestSpan } from '../observe/tracing'
import { gatewayFor } from '../pipeline/context'
import type { Feature, Handler } from '../pipeline/face'
import { methodNotAllowed, sendJson } from '../pipeline/send'
import type { WholeGateway } from './compose'

/** A fixed route: its methods, and the feature that gave it (how it answers failures). */
interface Route {
  methods: Record<string, Handler<WholeGateway>>
  feature: Feature<WholeGateway> | null
}

/** The gateway's own routes: the model list, health, and (where configured) stats and metrics. */
function ownRoutes(
  gateway: WholeGateway,
  features: readonly Feature<WholeGateway>[],
): Record<string, Record<string, Handler<WholeGateway>>> {
  const { model, created, engine, implementation, outcomes, meters, stats } = gateway
  const routes: Record<string, Record<string, Handler<WholeGateway>>> = {
    '/v1/models': {
      GET: (_view, request, response) => {
        // An API whose clients read another shape answers them in it.
        const theirs = features.map((feature) => feature.models?.(request, model, created) ?? null).find((list) => list !== null)
        sendJson(response, 200, theirs ?? { object: 'list', data: [{ id: model, object: 'model', created, owned_by: 'harmony-stream' }] })
      },
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
  if (meters !== null)
    routes['/metrics'] = {
      GET: async (_view, _request, response) => {
        const text = await meters.scrape().catch((error: unknown) => {
          // A worker whose primary does not answer (stopping, or no `serve` primary): a 503, not a partial count.
          throw new HttpError(503, `the metrics of the cluster's workers could not be gathered: ${(error as Error).message}`, {
            code: 'metrics-unavailable',
          })
        })
        response.writeHead(200, { 'content-type': meters.registry.contentType })
        response.end(text)
      },
    }
  return routes
}

/** The route a path is counted under: one of the gateway's own patterns, never the path as sent (it holds ids). */
function routeLabel(routes: Record<string, unknown>, features: readonly Feature<WholeGateway>[], target: string | undefined): string {
  const path = (target ?? '').split('?', 1)[0]!
  if (Object.hasOwn(routes, path)) return path
  for (const feature of features) {
    const label = feature.label?.(path) ?? null
    if (label !== null) return label
  }
  return 'other'
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
function callerOf(gateway: WholeGateway, path: string, request: IncomingMessage): Caller | null {
  const { apiKeys } = gateway
  if (apiKeys === null || gateway.publicRoutes.includes(path)) return null
  const caller = apiKeys.caller(request.headers)
  // The request's log line names the key's holder (never the key).
  const record = recordOf(request)
  if (record !== undefined) record.key = caller.name
  return caller
}

/** The request handler of a gateway's HTTP server, over its features' routes (in order: the first that takes a path answers it). */
export function gatewayHandler(
  gateway: WholeGateway,
  features: readonly Feature<WholeGateway>[],
): (request: IncomingMessage, response: ServerResponse) => Promise<void> {
  const routes: Record<string, Route> = {}
  for (const [path, methods] of Object.entries(ownRoutes(gateway, features))) routes[path] = { methods, feature: null }
  for (const feature of features) for (const [path, methods] of Object.entries(feature.routes ?? {})) routes[path] = { methods, feature }
  const { meters } = gateway
  return (request, response) => {
    // Counted and traced under its route's pattern, once its answer has ended.
    const label = routeLabel(routes, features, request.url)
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
    let shape: ErrorShape | undefined
    try {
      const url = urlOf(request)
      const path = url.pathname
      const route = routes[path]
      if (route === undefined) {
        const view = gatewayFor(gateway, callerOf(gateway, path, request))
        for (const feature of features) if (await feature.idRoutes?.(view, request, response, url)) return
        throw new HttpError(404, `no route for ${request.method} ${path}`, { code: 'not-found', type: 'not_found' })
      }
      shape = route.feature?.errorShape
      route.feature?.begin?.(response)
      const handle = request.method === undefined ? undefined : route.methods[request.method]
      if (handle === undefined) throw methodNotAllowed(response, path, request.method, Object.keys(route.methods).join(', '))
      await handle(gatewayFor(gateway, callerOf(gateway, path, request)), request, response)
    } catch (error) {
      // A client that left before its first step (the engine request was aborted with it) is an outcome.
      if (response.destroyed && !response.writableFinished) {
        gateway.outcomes.clientClosed++
        return
      }
      if (sendError(response, error, shape) >= 500) gateway.onError(error)
    }
  }
}
