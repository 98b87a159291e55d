/**
 * llama.cpp's server, native `POST /completion`, token ids in and out. Followed: tools/server/README.md
 * (`prompt` as an array of token ids, `n_predict`, `temperature`, `top_p`, `seed`, `stream`, `return_tokens`)
 * and tools/server/server-task.cpp (server_task_result_cmpl_partial / _final to_json_non_oaicompat: each
 * chunk `{content, tokens, stop: false, …}`, the last `{stop: true, stop_type: 'eos' | 'limit' | 'word' |
 * 'none', stopping_word, tokens_predicted, tokens_evaluated, timings}`; no `[DONE]` on this endpoint).
 * Errors: HTTP `{"error": {code, message, type}}`; mid-stream `data: {"error": …}`, or an `error: {…}` line
 * in versions that write it so.
 *
 * llama.cpp takes no stop token ids: generation stops at the vocabulary's end-of-generation tokens, which
 * for gpt-oss GGUFs are `<|return|>` and `<|call|>` (`<|end|>` must not be one: check `--verbose` output of
 * your build). The stop token arrives among the ids when the server returns it; llama.cpp does not say which
 * token it stopped at, so nothing is appended (a completion without its stop token ends with finish reason
 * `length` in the adapters).
 */
import { EngineError } from './errors'
import { type HttpOptions, postEvents } from './http'
import { checkEngineOptions } from './options'
import { checkGenerateRequest } from './request'
import { isObject, openAIStyleMessage, parseEvent, step, streamError, tokenIds } from './steps'
import type { Engine, EngineFinishReason, EngineStep, GenerateRequest } from './types'

export interface LlamaCppEngineOptions extends HttpOptions {
  /** Base URL, e.g. `http://127.0.0.1:8080`. */
  url: string
}

const ENGINE = 'llamacpp'

export class LlamaCppEngine implements Engine {
  readonly name = ENGINE
  private readonly endpoint: URL

  constructor(private readonly options: LlamaCppEngineOptions) {
    checkEngineOptions(options, 'LlamaCppEngine', ['url', 'connectTimeoutMs', 'readTimeoutMs', 'headers', 'maxEventBytes'])
    this.endpoint = new URL('completion', options.url.endsWith('/') ? options.url : `${options.url}/`)
  }

  generate(request: GenerateRequest): AsyncIterable<EngineStep> {
    checkGenerateRequest(request, 'LlamaCppEngine.generate')
    return this.run(request)
  }

  private async *run(request: GenerateRequest): AsyncGenerator<EngineStep> {
    // n_predict -1: until an end-of-generation token or the context is full.
    const body: Record<string, unknown> = { prompt: Array.from(request.tokens), n_predict: request.maxTokens ?? -1, stream: true, return_tokens: true, cache_prompt: true }
    if (request.temperature !== undefined) body.temperature = request.temperature
    if (request.topP !== undefined) body.top_p = request.topP
    if (request.seed !== undefined) body.seed = request.seed
    let generated = 0
    for await (const event of postEvents(ENGINE, this.endpoint, body, this.options, request.signal, openAIStyleMessage)) {
      if (event.data === '[DONE]') break
      const json = parseEvent(ENGINE, event)
      const failure = event.event === 'error' ? new EngineError('engine-stream-error', `${ENGINE} failed mid-stream: ${openAIStyleMessage(json) ?? event.data}`, { engine: ENGINE, engineMessage: openAIStyleMessage(json) }) : streamError(ENGINE, json)
      if (failure !== null) throw failure
      if (!isObject(json)) throw new EngineError('engine-protocol-error', `${ENGINE} sent a chunk that is not an object`, { engine: ENGINE })
      const tokens = tokenIds(ENGINE, json.tokens, 'tokens')
      generated += tokens.length
      if (json.stop !== true) {
        if (tokens.length > 0) yield step(tokens)
        continue
      }
      const usage = { promptTokens: Number(json.tokens_evaluated ?? request.tokens.length), completionTokens: Number(json.tokens_predicted ?? generated) }
      yield step(tokens, finishReasonOf(json.stop_type), usage)
      return
    }
    throw new EngineError('engine-protocol-error', `${ENGINE}: the stream ended without a final chunk`, { engine: ENGINE })
  }
}

function finishReasonOf(stopType: unknown): EngineFinishReason {
  // 'limit': n_predict or the context ran out; 'eos', 'word' and 'none' (older servers) ended generation.
  return stopType === 'limit' ? 'length' : 'stop'
}
