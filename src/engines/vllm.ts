/**
 * vLLM, token ids in and out. Two endpoints:
 * - `POST /v1/completions` (default): the prompt as token ids, `return_token_ids` for each chunk's new ids in
 *   `choices[0].token_ids`, `stop_token_ids`, `skip_special_tokens: false`. Followed:
 *   vllm/entrypoints/openai/completion/protocol.py (CompletionRequest: prompt, max_tokens (default 16, so it is
 *   always sent), stop_token_ids, skip_special_tokens, return_token_ids, stream_options; the stream choice:
 *   token_ids, finish_reason, stop_reason = the stop token id that ended it), and the streaming error object
 *   `{"error": {message, type, param, code}}` of vllm/entrypoints/openai/engine/serving.py
 *   (create_streaming_error_response), then `data: [DONE]`.
 * - `POST /inference/v1/generate` (`api: 'generate'`), the tokens-only endpoint: `token_ids` and
 *   `sampling_params`; chunks `{request_id, choices: [{index, finish_reason, token_ids}], usage}`. Followed:
 *   vllm/entrypoints/serve/disagg/protocol.py (GenerateRequest, GenerateStreamResponse) and serving.py
 *   (serve_tokens_stream_generator: `data: …\n\n`, a usage-only last chunk, `data: [DONE]`).
 *
 * Run vLLM with its own OpenAI server (`vllm serve openai/gpt-oss-120b`); the gateway renders and parses, so
 * no tool or reasoning parser is needed on the vLLM side.
 */
import { ASSISTANT_ACTION_STOP_TOKENS } from '../special-tokens'
import { EngineError } from './errors'
import { type HttpOptions, postEvents } from './http'
import { checkGenerateRequest } from './request'
import { isObject, openAIStyleMessage, parseEvent, step, streamError, tokenIds, withStopToken } from './steps'
import type { Engine, EngineFinishReason, EngineStep, EngineUsage, GenerateRequest } from './types'
import { checkEngineOptions } from './options'

export interface VllmEngineOptions extends HttpOptions {
  /** Base URL, e.g. `http://127.0.0.1:8000`. */
  url: string
  /** The served model name (`--served-model-name`); vLLM requires it when it serves several. */
  model?: string
  /** `'completions'` (default) or the tokens-only `'generate'`. */
  api?: 'completions' | 'generate'
  /**
   * Sent when a request has no `maxTokens`: vLLM's completions endpoint would otherwise stop after 16 tokens.
   * Default 8192.
   */
  defaultMaxTokens?: number
}

const ENGINE = 'vllm'

export class VllmEngine implements Engine {
  readonly name = ENGINE
  private readonly options: VllmEngineOptions
  private readonly endpoint: URL

  constructor(options: VllmEngineOptions) {
    checkEngineOptions(options, 'VllmEngine', ['url', 'model', 'api', 'defaultMaxTokens', 'connectTimeoutMs', 'readTimeoutMs', 'headers', 'maxEventBytes'])
    if (options.api !== undefined && options.api !== 'completions' && options.api !== 'generate') throw new TypeError("VllmEngine: api must be 'completions' or 'generate'")
    this.options = options
    this.endpoint = new URL(options.api === 'generate' ? 'inference/v1/generate' : 'v1/completions', options.url.endsWith('/') ? options.url : `${options.url}/`)
  }

  generate(request: GenerateRequest): AsyncIterable<EngineStep> {
    checkGenerateRequest(request, 'VllmEngine.generate')
    return this.run(request)
  }

  private body(request: GenerateRequest, stops: readonly number[]): Record<string, unknown> {
    const sampling: Record<string, unknown> = { stop_token_ids: [...stops], skip_special_tokens: false }
    if (request.temperature !== undefined) sampling.temperature = request.temperature
    if (request.topP !== undefined) sampling.top_p = request.topP
    if (request.seed !== undefined) sampling.seed = request.seed
    const model = this.options.model === undefined ? {} : { model: this.options.model }
    const streamOptions = { stream: true, stream_options: { include_usage: true } }
    if (this.options.api === 'generate') {
      if (request.maxTokens !== undefined) sampling.max_tokens = request.maxTokens
      return { ...model, token_ids: Array.from(request.tokens), sampling_params: sampling, ...streamOptions }
    }
    const maxTokens = request.maxTokens ?? this.options.defaultMaxTokens ?? 8192
    return { ...model, prompt: Array.from(request.tokens), max_tokens: maxTokens, return_token_ids: true, ...sampling, ...streamOptions }
  }

  private async *run(request: GenerateRequest): AsyncGenerator<EngineStep> {
    const stops = request.stopTokens ?? ASSISTANT_ACTION_STOP_TOKENS
    const events = postEvents(ENGINE, this.endpoint, this.body(request, stops), this.options, request.signal, openAIStyleMessage)
    let last: number | undefined
    let finished: { tokens: number[]; finishReason: EngineFinishReason } | null = null
    let usage: EngineUsage | undefined
    for await (const event of events) {
      if (event.data === '[DONE]') break
      const json = parseEvent(ENGINE, event)
      const failure = streamError(ENGINE, json)
      if (failure !== null) throw failure
      if (!isObject(json)) throw new EngineError('engine-protocol-error', `${ENGINE} sent an event that is not an object`, { engine: ENGINE })
      if (isObject(json.usage)) usage = { promptTokens: Number(json.usage.prompt_tokens ?? 0), completionTokens: Number(json.usage.completion_tokens ?? 0) }
      const choice = Array.isArray(json.choices) ? json.choices[0] : undefined
      if (!isObject(choice)) continue
      let tokens = tokenIds(ENGINE, choice.token_ids, 'token_ids')
      const reason = choice.finish_reason
      if (reason === null || reason === undefined) {
        if (tokens.length === 0) continue
        last = tokens[tokens.length - 1]
        yield step(tokens)
        continue
      }
      if (reason === 'stop') tokens = withStopToken(tokens, last, choice.stop_reason, stops)
      if (tokens.length > 0) last = tokens[tokens.length - 1]
      // Held until the stream ends, so that the usage chunk after it can go with it.
      finished = { tokens, finishReason: finishReasonOf(reason) }
    }
    if (finished === null) throw new EngineError('engine-protocol-error', `${ENGINE}: the stream ended without a finish reason`, { engine: ENGINE })
    yield step(finished.tokens, finished.finishReason, usage)
  }
}

function finishReasonOf(reason: unknown): EngineFinishReason {
  if (reason === 'stop') return 'stop'
  if (reason === 'length') return 'length'
  if (reason === 'abort') return 'abort'
  throw new EngineError('engine-stream-error', `${ENGINE} ended generation with finish_reason ${JSON.stringify(reason)}`, { engine: ENGINE, engineMessage: String(reason) })
}
