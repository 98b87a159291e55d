/**
 * What every HTTP engine client does, written once: its options checked at construction, each request checked
 * (`checkGenerateRequest`, with the engine's sampling fields), the server's request body POSTed and its
 * answer read as events (`postEvents`, http.ts: timeouts, abort, backpressure), each event parsed and an
 * error event turned into an `EngineError` (steps.ts), the events read into steps, and the request's token
 * limit held (`withinLimit`). A client (vllm.ts, sglang.ts, llamacpp.ts, trtllm.ts) extends `HttpEngine` with
 * only what is particular to its server: its options beyond `HttpOptions`, its endpoint's path, its request
 * body, and a `StepReader` that reads one event of its stream into steps (stop-id repair, usage, log
 * probabilities and finish reasons are the server's own, so they are read there).
 */
import { isRecord } from '../base/records'
import { EngineError } from './errors'
import { type HttpOptions, postEvents } from './http'
import { checkEngineOptions, HTTP_ENGINE_OPTIONS } from './options'
import { checkGenerateRequest, GENERATION_STOP_TOKENS } from './request'
import type { SseEvent } from './sse'
import { openAIStyleMessage, parseEvent, streamError, withinLimit } from './steps'
import type { Engine, EngineStep, GenerateRequest } from './types'

/** The options every HTTP client takes: `HttpOptions` and the server's base URL. */
export interface HttpEngineOptions extends HttpOptions {
  url: string
}

/** What a client says of its server once, at construction. */
export interface HttpEngineShape<O extends HttpEngineOptions> {
  /** The class's name, for option and request errors (`SglangEngine: option …`). */
  where: string
  /** The options it takes beyond `HTTP_ENGINE_OPTIONS` (any other is refused, named with the closest one). */
  options?: readonly string[]
  /** Checks of those options, after the shared ones: a TypeError naming the option. */
  check?: (options: O) => void
  /** The endpoint, relative to the base URL (a path prefix in `url` is kept). */
  path: (options: O) => string
  /**
   * An event that is a failure by its framing alone, before its data is read as JSON (llama.cpp's older
   * `error:` lines); null for any other event.
   */
  eventError?: (event: SseEvent) => EngineError | null
}

/**
 * Reads one generation's stream, event by event. The skeleton hands it each event's JSON object once the
 * `[DONE]` sentinel, non-JSON data, non-objects and error events are ruled out.
 */
export interface StepReader {
  /**
   * The steps this event makes (none, one or several); returns true when the generation is over with them,
   * which ends the read and closes the connection (the engine frees the sequence).
   */
  read(json: Record<string, unknown>): Generator<EngineStep, boolean>
  /**
   * The stream ended before `read` said the generation was over (`sawDone`: with `data: [DONE]`, not cut off):
   * the last step, or an `EngineError` when the stream cannot end there.
   */
  end(sawDone: boolean): EngineStep
}

export abstract class HttpEngine<O extends HttpEngineOptions> implements Engine {
  abstract readonly name: string
  protected readonly options: O
  private readonly endpoint: URL
  private readonly shape: HttpEngineShape<O>

  protected constructor(options: O, shape: HttpEngineShape<O>) {
    const url = checkEngineOptions(options, shape.where, [...HTTP_ENGINE_OPTIONS, ...(shape.options ?? [])])
    shape.check?.(options)
    this.options = { ...options }
    this.shape = shape
    this.endpoint = new URL(shape.path(options), url)
  }

  generate(request: GenerateRequest): AsyncIterable<EngineStep> {
    checkGenerateRequest(request, `${this.shape.where}.generate`, this)
    return withinLimit(this.run(request), request.maxTokens)
  }

  /** The request body, in the server's fields. `stops`: the request's stop ids, or the default ones. */
  protected abstract body(request: GenerateRequest, stops: readonly number[]): Record<string, unknown>

  /** A reader for one generation's stream. */
  protected abstract reader(request: GenerateRequest, stops: readonly number[]): StepReader

  private async *run(request: GenerateRequest): AsyncGenerator<EngineStep> {
    const engine = this.name
    const stops = request.stopTokens ?? GENERATION_STOP_TOKENS
    const reader = this.reader(request, stops)
    let sawDone = false
    for await (const event of postEvents(engine, this.endpoint, this.body(request, stops), this.options, request, openAIStyleMessage)) {
      if (event.data === '[DONE]') {
        sawDone = true
        break
      }
      const framed = this.shape.eventError?.(event) ?? null
      if (framed !== null) throw framed
      const json = parseEvent(engine, event)
      const failure = streamError(engine, json)
      if (failure !== null) throw failure
      if (!isRecord(json)) throw new EngineError('engine-protocol-error', `${engine} sent an event that is not an object`, { engine })
      // Leaving the loop here ends postEvents, which closes the connection.
      if (yield* reader.read(json)) return
    }
    yield reader.end(sawDone)
  }
}
