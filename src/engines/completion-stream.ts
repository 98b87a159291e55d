/**
 * The streamed answer of an OpenAI-style completions endpoint that returns token ids, as vLLM
 * (`/v1/completions` and `/inference/v1/generate`) and trtllm-serve (`/v1/completions`) send it: one
 * `data: <json>` chunk per engine output with `choices[0].token_ids`, `finish_reason` and `stop_reason` on the
 * last; with `include_usage`, a chunk with `choices: []` and `usage`; an error as an error object; `data: [DONE]`.
 * The clients differ in their request bodies (see vllm.ts and trtllm.ts for the sources followed); their
 * answers are read here, once. Cached prompt tokens: the usage's `prompt_tokens_details.cached_tokens`, when
 * the engine sends it (vLLM only with `--enable-prompt-tokens-details`; see vllm.ts and trtllm.ts).
 */
import { isRecord } from '../base/records'
import { EngineError } from './errors'
import { KnownEventShape } from './known-events'
import { vllmLogprobs } from './logprobs'
import type { StepReader } from './skeleton'
import { step, tokenIds, withStopToken } from './steps'
import type { EngineFinishReason, EngineStep, EngineUsage, TokenLogprob } from './types'

export interface CompletionStreamOptions {
  /** The client's name, for errors. */
  engine: string
  /** The request's stop ids: a `stop_reason` naming one that the ids left out is appended to them. */
  stops: readonly number[]
  /**
   * vLLM's tokens-only endpoint skips an output with no new ids, finish reason included: its stream may end
   * (with `[DONE]`) without one, read as `stop` when the last id is a stop id, else `length`.
   */
  mayEndWithoutFinish?: boolean
  /** The request's `logprobs` (vLLM's chunks then carry them, `return_tokens_as_token_ids` naming the ids). */
  logprobs?: number
}

/** Reads such a stream into engine steps; the finishing step is held until the stream ends, to carry the usage. */
export class CompletionReader implements StepReader {
  private last: number | undefined
  private generated = 0
  private finished: { tokens: number[]; finishReason: EngineFinishReason; logprobs?: (TokenLogprob | null)[] } | null = null
  private usage: EngineUsage | undefined
  /** The last event that carried only ids, to read the next such events without parsing them. */
  private readonly known = new KnownEventShape('token_ids')

  constructor(private readonly options: CompletionStreamOptions) {}

  readKnown(data: string, into: number[]): boolean {
    const count = this.finished === null ? this.known.readInto(data, into) : 0
    if (count === 0) return false
    this.last = into[into.length - 1]
    this.generated += count
    return true
  }

  *read(json: Record<string, unknown>, data: string): Generator<EngineStep, boolean> {
    const { engine, stops } = this.options
    if (isRecord(json.usage)) this.usage = usageOf(json.usage)
    const choice = Array.isArray(json.choices) ? json.choices[0] : undefined
    if (!isRecord(choice)) return false
    if (this.finished !== null) throw new EngineError('engine-protocol-error', `${engine} sent ids after the finish reason`, { engine })
    let tokens = tokenIds(engine, choice.token_ids, 'token_ids')
    const reason = choice.finish_reason
    if (reason === null || reason === undefined) {
      if (tokens.length === 0) return false
      this.last = tokens[tokens.length - 1]
      this.generated += tokens.length
      // Only ids: what `readKnown` does with the like of it. (Usage and log probabilities are read from more.)
      if (json.usage === undefined && this.options.logprobs === undefined) this.known.learn(data, tokens)
      yield step(tokens, undefined, undefined, undefined, this.logprobsOf(choice, tokens))
      return false
    }
    const logprobs = this.logprobsOf(choice, tokens)
    if (reason === 'stop') {
      const sent = tokens.length
      tokens = withStopToken(tokens, this.last, choice.stop_reason, stops)
      // An appended stop id came with no log probability.
      if (logprobs !== undefined) for (let i = sent; i < tokens.length; i++) logprobs.push(null)
    }
    if (tokens.length > 0) this.last = tokens[tokens.length - 1]
    this.generated += tokens.length
    this.finished = { tokens, finishReason: finishReasonOf(engine, reason), ...(logprobs === undefined ? {} : { logprobs }) }
    // Not over yet: the usage chunk and `[DONE]` follow.
    return false
  }

  end(sawDone: boolean): EngineStep {
    const { engine, stops } = this.options
    let finished = this.finished
    if (finished === null) {
      // A stream cut short is a broken stream; only an endpoint that may skip its finishing output ends without one.
      if (!this.options.mayEndWithoutFinish || !sawDone) {
        throw new EngineError('engine-protocol-error', `${engine}: the stream ended without a finish reason`, { engine })
      }
      finished = { tokens: [], finishReason: this.last !== undefined && stops.includes(this.last) ? 'stop' : 'length' }
    }
    const { usage } = this
    // The engine counts the ids it generated; an appended stop id it had left out counts too.
    if (usage !== undefined) usage.completionTokens = Math.max(usage.completionTokens, this.generated)
    return step(finished.tokens, finished.finishReason, usage, undefined, finished.logprobs)
  }

  private logprobsOf(choice: Record<string, unknown>, tokens: number[]): (TokenLogprob | null)[] | undefined {
    return this.options.logprobs === undefined ? undefined : vllmLogprobs(choice.logprobs, tokens, this.options.logprobs)
  }
}

function usageOf(usage: Record<string, unknown>): EngineUsage {
  const isCount = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0
  const count = (value: unknown) => (isCount(value) ? value : 0)
  const out: EngineUsage = { promptTokens: count(usage.prompt_tokens), completionTokens: count(usage.completion_tokens) }
  // Absent (or not a count): the engine did not say, which is not the same as none cached.
  const details = usage.prompt_tokens_details
  if (isRecord(details) && isCount(details.cached_tokens)) out.cachedPromptTokens = details.cached_tokens
  return out
}

function finishReasonOf(engine: string, reason: unknown): EngineFinishReason {
  if (reason === 'stop') return 'stop'
  if (reason === 'length') return 'length'
  if (reason === 'abort') return 'abort'
  throw new EngineError('engine-stream-error', `${engine} ended generation with finish_reason ${JSON.stringify(reason)}`, {
    engine,
    engineMessage: String(reason),
  })
}
