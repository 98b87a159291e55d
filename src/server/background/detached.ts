/**
 * `background: true` (`BackgroundResponses`): kept as `queued`, then answered at once, or streamed with
 * `stream` (a client that leaves comes back with `GET /v1/responses/{id}?stream=true&starting_after=N`); the
 * generation runs detached from the client's connection.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'

import { HttpError } from '../../http/errors'
import { type ResponsesAdapterOptions, ResponsesStream } from '../../wire/responses'
import type { Gateway } from '../pipeline/context'
import { admit, generate } from '../pipeline/generate'
import type { Item, Prepared } from '../pipeline/prepared'
import { sendJson } from '../pipeline/send'
import { storedResponse } from '../responses/conversation'
import { keepResponse, keptInput } from '../responses/keep'
import type { ResponseTools } from '../tools/response-tools'
import { pipeStreamLog } from './stream-log'

export async function serveBackground(
  gateway: Gateway,
  request: IncomingMessage,
  response: ServerResponse,
  prepared: Prepared,
  options: ResponsesAdapterOptions,
  tools: ResponseTools | null,
): Promise<void> {
  const { background, store } = gateway
  if (!prepared.storing || background === null || store === null)
    throw new HttpError(400, 'background needs a gateway that keeps responses', { param: 'background', code: 'invalid-parameter' })
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
    const record = queued as unknown as Item & { id: string; created_at: number }
    await store.put(storedResponse(record, keptInput(queued, prepared), { prompt: prepared.prompt.tokens, output: [] }))
  } catch (error) {
    release()
    grant.end(0)
    throw error
  }
  const generated: number[] = []
  const log = background.start(
    {
      adapter,
      stream: prepared.parameters.stream,
      steps: (signal) => generate(gateway, request, prepared, signal, generated, grant, tools),
      keep: (object) => keepResponse(gateway, object, prepared, generated),
    },
    release,
  )
  if (log === null) sendJson(response, 200, queued)
  else await pipeStreamLog(response, log)
}
