/**
 * SGLang's native `POST /generate`, token ids in and out (`python -m sglang.launch_server --model-path
 * openai/gpt-oss-120b`). Followed:
 * - python/sglang/srt/entrypoints/http_server.py (generate_request: `data: <json>\n\n` per output, a
 *   ValueError raised while streaming (a prompt too long, say) as `data: {"error": {"message"}}`, then always
 *   `data: [DONE]`; before streaming, an error status with `{"error": {"message"}}`);
 * - python/sglang/srt/sampling/sampling_params.py (`max_new_tokens` (128 when absent; `null` means no limit but
 *   the context), `stop_token_ids`, `temperature`, `top_p`, `sampling_seed`, `skip_special_tokens`);
 * - python/sglang/srt/managers/tokenizer_manager.py (its output processor: each output is `{text, output_ids,
 *   meta_info}`; `output_ids` are every id so far, or only the new ones with `--incremental-streaming-output`;
 *   `meta_info` has `finish_reason` (null, or `{type: 'stop', matched: <id or string>}`, `{type: 'length',
 *   length}`, `{type: 'abort', message}`), `prompt_tokens`, `completion_tokens` and `cached_tokens`) and the
 *   scheduler's scheduler_output_processor_mixin.py (stream_output_generation: ids sent through the stop token,
 *   `completion_tokens` = all ids so far, `cached_tokens` = the request's prompt tokens taken from the prefix
 *   cache, `req.cached_tokens`). Cached tokens are read from the last output's `meta_info.cached_tokens`.
 *
 * Log probabilities: `return_logprob`, `top_logprobs_num`, `logprob_start_len: -1` (GenerateReqInput in
 * python/sglang/srt/managers/io_struct.py), read from `meta_info.output_token_logprobs` and
 * `output_top_logprobs` (logprobs.ts).
 *
 * Penalties and logit bias: `sampling_params.presence_penalty`, `frequency_penalty` and `logit_bias`
 * (`{"<id>": bias}`), python/sglang/srt/sampling/sampling_params.py (SamplingParams, verify: penalties in [-2, 2],
 * logit bias ids within the vocabulary).
 *
 * Cumulative or incremental `output_ids` (option `incremental`, default `'auto'`): the first output with ids
 * reads the same either way. The next one decides: cumulative when its `output_ids` are as many as
 * `meta_info.completion_tokens` (an incremental one carries only the new ones, fewer once any came before; on
 * the last output, one fewer when the stop id was left out), or, without that field (older servers), when
 * they start with every id seen so far. Once decided, a cumulative output that does not extend what was seen
 * is a protocol error, never silently dropped.
 *
 * Stop tokens: the stop token that ended generation is named in `finish_reason.matched` (the model's EOS ids
 * too: `<|return|>` and `<|call|>` for gpt-oss). Current SGLang keeps it in `output_ids` (sent through the stop
 * token); its detokenizer trims the matched stop from the text only (detokenizer_manager.py,
 * trim_matched_stop). Rule: when `matched` is one of the request's stop ids and the ids do not already end
 * with it, it is appended: nothing changes when the ids have it, and a server that leaves it out still hands
 * the parser its terminator.
 */

import { optionError } from '../base/options'
import { isRecord } from '../base/records'
import { structuralTag } from './constraints'
import { EngineError } from './errors'
import type { HttpOptions } from './http'
import { sglangLogprobs } from './logprobs'
import { positiveInteger } from './options'
import { HttpEngine, type StepReader } from './skeleton'
import { samplingFields, step, tokenIds, withStopToken } from './steps'
import type { EngineFinishReason, EngineStep, EngineUsage, GenerateRequest } from './types'

export interface SglangEngineOptions extends HttpOptions {
  /** Base URL, e.g. `http://127.0.0.1:30000`. */
  url: string
  /** Whether the server streams only new ids (`--incremental-streaming-output`). Default `'auto'` (see above). */
  incremental?: boolean | 'auto'
  /**
   * `max_new_tokens` for a request without `maxTokens`. Default: none, sent as `null`, which SGLang reads as
   * "until the context is full" (a number that does not fit beside the prompt would be refused).
   */
  defaultMaxTokens?: number
}

const ENGINE = 'sglang'

function checkOptions(options: SglangEngineOptions): void {
  if (options.incremental !== undefined && typeof options.incremental !== 'boolean' && options.incremental !== 'auto') {
    throw optionError(TypeError, "SglangEngine: option 'incremental' must be true, false or 'auto'")
  }
  positiveInteger(options, 'defaultMaxTokens', 'SglangEngine')
}

export class SglangEngine extends HttpEngine<SglangEngineOptions> {
  readonly name = ENGINE

  constructor(options: SglangEngineOptions) {
    super(options, { where: 'SglangEngine', options: ['incremental', 'defaultMaxTokens'], check: checkOptions, path: () => 'generate' })
  }

