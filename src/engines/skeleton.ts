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
import { aborted, type HttpOptions, postEvents } from './http'
import { loadUndici } from './keep-alive'
import { checkEngineOptions, HTTP_ENGINE_OPTIONS } from './options'
import { engineReads } from './read-budget'
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
  read(json: Record<string, unknown>, data: string): Generator<EngineStep, boolean>
  /**
   * Reads an event from its text (`data`) alone when it is the like of one `read` has read (only ids: see
   * known-events.ts): appends its ids to `into` (a step of them) and returns true; false, `into` left as it was,
   * to have it parsed and `read`.
   */
  readKnown?(data: string, into: number[]): boolean
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
    loadUndici()
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
    const { signal } = request
    let sawDone = false
    let first = true
    for await (const events of postEvents(engine, this.endpoint, this.body(request, stops), this.options, request, openAIStyleMessage)) {
      // A read waits for a later turn when this one has had its share (read-budget.ts, shared by every client of the
      // process); the stream is not read meanwhile.
      const turn = engineReads.take(events.length, first)
      first = false
      if (turn !== null) await turn
      // The steps of one read's events, yielded joined (`joinSteps`) once they are all read.
      const steps = new ReadSteps()
      let over = false
      // An event that fails the stream fails it after the ids before it are delivered, as one by one.
      let failed: { error: unknown } | null = null
      try {
        for (const event of events) {
          if (event.data === '[DONE]') {
            sawDone = true
            break
          }
          over = this.readEvent(reader, event, steps)
          if (over) break
        }
      } catch (error) {
        failed = { error }
      }
      for (const joined of steps.joined()) {
        // Nothing more once aborted, not even what one read already held.
        if (signal?.aborted) throw aborted(engine)
        yield joined
      }
      if (failed !== null) throw failed.error
      // Leaving the loop here ends postEvents, which closes the connection.
      if (over) return
      if (sawDone) break
    }
    yield reader.end(sawDone)
  }

  /** Reads one event's steps into `steps`; true when the generation is over with them (`StepReader.read`). */
  private readEvent(reader: StepReader, event: SseEvent, steps: ReadSteps): boolean {
    const engine = this.name
    const framed = this.shape.eventError?.(event) ?? null
    if (framed !== null) throw framed
    if (reader.readKnown?.(event.data, steps.ids) === true) return false
    const json = parseEvent(engine, event)
    const failure = streamError(engine, json)
    if (failure !== null) throw failure
    if (!isRecord(json)) throw new EngineError('engine-protocol-error', `${engine} sent an event that is not an object`, { engine })
    const reading = reader.read(json, event.data)
    for (let next = reading.next(); ; next = reading.next()) {
      if (next.done === true) return next.value
      steps.push(next.value)
    }
  }
}

/** The steps of one read's events, and the ids of its known events (`readKnown`) as one step each run of them. */
class ReadSteps {
  private readonly steps: EngineStep[] = []
  /** The ids of the known events since the last other step, which `readKnown` appends to. */
  ids: number[] = []

  push(step: EngineStep): void {
    this.flushIds()
    this.steps.push(step)
  }

  /** Every step, in order, joined (`joinSteps`). */
  joined(): EngineStep[] {
    this.flushIds()
    return joinSteps(this.steps)
  }

  private flushIds(): void {
    if (this.ids.length === 0) return
    this.steps.push({ tokens: Uint32Array.from(this.ids) })
    this.ids = []
  }
}

/**
 * `steps` (in order) with each run of steps that only carry ids joined into one: the ids the engine had sent by
 * the time the gateway read them are one step, parsed in one push and written to the client in one frame (at
 * one write per step, a step per id was most of a gateway's CPU under load: docs/PERFORMANCE.md). A step with
 * a finish reason, usage or diagnostics is never joined, so what they say stays attached to the same ids; log
 * probabilities are joined with their ids (one entry per id either way).
 */
export function joinSteps(steps: readonly EngineStep[]): EngineStep[] {
  if (steps.length < 2) return steps as EngineStep[]
  const out: EngineStep[] = []
  let start = 0
  for (let i = 1; i <= steps.length; i++) {
    if (i < steps.length && joinable(steps[start]!, steps[i]!)) continue
    out.push(i - start === 1 ? steps[start]! : joined(steps, start, i))
    start = i
  }
  return out
}

/** Only ids (and their log probabilities, in both or in neither). */
function joinable(first: EngineStep, next: EngineStep): boolean {
  return plain(first) && plain(next) && (first.logprobs === undefined) === (next.logprobs === undefined)
}

function plain(step: EngineStep): boolean {
  return step.finishReason === undefined && step.usage === undefined && step.diagnostics === undefined
}

function joined(steps: readonly EngineStep[], start: number, end: number): EngineStep {
  let length = 0
  for (let i = start; i < end; i++) length += steps[i]!.tokens.length
  const tokens = new Uint32Array(length)
  let at = 0
  for (let i = start; i < end; i++) {
    tokens.set(steps[i]!.tokens, at)
    at += steps[i]!.tokens.length
  }
  if (steps[start]!.logprobs === undefined) return { tokens }
  const logprobs: EngineStep['logprobs'] = []
  // A loop, not push(...spread): a spread call takes every entry as an argument.
  for (let i = start; i < end; i++) for (const entry of steps[i]!.logprobs!) logprobs.push(entry)
  return { tokens, logprobs }
}
