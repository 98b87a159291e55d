/**
 * TensorRT-LLM, token ids in and out, through `trtllm-serve`'s OpenAI completions endpoint; the gateway
 * renders and parses, so the server's chat template, tool and reasoning parsers are not used. Followed:
 *
 * - tensorrt_llm/serve/openai_protocol.py (NVIDIA/TensorRT-LLM): `CompletionRequest` refuses unknown fields
 *   (`OpenAIBaseModel`: `extra="forbid"`), requires `model`, takes `prompt` as a list of ints, `max_tokens`
 *   (unset: the engine's own limit), `stop_token_ids`, `skip_special_tokens`, `detokenize`, `seed`,
 *   `temperature`, `top_p`, and `stream_options` only with `stream: true`. `CompletionResponseStreamChoice`
 *   carries `token_ids`, `finish_reason` and `stop_reason` (the stop token id that ended it).
 * - tensorrt_llm/serve/postprocess_handlers.py, `completion_stream_post_processor`: one `data: <json>` chunk per
 *   engine output; `token_ids` holds that output's new ids only when the request sets `detokenize: false` (the
 *   text is then ""); with `include_usage`, a last chunk with `choices: []` and `usage` (its
 *   `prompt_tokens_details.cached_tokens` too); the server (tensorrt_llm/serve/openai_server.py) ends the
 *   stream with `data: [DONE]` and answers a bad request with its `ErrorResponse` (`{object: 'error', message,
 *   type, code}`).
 *
 * The stream is read by completion-stream.ts, as vLLM's: when `stop_reason` names one of the request's stop ids
 * and the ids do not end with it, it is appended, so the parser always gets its terminator.
 *
 * Penalties and logit bias: CompletionRequest's `presence_penalty`, `frequency_penalty` and `logit_bias`
 * (`{"<id>": bias}`, turned into an embedding bias by to_sampling_params, which refuses ids past the vocabulary
 * and biases beyond [-100, 100]).
 *
 * Cached prompt tokens: openai_protocol.py's `UsageInfo` has `prompt_tokens_details: PromptTokensDetails`
 * (`cached_tokens`), and completion_stream_post_processor always fills it in the usage chunk (the result's
 * `cached_tokens`, 0 when none were cached); completion-stream.ts reads it as vLLM's.
 */

import { optionError } from '../base/options'
import { CompletionReader } from './completion-stream'
import { structuralTag } from './constraints'
import type { HttpOptions } from './http'
import { HttpEngine, type StepReader } from './skeleton'
import { samplingFields } from './steps'
import { ALL_SAMPLING_FIELDS, type GenerateRequest, type SamplingField } from './types'

export interface TrtllmEngineOptions extends HttpOptions {
  /** Base URL of `trtllm-serve`, e.g. `http://127.0.0.1:8000`. */
  url: string
  /** The model name the server serves (its `CompletionRequest` requires one). */
  model: string
}

const ENGINE = 'trtllm'

function checkOptions(options: TrtllmEngineOptions): void {
  if (typeof options.model !== 'string' || options.model === '') {
    throw optionError(TypeError, "TrtllmEngine: option 'model' is required: the served model's name")
  }
}

/** ResponseFormat of openai_protocol.py: `structural_tag` with the tag's `format` (xgrammar's form). */
function responseFormatOf(tag: ReturnType<typeof structuralTag>): Record<string, unknown> {
  return tag === null ? {} : { response_format: { type: 'structural_tag', format: tag.format } }
}

export class TrtllmEngine extends HttpEngine<TrtllmEngineOptions> {
  readonly name = ENGINE
  /** Not `logprobs`: trtllm-serve names the alternatives by their text only, which two ids may share. */
  readonly sampling: readonly SamplingField[] = ALL_SAMPLING_FIELDS.filter((field) => field !== 'logprobs')

  constructor(options: TrtllmEngineOptions) {
    super(options, { where: 'TrtllmEngine', options: ['model'], check: checkOptions, path: () => 'v1/completions' })
  }

  /** The request body, in `CompletionRequest`'s fields only (the server refuses any other). */
  protected body(request: GenerateRequest, stops: readonly number[]): Record<string, unknown> {
    return {
      model: this.options.model,
      prompt: Array.from(request.tokens),
      ...(request.maxTokens !== undefined ? { max_tokens: request.maxTokens } : {}),
      stop_token_ids: [...stops],
      skip_special_tokens: false,
      detokenize: false,
      ...samplingFields(request, 'seed'),
      ...responseFormatOf(structuralTag(request)),
      stream: true,
      stream_options: { include_usage: true },
    }
  }

  protected reader(_request: GenerateRequest, stops: readonly number[]): StepReader {
    return new CompletionReader({ engine: ENGINE, stops })
  }
}
