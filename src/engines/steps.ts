/** What the engine clients share after the HTTP layer: JSON events, stop-id repair, and finish reasons. */
import { isRecord } from '../base/records'
import { EngineError } from './errors'
import { isTokenId } from './request'
import type { SseEvent } from './sse'
import type { EngineDiagnostic, EngineFinishReason, EngineStep, EngineUsage, GenerateRequest, TokenLogprob } from './types'

export function parseEvent(engine: string, event: SseEvent): unknown {
  try {
    return JSON.parse(event.data)
  } catch (error) {
    throw new EngineError('engine-protocol-error', `${engine} sent an event that is not JSON: ${event.data.slice(0, 200)}`, {
      engine,
      cause: error,
    })
  }
}

/** Token ids from an event field, checked: an engine that sends anything else is broken, not trusted. */
export function tokenIds(engine: string, value: unknown, field: string): number[] {
  if (value === undefined || value === null) return []
  if (!Array.isArray(value) || !value.every(isTokenId)) {
    throw new EngineError('engine-protocol-error', `${engine} sent ${field} that are not token ids`, { engine })
  }
  return value as number[]
}

/**
 * The stop-id rule of vLLM and SGLang, which name the stop token that ended generation in their stop reason
 * (vLLM `stop_reason`, SGLang `finish_reason.matched`): when that is one of the request's stop ids and the ids
 * (these, or the last seen before them when these are empty) do not already end with it, it is appended, so
 * the parser sees its terminator. Never twice: an engine that keeps it in the ids is left as it is.
 */
export function withStopToken(tokens: number[], lastSeen: number | undefined, matched: unknown, stops: readonly number[]): number[] {
  if (typeof matched !== 'number' || !stops.includes(matched)) return tokens
  const last = tokens.length > 0 ? tokens[tokens.length - 1] : lastSeen
  return last === matched ? tokens : [...tokens, matched]
}

/**
 * The request's sampling settings under the names the engines share (`temperature`, `top_p`,
 * `presence_penalty`, `frequency_penalty`) and those they do not: `seedField` (vLLM and llama.cpp `seed`,
 * SGLang `sampling_seed`) and the shape of `logit_bias` (`'object'`: `{"<id>": bias}` as OpenAI's; `'pairs'`:
 * llama.cpp's `[[id, bias], …]`). Unset ones are left out, so the engine's defaults apply.
 */
export function samplingFields(
  request: GenerateRequest,
  seedField: 'seed' | 'sampling_seed',
  logitBias: 'object' | 'pairs' = 'object',
): Record<string, unknown> {
  const fields: Record<string, unknown> = {}
  if (request.temperature !== undefined) fields.temperature = request.temperature
  if (request.topP !== undefined) fields.top_p = request.topP
  if (request.seed !== undefined) fields[seedField] = request.seed
  if (request.presencePenalty !== undefined) fields.presence_penalty = request.presencePenalty
  if (request.frequencyPenalty !== undefined) fields.frequency_penalty = request.frequencyPenalty
  if (request.logitBias !== undefined) {
    const entries = Object.entries(request.logitBias)
    fields.logit_bias = logitBias === 'pairs' ? entries.map(([id, bias]) => [Number(id), bias]) : Object.fromEntries(entries)
  }
  return fields
}

export function step(
  tokens: number[],
  finishReason?: EngineFinishReason,
  usage?: EngineUsage,
  diagnostics?: EngineDiagnostic[],
  logprobs?: (TokenLogprob | null)[],
): EngineStep {
  const out: EngineStep = { tokens: Uint32Array.from(tokens) }
  if (logprobs !== undefined) out.logprobs = logprobs
  if (finishReason !== undefined) out.finishReason = finishReason
  if (usage !== undefined) out.usage = usage
  if (diagnostics !== undefined && diagnostics.length > 0) out.diagnostics = diagnostics
  return out
}

/**
 * The engine's message from its error body: vLLM `{error: {message, type, param, code}}` (older versions
 * `{object: 'error', message}`), SGLang `{error: {message}}`, llama.cpp `{error: {code, message, type}}`,
 * FastAPI's `{detail: '…'}`; null for any other shape (the caller keeps the raw text then).
 */
export function openAIStyleMessage(json: unknown): string | null {
  if (!isRecord(json)) return null
  const error = json.error
  if (typeof error === 'string') return error
  if (isRecord(error) && typeof error.message === 'string') return error.message
  if (typeof json.message === 'string') return json.message
  if (typeof json.detail === 'string') return json.detail
  return null
}

/** The stream reported an error in an event (after a 200): what failed, as an EngineError. */
export function streamError(engine: string, json: unknown): EngineError | null {
  if (!isRecord(json)) return null
  if (json.error === undefined && json.object !== 'error') return null
  const message = openAIStyleMessage(json) ?? 'unknown error'
  return new EngineError('engine-stream-error', `${engine} failed mid-stream: ${message}`, { engine, engineMessage: message })
}

/**
 * The request's token limit, enforced here whatever the engine sends: an engine that ignores `max_tokens` (a
 * bug, or a server that caps it differently) gets its stream cut at the limit, with finish reason `length`, and
 * its request closed (returning from the engine's iterator ends the HTTP request, so the engine stops). Without
 * `maxTokens` the engine's own limit applies.
 */
export async function* withinLimit(steps: AsyncIterable<EngineStep>, maxTokens: number | undefined): AsyncGenerator<EngineStep> {
  if (maxTokens === undefined) {
    yield* steps
    return
  }
  let left = maxTokens
  for await (const engineStep of steps) {
    // At the limit exactly, the next step is still read: an empty one carries the engine's own finish reason.
    if (engineStep.tokens.length <= left) {
      left -= engineStep.tokens.length
      yield engineStep
      if (engineStep.finishReason !== undefined) return
      continue
    }
    // Ids past the limit: they are dropped, and the stream ends here.
    const cut: EngineStep = { tokens: engineStep.tokens.subarray(0, left), finishReason: 'length' }
    if (engineStep.usage !== undefined) cut.usage = { ...engineStep.usage, completionTokens: maxTokens }
    if (engineStep.diagnostics !== undefined) cut.diagnostics = engineStep.diagnostics
    yield cut
    return
  }
}

/**
 * A whole generation as one step, for a non-streamed answer: every id in order, the last finish reason, the
 * engine's usage and every diagnostic (`chatCompletion` and `responseObject` take it as it is). The engine's
 * own limits bound its length, and a runaway engine is cut at the request's `maxTokens` (`withinLimit`).
 */
export async function collectSteps(steps: AsyncIterable<EngineStep>): Promise<EngineStep> {
  const tokens: number[] = []
  const whole: EngineStep = { tokens: new Uint32Array(0) }
  /** One entry per id, when any step had log probabilities (null for the ids of steps without). */
  let logprobs: (TokenLogprob | null)[] | null = null
  for await (const engineStep of steps) {
    if (engineStep.logprobs !== undefined && logprobs === null) logprobs = tokens.map(() => null)
    if (logprobs !== null) for (let i = 0; i < engineStep.tokens.length; i++) logprobs.push(engineStep.logprobs?.[i] ?? null)
    for (const id of engineStep.tokens) tokens.push(id)
    if (engineStep.finishReason !== undefined) whole.finishReason = engineStep.finishReason
    if (engineStep.usage !== undefined) whole.usage = engineStep.usage
    if (engineStep.diagnostics !== undefined) (whole.diagnostics ??= []).push(...engineStep.diagnostics)
  }
  whole.tokens = Uint32Array.from(tokens)
  if (logprobs !== null) whole.logprobs = logprobs
  return whole
}
