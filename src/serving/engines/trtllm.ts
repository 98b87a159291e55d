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
 * The stop id is read as vLLM's: when `stop_reason` names one of the request's stop ids and the ids do not
 * end with it, it is appended, so the parser always gets its terminator.
 */
import { ASSISTANT_ACTION_STOP_TOKENS } from '../../api/special-tokens'
import { EngineError } from './errors'
import { type HttpOptions, postEvents } from './http'
import { checkEngineOptions } from './options'
import { checkGenerateRequest } from './request'
import { isObject, openAIStyleMessage, parseEvent, samplingFields, step, streamError, tokenIds, withStopToken } from './steps'
import type { Engine, EngineFinishReason, EngineStep, EngineUsage, GenerateRequest } from './types'

export interface TrtllmEngineOptions extends HttpOptions {
  /** Base URL of `trtllm-serve`, e.g. `http://127.0.0.1:8000`. */
  url: string
  /** The model name the server serves (its `CompletionRequest` requires one). */
  model: string
}

const ENGINE = 'trtllm'
const OPTIONS = ['url', 'model', 'connectTimeoutMs', 'readTimeoutMs', 'headers', 'maxEventBytes'] as const

export class TrtllmEngine implements Engine {
  readonly name = ENGINE
  private readonly options: TrtllmEngineOptions
  private readonly endpoint: URL

  constructor(options: TrtllmEngineOptions) {
    const url = checkEngineOptions(options, 'TrtllmEngine', OPTIONS)
    if (typeof options.model !== 'string' || options.model === '') {
      throw new TypeError("TrtllmEngine: option 'model' is required: the served model's name")
    }
    this.options = { ...options }
    this.endpoint = new URL('v1/completions', url)
  }

  generate(request: GenerateRequest): AsyncIterable<EngineStep> {
    checkGenerateRequest(request, 'TrtllmEngine.generate')
    return this.run(request)
  }

  /** The request body, in `CompletionRequest`'s fields only (the server refuses any other). */
  private body(request: GenerateRequest): Record<string, unknown> {
    const stops = request.stopTokens ?? ASSISTANT_ACTION_STOP_TOKENS
    return {
      model: this.options.model,
      prompt: Array.from(request.tokens),
      ...(request.maxTokens !== undefined ? { max_tokens: request.maxTokens } : {}),
      stop_token_ids: [...stops],
      skip_special_tokens: false,
      detokenize: false,
      ...samplingFields(request, 'seed'),
      stream: true,
      stream_options: { include_usage: true },
    }
  }

  private async *run(request: GenerateRequest): AsyncGenerator<EngineStep> {
    const stops = request.stopTokens ?? ASSISTANT_ACTION_STOP_TOKENS
    const events = postEvents(ENGINE, this.endpoint, this.body(request), this.options, request.signal, openAIStyleMessage)
    let last: number | undefined
    let generated = 0
    let finished: { tokens: number[]; finishReason: EngineFinishReason } | null = null
    let usage: EngineUsage | undefined
    for await (const event of events) {
      if (event.data === '[DONE]') break
      const json = parseEvent(ENGINE, event)
      const failure = streamError(ENGINE, json)
      if (failure !== null) throw failure
      if (!isObject(json))
        throw new EngineError('engine-protocol-error', `${ENGINE} sent an event that is not an object`, { engine: ENGINE })
      if (isObject(json.usage)) usage = usageOf(json.usage)
      const choice = Array.isArray(json.choices) ? json.choices[0] : undefined
      if (!isObject(choice)) continue
      if (finished !== null)
        throw new EngineError('engine-protocol-error', `${ENGINE} sent ids after the finish reason`, { engine: ENGINE })
      let tokens = tokenIds(ENGINE, choice.token_ids ?? [], 'token_ids')
      const reason = choice.finish_reason
      if (reason === null || reason === undefined) {
        if (tokens.length === 0) continue
        last = tokens[tokens.length - 1]
        generated += tokens.length
        yield step(tokens)
        continue
      }
      if (reason === 'stop') tokens = withStopToken(tokens, last, choice.stop_reason, stops)
      generated += tokens.length
      // Held until the stream ends, so that the usage chunk after it goes out with it.
      finished = { tokens, finishReason: reason === 'stop' ? 'stop' : reason === 'length' ? 'length' : 'abort' }
    }
    if (finished === null)
      throw new EngineError('engine-protocol-error', `${ENGINE}: the stream ended without a finish reason`, { engine: ENGINE })
    if (usage !== undefined) usage.completionTokens = Math.max(usage.completionTokens, generated)
    yield step(finished.tokens, finished.finishReason, usage)
  }
}

function usageOf(usage: Record<string, unknown>): EngineUsage {
  const count = (value: unknown) => (Number.isSafeInteger(value) && (value as number) >= 0 ? (value as number) : 0)
  return { promptTokens: count(usage.prompt_tokens), completionTokens: count(usage.completion_tokens) }
}
