/**
 * vLLM, token ids in and out, through its own OpenAI server (`vllm serve openai/gpt-oss-120b`); the gateway
 * renders and parses, so no chat template, tool or reasoning parser is needed on the vLLM side. Two endpoints:
 *
 * - `POST /v1/completions` (default). Followed: vllm/entrypoints/openai/completion/protocol.py (CompletionRequest:
 *   `prompt` as a list of ints, `max_tokens` (default 16), `stop_token_ids`, `skip_special_tokens`,
 *   `return_token_ids`, `stream_options.include_usage`, `seed`, `temperature`, `top_p`, `model`) and
 *   vllm/entrypoints/openai/completion/serving.py (completion_stream_generator: one `data: <json>\n\n` chunk per
 *   engine output with `choices[0].token_ids` (the new ids, because `return_token_ids`), `finish_reason` and
 *   `stop_reason` on the last; then, with `include_usage`, a chunk with `choices: []` and `usage`; a failure as
 *   `data: {"error": {message, type, param, code}}` (vllm/entrypoints/openai/engine/serving.py,
 *   create_streaming_error_response); and always `data: [DONE]`).
 * - `POST /inference/v1/generate` (`api: 'generate'`), the tokens-only endpoint. Followed:
 *   vllm/entrypoints/serve/disagg/protocol.py (GenerateRequest: `token_ids`, `sampling_params` (vLLM's own
 *   SamplingParams: `max_tokens`, `temperature`, `top_p`, `seed`, `stop_token_ids`, `skip_special_tokens`),
 *   `model`, `stream`, `stream_options`), vllm/entrypoints/serve/disagg/api_router.py (the route) and
 *   vllm/entrypoints/serve/disagg/serving.py (serve_tokens_stream_generator: chunks `{request_id, choices:
 *   [{index, logprobs, finish_reason, token_ids}]}`, a usage-only last chunk with `include_usage`, the same
 *   error object, `data: [DONE]`; without `max_tokens` the server allows the rest of the context).
 *
 * Penalties and logit bias: top-level `presence_penalty`, `frequency_penalty` and `logit_bias` (`{"<id>": bias}`)
 * on /v1/completions (CompletionRequest; vllm/sampling_params.py SamplingParams.from_optional converts the keys,
 * _verify_args holds the penalties to [-2, 2], verify refuses ids past the vocabulary), the same names in
 * `sampling_params` on the generate endpoint (SamplingParams itself).
 *
 * Log probabilities (/v1/completions only): `logprobs` (the number of alternatives) with
 * `return_tokens_as_token_ids`, so each chunk's `choices[0].logprobs` names ids, not text (logprobs.ts).
 * The tokens-only endpoint is not read for them: a request asking for them there is refused.
 *
 * Structured outputs: `structured_outputs: { structural_tag }` (the same on both endpoints: a field of
 * CompletionRequest and of SamplingParams; StructuredOutputsParams in vllm/sampling_params.py, whose
 * `structural_tag` is a JSON string), compiled by vLLM's xgrammar backend (vllm/v1/structured_output/
 * backend_xgrammar.py, the `format` form). The older `guided_json`-style fields are gone from vLLM and would be
 * ignored with a 200. Serve without `--reasoning-parser`: with one, vLLM starts the grammar only where its
 * parser sees the reasoning end, which this tag, written for the whole completion, does not expect.
 *
 * Cached prompt tokens: the usage chunk's `prompt_tokens_details.cached_tokens` (vllm/entrypoints/openai/engine/
 * protocol.py, UsageInfo and PromptTokenUsageInfo; vllm/entrypoints/openai/protocol.py before that split). vLLM
 * sends `prompt_tokens_details` only when served with `--enable-prompt-tokens-details` (completions: whenever
 * the count is known, 0 included; the generate endpoint: only when it is not 0); without it, usage has no
 * `cachedPromptTokens`.
 *
 * Stop tokens: vLLM keeps the stop token it matched in the ids (vllm/v1/core/sched/utils.py, check_stop, trims
 * only what follows it) and names it in `stop_reason` (None when it was the model's EOS, `<|return|>` for
 * gpt-oss). The rule here: when `stop_reason` is one of the request's stop ids and the ids do not already end
 * with it, it is appended, so a build that leaves it out still hands the parser its terminator. The
 * tokens-only endpoint has no `stop_reason`, and it skips an output with no new ids, finish reason included:
 * a stream that ends without one is read as `stop` when its last id is a stop id, else `length`.
 */

