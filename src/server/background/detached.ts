/**
 * `background: true` (`BackgroundResponses`): kept as `queued`, then answered at once, or streamed with
 * `stream` (a client that leaves comes back with `GET /v1/responses/{id}?stream=true&starting_after=N`); the
 * generation runs detached from the client's connection.
 */
import { ResponsesStream } from '../../wire/responses'
import { EngineTrail } from '../observe/engine-trail'
import { writeBound } from '../pipeline/context'
import type { Feature } from '../pipeline/face'
import { admit, generate } from '../pipeline/generate'
import { methodNotAllowed, sendJson } from '../pipeline/send'
import { responseIdOf, responseNotFound, responseRecord } from '../responses/conversation'
import { keepAnswer, keptRecord } from '../responses/keep'
import type { Detach, ResponsesGateway } from '../responses/responses-gateway'
import { belongsTo } from '../stores/owned-store'
import type { BackgroundResponses } from './runs'
import { pipeStreamLog } from './stream-log'

/** What background responses read of the gateway beyond what Responses does. */
export interface BackgroundGateway extends ResponsesGateway {
  /** The background runs this process holds; null without a store. */
  background: BackgroundResponses | null
}

/** Serves a Responses request with `background: true` (the gateway's `detach`). */
export const serveBackground: Detach = async (gateway, request, response, prepared, options, tools) => {
  const { background, store } = gateway as BackgroundGateway
  // The responses face asks for a store before it detaches; a gateway detaches only where it has runs.
  if (background === null || store === null) throw new Error('a background response needs a store and background runs')
  // The key's limits are asked now, not when the run starts: a request over them is refused, not queued to fail.
  const grant = await admit(gateway)
  let release: () => void
  try {
    release = background.reserve()
  } catch (error) {
    grant.end(0)
    throw error
  }
  const adapter = new ResponsesStream({ ...options, background: true })
  const queued = adapter.response('queued')
  // Kept before it is answered: a store that cannot keep it fails the request (a 503 for a StoreError).
  try {
    await store.put(keptRecord(queued, prepared, { prompt: prepared.prompt.tokens, output: [] }))
  } catch (error) {
    release()
    grant.end(0)
    throw error
  }
  const generated: number[] = []
  // Which engine generated what, once the run has started: the engine its diagnostics are about.
  let served: EngineTrail | null = null
  const log = background.start(
    {
      adapter,
      stream: prepared.parameters.stream,
      steps: (signal) => {
        const generation = generate(gateway, request, prepared, signal, generated, grant, tools)
        served = generation.served
        return generation.steps
      },
      keep: (object) => keepAnswer(gateway, object, prepared, generated),
      // A run that never generated has no diagnostics of its output; any it has are the gateway engine's.
      withEngines: (diagnostics) => (served ?? new EngineTrail(gateway.engine.name)).withEngines(diagnostics),
    },
    release,
  )
  if (log === null) sendJson(response, 200, queued)
  else await pipeStreamLog(response, log, -1, writeBound(gateway))
}

/**
 * `id`, when the caller may act on it (always, in a gateway without keys); else the 404 of a response that is not
 * there: another caller's response is not shown to exist.
 */
async function owned(gateway: BackgroundGateway, id: string): Promise<string> {
  if (gateway.caller === null || gateway.store === null) return id
  if ((await responseRecord(gateway.store, id)) === null) throw responseNotFound(id)
  return id
}

/**
 * The routes of background responses, whose path holds a response id: `POST /v1/responses/{id}/cancel`, `GET
 * /v1/responses/{id}?stream=true` (a run's events, resumed), a `DELETE` that stops a run first, and a `GET` that
 * ends a run whose process is gone. What they do not take goes on to the routes of kept responses.
 */
export const backgroundFeature: Feature<BackgroundGateway> = {
  async idRoutes(gateway, request, response, url) {
    const { background } = gateway
    if (background === null) return false
    const path = url.pathname
    const cancelled = /^\/v1\/responses\/([^/]+)\/cancel$/.exec(path)
    if (cancelled !== null) {
      if (request.method !== 'POST') throw methodNotAllowed(response, path, request.method, 'POST')
      sendJson(response, 200, await background.cancel(await owned(gateway, responseIdOf(cancelled[1]!))))
      return true
    }
    const byId = /^\/v1\/responses\/([^/]+)$/.exec(path)
    if (byId === null) return false
    if (request.method === 'GET' && url.searchParams.get('stream') === 'true') {
      const { log, after } = await background.stream(await owned(gateway, responseIdOf(byId[1]!)), url.searchParams.get('starting_after'))
      await pipeStreamLog(response, log, after, writeBound(gateway))
      return true
    }
    // A DELETE stops a background run first, so that how it ends does not bring the response back.
    if (request.method === 'DELETE') {
      const id = await owned(gateway, responseIdOf(byId[1]!))
      if (!(await background.delete(id))) return false
      sendJson(response, 200, { id, object: 'response', deleted: true })
      return true
    }
    // A poll of a run whose process is gone ends it (kept as failed), rather than answering in_progress forever.
    if (request.method === 'GET') {
      const id = responseIdOf(byId[1]!)
      const record = await background.reapOrphan(id)
      if (record === null || !belongsTo(record, gateway.caller)) throw responseNotFound(id)
      sendJson(response, 200, record.response)
      return true
    }
    return false
  },
}
