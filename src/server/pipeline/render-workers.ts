/**
 * Rendering off the event loop. Byte-pair encoding a large request costs time that grows with its size (and
 * faster than linearly within one long word with gpt-tokenizer), so one large request rendered on the event
 * loop would delay every other stream and `/health` by that much. `RenderWorkers` renders requests in a pool
 * of worker threads instead; the event loop only clones the body there and receives the tokens back.
 *
 *   const workers = new RenderWorkers({ renderOptions: { implementation } })
 *   const prompt = await workers.render('chat', body)     // as renderChatCompletionRequest(body, renderOptions)
 *   const { parameters, prompt } = await workers.prepare('chat', await readJsonBytes(request))  // JSON.parse there too
 *
 * The results are those of the synchronous renderers with the same options (each worker has its own render
 * cache); request errors come back as the same `HarmonyRequestError`. A full queue answers 503, so a burst of
 * large requests waits in a bounded line instead of piling up in memory.
 */
import { availableParallelism } from 'node:os'
import { join } from 'node:path'
import { Worker } from 'node:worker_threads'

import { HarmonyError, HarmonyRequestError } from '../../base/errors'
import { checkOptions, is, type OptionSpec, optionError } from '../../base/options'
import { HttpError } from '../../http/errors'
import { chatGenerationParameters, type GenerationParameterOptions, type GenerationParameters } from '../../http/validate'
import { checkRequestBody, checkRequestShape, type RenderedPrompt, type RenderRequestOptions } from '../../render/index'
import type { ResponseRequestEcho } from '../../wire/responses'
import type { RenderAnswer, RenderJob, RenderWorkerData } from './render-worker'

export interface RenderWorkersOptions {
  /** Worker threads. Default: the cores the machine suggests, less one for the event loop (at least 1). */
  size?: number
  /** Options of every render (implementation, currentDate, limits…); a `cache` cannot cross to a worker. */
  renderOptions?: Omit<RenderRequestOptions, 'cache'>
  /** Requests waiting for a worker before `render` answers 503. Default 256. */
  maxQueue?: number
  /** Options of the generation parameters `prepare` reads (`maxModelLength`), as `chatGenerationParameters` takes them. */
  parameterOptions?: GenerationParameterOptions
}

/** What `prepare` gives: the request's generation parameters and its prompt (and for Responses, what its object echoes). */
export interface PreparedRequest {
  parameters: GenerationParameters
  prompt: RenderedPrompt
  /** Responses: the request's fields a response object echoes (`responsesRequestEcho`), for `ResponsesStream`'s `request`. */
  echo?: ResponseRequestEcho
  /** With `keepInput`: the body's `input` as it came (to store); absent when the body says `store: false`. */
  input?: unknown
}

/**
 * What `prepare` gives for a Responses body that continues a stored response or a conversation, holds a compaction item or refers
 * to kept items (`item_reference`), with `keepInput` (`isContinuation`): the parsed body, not rendered, for the gateway to render after the stored items
 * (`continuedBody`) or with the compaction opened (`Compactor.expand`).
 */
export interface ContinuationRequest {
  parameters: GenerationParameters
  /** Responses only. */
  echo?: ResponseRequestEcho
  continuation: Record<string, unknown>
}

const PROBE = { model: 'probe', messages: [{ role: 'user', content: 'x' }] }

const OPTIONS: OptionSpec = { size: is.integer(1, 256), renderOptions: is.object, maxQueue: is.integer(0), parameterOptions: is.object }

interface Pending {
  job: RenderJob
  resolve: (answer: PreparedRequest | ContinuationRequest | RenderedPrompt) => void
  reject: (error: unknown) => void
}

export class RenderWorkers {
  readonly size: number
  private readonly maxQueue: number
  private readonly renderOptions: Omit<RenderRequestOptions, 'cache'>
  private readonly workerData: RenderWorkerData
  private readonly idle: Worker[] = []
  private readonly busy = new Map<Worker, Pending>()
  private readonly queue: Pending[] = []
  private nextId = 0
  private closed = false