import { optionError } from '../base/options'
import { CompletionReader } from './completion-stream'
import { structuralTag } from './constraints'
import type { HttpOptions } from './http'
import { positiveInteger } from './options'
import { HttpEngine, type StepReader } from './skeleton'
import { samplingFields } from './steps'
import { ALL_SAMPLING_FIELDS, type GenerateRequest, type SamplingField } from './types'

export interface VllmEngineOptions extends HttpOptions {
  /** Base URL, e.g. `http://127.0.0.1:8000` (a path prefix is kept: `http://host/vllm` → `/vllm/v1/completions`). */
  url: string
  /** The served model name (`--served-model-name`); vLLM requires it when it serves several. */
  model?: string
  /** `'completions'` (default) or the tokens-only `'generate'`. */
  api?: 'completions' | 'generate'
  /**
   * `max_tokens` for a request without `maxTokens`, on the completions endpoint only: there vLLM would stop
   * after 16 tokens, and it refuses `null` while streaming. vLLM caps it at what the context leaves, but
   * refuses a prompt longer than `--max-model-len` minus this: keep it below that. Default 8192. (The
   * generate endpoint needs none: without `max_tokens` it allows the rest of the context.)
   */
  defaultMaxTokens?: number
}

const ENGINE = 'vllm'
export const VLLM_DEFAULT_MAX_TOKENS = 8192

function checkOptions(options: VllmEngineOptions): void {
  if (options.api !== undefined && options.api !== 'completions' && options.api !== 'generate')
    throw optionError(TypeError, "VllmEngine: option 'api' must be 'completions' or 'generate'")
  positiveInteger(options, 'defaultMaxTokens', 'VllmEngine')
}

export class VllmEngine extends HttpEngine<VllmEngineOptions> {
  readonly name = ENGINE
  /** Everything on /v1/completions; the tokens-only endpoint's chunks carry no log probabilities this client reads. */
  readonly sampling: readonly SamplingField[]

  constructor(options: VllmEngineOptions) {
    super(options, {
      where: 'VllmEngine',
      options: ['model', 'api', 'defaultMaxTokens'],
      check: checkOptions,
      path: ({ api }) => (api === 'generate' ? 'inference/v1/generate' : 'v1/completions'),
    })
    this.sampling = options.api === 'generate' ? ALL_SAMPLING_FIELDS.filter((field) => field !== 'logprobs') : ALL_SAMPLING_FIELDS
  }

  /** The request body, in the fields of the endpoint's protocol.py (see the top of this file). */
  protected body(request: GenerateRequest, stops: readonly number[]): Record<string, unknown> {
    const sampling: Record<string, unknown> = { stop_token_ids: [...stops], skip_special_tokens: false, ...samplingFields(request, 'seed') }
    // StructuredOutputsParams (vllm/sampling_params.py): its `structural_tag` is the tag as a JSON string.
    const tag = structuralTag(request)
    if (tag !== null) sampling.structured_outputs = { structural_tag: JSON.stringify(tag) }
    const model = this.options.model === undefined ? {} : { model: this.options.model }
    const stream = { stream: true, stream_options: { include_usage: true } }
    if (this.options.api === 'generate') {
      if (request.maxTokens !== undefined) sampling.max_tokens = request.maxTokens
      return { ...model, token_ids: Array.from(request.tokens), sampling_params: sampling, ...stream }
    }
    const maxTokens = request.maxTokens ?? this.options.defaultMaxTokens ?? VLLM_DEFAULT_MAX_TOKENS
    // Log probabilities name their ids as `token_id:N` (return_tokens_as_token_ids), not as text two ids may share.
    const logprobs = request.logprobs === undefined ? {} : { logprobs: request.logprobs, return_tokens_as_token_ids: true }
    return {
      ...model,
      prompt: Array.from(request.tokens),
      max_tokens: maxTokens,
      return_token_ids: true,
      ...sampling,
      ...logprobs,
      ...stream,
    }
  }

  protected reader(request: GenerateRequest, stops: readonly number[]): StepReader {
    return new CompletionReader({
      engine: ENGINE,
      stops,
      mayEndWithoutFinish: this.options.api === 'generate',
      ...(request.logprobs === undefined ? {} : { logprobs: request.logprobs }),
    })
  }
}