  /** The request body, in GenerateReqInput's fields (see the top of this file). */
  protected body(request: GenerateRequest, stops: readonly number[]): Record<string, unknown> {
    const sampling: Record<string, unknown> = {
      max_new_tokens: request.maxTokens ?? this.options.defaultMaxTokens ?? null,
      stop_token_ids: [...stops],
      skip_special_tokens: false,
      ...samplingFields(request, 'sampling_seed'),
    }
    // GenerateReqInput: log probabilities of the output ids only (logprob_start_len -1), `top_logprobs_num` alternatives.
    const logprobs =
      request.logprobs === undefined ? {} : { return_logprob: true, top_logprobs_num: request.logprobs, logprob_start_len: -1 }
    // SamplingParams.structural_tag: the tag as a JSON string (python/sglang/srt/sampling/sampling_params.py).
    const tag = structuralTag(request)
    if (tag !== null) sampling.structural_tag = JSON.stringify(tag)
    return { input_ids: Array.from(request.tokens), sampling_params: sampling, ...logprobs, stream: true }
  }

  protected reader(request: GenerateRequest, stops: readonly number[]): StepReader {
    return new SglangReader(request, stops, this.options.incremental ?? 'auto')
  }
}

/** One generation's outputs: new ids, the stop id repaired, usage from the last output's `meta_info`. */
class SglangReader implements StepReader {
  private readonly ids: OutputIds

  constructor(
    private readonly request: GenerateRequest,
    private readonly stops: readonly number[],
    incremental: boolean | 'auto',
  ) {
    this.ids = new OutputIds(incremental)
  }

  *read(json: Record<string, unknown>): Generator<EngineStep, boolean> {
    const { request, ids } = this
    const meta = isRecord(json.meta_info) ? json.meta_info : {}
    const finish = isRecord(meta.finish_reason) ? meta.finish_reason : null
    let fresh = ids.next(tokenIds(ENGINE, json.output_ids, 'output_ids'), meta.completion_tokens, finish !== null)
    const logprobs = request.logprobs === undefined ? undefined : sglangLogprobs(meta, fresh, request.logprobs)
    if (finish === null) {
      if (fresh.length > 0) yield step(fresh, undefined, undefined, undefined, logprobs)
      return false
    }
    const finishReason = finishReasonOf(finish)
    if (finishReason === 'stop') {
      const repaired = withStopToken(fresh, ids.last, finish.matched, this.stops)
      ids.record(repaired.slice(fresh.length))
      // An appended stop id came with no log probability.
      if (logprobs !== undefined) for (let i = fresh.length; i < repaired.length; i++) logprobs.push(null)
      fresh = repaired
    }
    const usage: EngineUsage = {
      promptTokens: count(meta.prompt_tokens) ?? request.tokens.length,
      completionTokens: Math.max(count(meta.completion_tokens) ?? 0, ids.total),
    }
    const cached = count(meta.cached_tokens)
    if (cached !== undefined) usage.cachedPromptTokens = cached
    yield step(fresh, finishReason, usage, undefined, logprobs)
    return true
  }

  end(): EngineStep {
    throw new EngineError('engine-protocol-error', `${ENGINE}: the stream ended without a finish reason`, { engine: ENGINE })
  }
}

/** Turns each output's `output_ids` into the new ids, cumulative or incremental (the rule at the top). */
class OutputIds {
  private readonly seen: number[] = []
  private incremental: boolean | null

  constructor(mode: boolean | 'auto') {
    this.incremental = mode === 'auto' ? null : mode
  }

  get last(): number | undefined {
    return this.seen[this.seen.length - 1]
  }

  get total(): number {
    return this.seen.length
  }

  next(ids: number[], completionTokens: unknown, final: boolean): number[] {
    if (this.incremental === null && ids.length > 0 && this.seen.length > 0) {
      const n = count(completionTokens)
      const extendsSeen = ids.length >= this.seen.length && startsWith(ids, this.seen)
      if (!final && n !== undefined) this.incremental = ids.length !== n
      // The last output may lack a stop id the detokenizer trimmed: one fewer than completion_tokens.
      else if (n !== undefined) this.incremental = !(extendsSeen && ids.length >= n - 1)
      else this.incremental = !extendsSeen
    }
    let fresh: number[]
    if (this.incremental !== false) fresh = ids
    else if (ids.length >= this.seen.length && startsWith(ids, this.seen)) fresh = ids.slice(this.seen.length)
    else
      throw new EngineError('engine-protocol-error', `${ENGINE} sent cumulative output_ids that do not extend the ids before them`, {
        engine: ENGINE,
      })
    this.record(fresh)
    return fresh
  }

  record(ids: readonly number[]): void {
    for (const id of ids) this.seen.push(id)
  }
}

function startsWith(ids: readonly number[], prefix: readonly number[]): boolean {
  for (let i = 0; i < prefix.length; i++) if (ids[i] !== prefix[i]) return false
  return true
}

function count(value: unknown): number | undefined {
  return Number.isSafeInteger(value) && (value as number) >= 0 ? (value as number) : undefined
}

function finishReasonOf(finish: Record<string, unknown>): EngineFinishReason {
  if (finish.type === 'stop') return 'stop'
  if (finish.type === 'length') return 'length'
  if (finish.type === 'abort') {
    // SGLang aborts a request it cannot serve (e.g. a prompt too long) with a message: that is a failure.
    if (typeof finish.message === 'string' && finish.message !== '') {
      throw new EngineError('engine-stream-error', `${ENGINE} aborted the request: ${finish.message}`, {
        engine: ENGINE,
        engineMessage: finish.message,
      })
    }
    return 'abort'
  }
  throw new EngineError('engine-stream-error', `${ENGINE} ended generation with finish_reason ${JSON.stringify(finish)}`, {
    engine: ENGINE,
  })
}
