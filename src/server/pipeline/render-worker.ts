/**
 * The worker thread of `RenderWorkers` (render-workers.ts): renders the requests it is sent with the options
 * it was started with (checked by the pool), and answers with the prompt's tokens (transferred, not copied) or
 * the error to rethrow. A job is a parsed body (`render`, its shape checked on the event loop already) or
 * a body's JSON bytes (`prepare`), which are parsed, checked and turned into generation parameters here.
 */
import { parentPort, workerData } from 'node:worker_threads'

import { HarmonyRequestError } from '../../base/errors'
import { parseJsonBody } from '../../http/body'
import { HttpError } from '../../http/errors'
import {
  chatGenerationParameters,
  type GenerationParameterOptions,
  type GenerationParameters,
  responsesGenerationParameters,
} from '../../http/validate'
import {
  type ArgumentSchema,
  checkRequestBody,
  type NotApplied,
  type RenderedPrompt,
  type RenderRequestOptions,
  type ResponseFormat,
  renderCheckedRequest,
} from '../../render/index'
import { type ResponseRequestEcho, responsesRequestEcho } from '../../wire/responses'
import { isContinuation } from './continues'

export interface RenderJob {
  id: number
  kind: 'chat' | 'responses'
  /** `render`: the parsed body, within its bounds. */
  body?: unknown
  /** `prepare`: the body's JSON bytes. */
  bytes?: Uint8Array
  /**
   * `prepare` of a Responses body for a gateway that keeps responses: its `input` comes back too (to be
   * stored; not when the body says `store: false`), and a body that continues what the gateway holds
   * (`isContinuation`: a `previous_response_id`, a `conversation`, a compaction item, an `item_reference`; a body ending with
   * tool results, for a gateway with a call id cache) comes back whole, not rendered: the gateway renders it with
   * what it continues, which only it can find.
   */
  keepInput?: boolean
}

export type RenderAnswer =
  | {
      id: number
      tokens: Uint32Array
      toolNames: string[]
      responseFormat?: ResponseFormat
      argumentSchemas?: ArgumentSchema[]
      functions?: RenderedPrompt['functions']
      notApplied?: NotApplied[]
      requiredCall?: RenderedPrompt['requiredCall']
      parameters?: GenerationParameters
      echo?: ResponseRequestEcho
      /** `keepInput`: the body's `input` as it came. */
      input?: unknown
    }
  | { id: number; continuation: Record<string, unknown>; parameters: GenerationParameters; echo?: ResponseRequestEcho }
  | { id: number; requestError: { message: string; param: string | null } }
  | { id: number; httpError: { status: number; message: string; param: string | null; code: string } }
  | { id: number; failure: string }

export interface RenderWorkerData {
  renderOptions: RenderRequestOptions
  parameterOptions: GenerationParameterOptions
}

const { renderOptions, parameterOptions } = workerData as RenderWorkerData
const port = parentPort
if (port === null) throw new Error('render-worker.ts runs as a worker thread of RenderWorkers')

type Prepared =
  | { prompt: RenderedPrompt; parameters?: GenerationParameters; echo?: ResponseRequestEcho; input?: unknown }
  | { continuation: Record<string, unknown>; parameters: GenerationParameters; echo?: ResponseRequestEcho }

/** The job's prompt, and for `prepare` the body's generation parameters (and what a Responses object echoes of it). */
function run(job: RenderJob): Prepared {
  // `render`: the event loop checked the body's shape (`checkRequestShape`); its strings are read here.
  if (job.bytes === undefined)
    return { prompt: renderCheckedRequest(job.kind, job.body, checkRequestBody(job.kind, job.body, renderOptions)) }
  const body = parseJsonBody(job.bytes)
  const parameters = (job.kind === 'chat' ? chatGenerationParameters : responsesGenerationParameters)(body, parameterOptions)
  // A body that continues what the gateway holds (a stored response, a compaction item, tool calls it returned)
  // goes back whole: the gateway renders it after what it continues.
  if (job.keepInput === true && isContinuation(job.kind, body))
    return job.kind === 'responses'
      ? { continuation: body, parameters, echo: responsesRequestEcho(body) }
      : { continuation: body, parameters }
  checkRequestBody(job.kind, body, renderOptions)
  const prompt = renderCheckedRequest(job.kind, body, renderOptions)
  // The body stays here: what the response object says of its request goes back instead.
  if (job.kind === 'chat') return { prompt, parameters }
  // The input is sent back only for a response the gateway will keep (`store` not false).
  const input = job.keepInput === true && body.store !== false ? { input: body.input } : {}
  return { prompt, parameters, echo: responsesRequestEcho(body), ...input }
}

port.on('message', (job: RenderJob) => {
  let answer: RenderAnswer
  try {
    const prepared = run(job)
    if ('continuation' in prepared) {
      port.postMessage({ id: job.id, ...prepared } satisfies RenderAnswer)
      return
    }
    const { prompt, parameters, echo, input } = prepared
    answer = {
      id: job.id,
      tokens: prompt.tokens,
      toolNames: prompt.toolNames,
      ...(prompt.responseFormat === undefined ? {} : { responseFormat: prompt.responseFormat }),
      ...(prompt.argumentSchemas === undefined ? {} : { argumentSchemas: prompt.argumentSchemas }),
      ...(prompt.functions === undefined ? {} : { functions: prompt.functions }),
      ...(prompt.notApplied === undefined ? {} : { notApplied: prompt.notApplied }),
      ...(prompt.requiredCall === undefined ? {} : { requiredCall: prompt.requiredCall }),
      ...(parameters === undefined ? {} : { parameters }),
      ...(echo === undefined ? {} : { echo }),
      ...(input === undefined ? {} : { input }),
    }
  } catch (error) {
    if (error instanceof HarmonyRequestError) answer = { id: job.id, requestError: { message: error.message, param: error.param } }
    else if (error instanceof HttpError)
      answer = { id: job.id, httpError: { status: error.status, message: error.message, param: error.param, code: error.code } }
    else answer = { id: job.id, failure: error instanceof Error ? error.message : String(error) }
  }
  port.postMessage(answer, 'tokens' in answer ? [answer.tokens.buffer as ArrayBuffer] : [])
})
