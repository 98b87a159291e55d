/**
 * The worker thread of `RenderWorkers` (render-workers.ts): renders the requests it is sent with the options
 * it was started with (checked by the pool), and answers with the prompt's tokens (transferred, not copied) or the error to rethrow.
 */
import { parentPort, workerData } from 'node:worker_threads'

import { HarmonyRequestError } from '../base/errors'
import { type RenderRequestOptions, renderCheckedRequest } from '../render/index'

export interface RenderJob {
  id: number
  kind: 'chat' | 'responses'
  body: unknown
}

export type RenderAnswer =
  | { id: number; tokens: Uint32Array; toolNames: string[] }
  | { id: number; requestError: { message: string; param: string | null } }
  | { id: number; failure: string }

const options = workerData as RenderRequestOptions
const port = parentPort
if (port === null) throw new Error('render-worker.ts runs as a worker thread of RenderWorkers')

port.on('message', (job: RenderJob) => {
  let answer: RenderAnswer
  try {
    // The event loop checked the body's bounds and these options (RenderWorkers.render): not walked again here.
    const { tokens, toolNames } = renderCheckedRequest(job.kind, job.body, options)
    answer = { id: job.id, tokens, toolNames }
  } catch (error) {
    answer =
      error instanceof HarmonyRequestError
        ? { id: job.id, requestError: { message: error.message, param: error.param } }
        : { id: job.id, failure: error instanceof Error ? error.message : String(error) }
  }
  port.postMessage(answer, 'tokens' in answer ? [answer.tokens.buffer as ArrayBuffer] : [])
})