  constructor(options: RenderWorkersOptions = {}) {
    const checked = checkOptions<RenderWorkersOptions>(options, OPTIONS, 'RenderWorkers')
    if (checked.renderOptions !== undefined && 'cache' in checked.renderOptions) {
      throw optionError(TypeError, "RenderWorkers: option 'renderOptions' cannot hold a cache: each worker keeps its own")
    }
    // The renderer's and the parameters' options are checked once, here: a bad one fails now rather than in
    // every worker.
    checkRequestBody('chat', PROBE, { ...checked.renderOptions, cache: null })
    chatGenerationParameters(PROBE, checked.parameterOptions)
    this.renderOptions = checked.renderOptions ?? {}
    this.size = checked.size ?? Math.max(1, availableParallelism() - 1)
    this.maxQueue = checked.maxQueue ?? 256
    this.workerData = { renderOptions: this.renderOptions, parameterOptions: checked.parameterOptions ?? {} }
    for (let i = 0; i < this.size; i++) this.idle.push(this.spawn())
  }

  /** Jobs waiting for a worker (a gauge for metrics). */
  get queued(): number {
    return this.queue.length
  }

  /** Renders a Chat Completions (`'chat'`) or Responses request body in a worker. */
  render(kind: 'chat' | 'responses', body: unknown): Promise<RenderedPrompt> {
    if (this.closed) return Promise.reject(new HarmonyError('render-workers-closed', 'RenderWorkers: closed'))
    if (kind !== 'chat' && kind !== 'responses')
      return Promise.reject(optionError(TypeError, `RenderWorkers.render: kind must be 'chat' or 'responses', not ${String(kind)}`))
    try {
      // Cheap: a body too large or too deep to copy is refused here; its strings are read in the worker.
      checkRequestShape(kind, body, this.renderOptions)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.enqueue({ id: this.nextId++, kind, body }) as Promise<RenderedPrompt>
  }

  /**
   * A request body's JSON bytes (`readJsonBytes`) → its generation parameters (as `chatGenerationParameters` or
   * `responsesGenerationParameters`) and its prompt (as the renderer), all in a worker: parsing, the bounds
   * check and the render, so not even JSON.parse of a large body holds the event loop. Errors are those of
   * the same steps on the event loop (`HttpError` 400 for bad JSON or a bad field, `HarmonyRequestError`).
   * The bytes are handed to the worker (transferred when the array owns its memory): do not use them after.
   */
  prepare(kind: 'chat' | 'responses', bytes: Uint8Array): Promise<PreparedRequest>
  /**
   * `keepInput` (a gateway that keeps Responses): a Responses body's `input` comes back too, and a body with a
   * `previous_response_id`, a `conversation`, a compaction item or an `item_reference` comes back parsed and not rendered
   * (`ContinuationRequest`).
   */
  prepare(kind: 'chat' | 'responses', bytes: Uint8Array, options: { keepInput: boolean }): Promise<PreparedRequest | ContinuationRequest>
  prepare(kind: 'chat' | 'responses', bytes: Uint8Array, options?: { keepInput: boolean }): Promise<PreparedRequest | ContinuationRequest> {
    if (this.closed) return Promise.reject(new HarmonyError('render-workers-closed', 'RenderWorkers: closed'))
    if (kind !== 'chat' && kind !== 'responses')
      return Promise.reject(optionError(TypeError, `RenderWorkers.prepare: kind must be 'chat' or 'responses', not ${String(kind)}`))
    if (!(bytes instanceof Uint8Array)) return Promise.reject(new TypeError('RenderWorkers.prepare: bytes must be a Uint8Array (a Buffer)'))
    if (options !== undefined && typeof options?.keepInput !== 'boolean')
      return Promise.reject(optionError(TypeError, "RenderWorkers.prepare: option 'keepInput' must be a boolean"))
    return this.enqueue({ id: this.nextId++, kind, bytes, ...(options?.keepInput ? { keepInput: true } : {}) }) as Promise<
      PreparedRequest | ContinuationRequest
    >
  }

  private enqueue(job: RenderJob): Promise<PreparedRequest | ContinuationRequest | RenderedPrompt> {
    return new Promise((resolve, reject) => {
      const pending = { job, resolve, reject }
      const worker = this.idle.pop()
      if (worker !== undefined) this.start(worker, pending)
      else if (this.queue.length < this.maxQueue) this.queue.push(pending)
      else reject(new HttpError(503, 'the gateway is rendering too many requests; retry later', { code: 'render-queue-full' }))
    })
  }

  /** Stops the workers; renders not yet answered are rejected. */
  async close(): Promise<void> {
    this.closed = true
    const gone = new HarmonyError('render-workers-closed', 'RenderWorkers: closed')
    for (const pending of this.queue.splice(0)) pending.reject(gone)
    for (const pending of this.busy.values()) pending.reject(gone)
    const workers = [...this.idle, ...this.busy.keys()]
    this.idle.length = 0
    this.busy.clear()
    await Promise.all(workers.map((worker) => worker.terminate()))
  }

  private spawn(): Worker {
    const worker = __filename.endsWith('.ts')
      ? // Run from the sources (the test suites, under tsx): a worker thread does not get the parent's tsx hooks
        // on Node 20 (tsx registers them on the main thread only), so it loads them itself before the worker.
        new Worker(
          `require(require.resolve('tsx/cjs', { paths: [${JSON.stringify(__dirname)}] }))\n` +
            `require(${JSON.stringify(join(__dirname, 'render-worker.ts'))})`,
          { eval: true, workerData: this.workerData },
        )
      : new Worker(join(__dirname, 'render-worker.js'), { workerData: this.workerData })
    // An idle pool must not keep the process alive.
    worker.unref()
    worker.on('message', (answer: RenderAnswer) => this.answered(worker, answer))
    worker.on('error', (error) => this.failed(worker, error))
    return worker
  }

  private start(worker: Worker, pending: Pending): void {
    this.busy.set(worker, pending)
    // A body's bytes are handed over (transferred) when they own their memory, else copied once.
    const { bytes } = pending.job
    const own = bytes !== undefined && bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
    worker.postMessage(pending.job, own ? [bytes.buffer as ArrayBuffer] : [])
  }

  private answered(worker: Worker, answer: RenderAnswer): void {
    const pending = this.busy.get(worker)
    this.busy.delete(worker)
    if (pending !== undefined) {
      if ('tokens' in answer) {
        const prompt: RenderedPrompt = { tokens: answer.tokens, toolNames: answer.toolNames, promptTokens: answer.tokens.length }
        if (answer.responseFormat !== undefined) prompt.responseFormat = answer.responseFormat
        if (answer.argumentSchemas !== undefined) prompt.argumentSchemas = answer.argumentSchemas
        if (answer.functions !== undefined) prompt.functions = answer.functions
        if (answer.notApplied !== undefined) prompt.notApplied = answer.notApplied
        if (answer.requiredCall !== undefined) prompt.requiredCall = answer.requiredCall
        if (answer.parameters === undefined) pending.resolve(prompt)
        else
          pending.resolve({
            parameters: answer.parameters,
            prompt,
            ...(answer.echo === undefined ? {} : { echo: answer.echo }),
            ...('input' in answer ? { input: answer.input } : {}),
          })
      } else if ('continuation' in answer) {
        pending.resolve({
          parameters: answer.parameters,
          continuation: answer.continuation,
          ...(answer.echo === undefined ? {} : { echo: answer.echo }),
        })
      } else if ('requestError' in answer) pending.reject(new HarmonyRequestError(answer.requestError.message, answer.requestError.param))
      else if ('httpError' in answer) {
        const { status, message, param, code } = answer.httpError
        pending.reject(new HttpError(status, message, { param, code }))
      } else pending.reject(new HarmonyError('internal-error', `harmony-stream internal error while rendering: ${answer.failure}`))
    }
    this.next(worker)
  }

  /** A worker that died (a crash in it, never bad input) fails its render and is replaced. */
  private failed(worker: Worker, error: Error): void {
    const pending = this.busy.get(worker)
    this.busy.delete(worker)
    pending?.reject(
      new HarmonyError('internal-error', `harmony-stream internal error: a render worker failed: ${error.message}`, { cause: error }),
    )
    if (!this.closed) this.next(this.spawn())
  }

  private next(worker: Worker): void {
    if (this.closed) return
    const pending = this.queue.shift()
    if (pending === undefined) this.idle.push(worker)
    else this.start(worker, pending)
  }
}
