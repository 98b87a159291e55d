/**
 * SGLang's native `POST /generate`, token ids in and out. Followed: python/sglang/srt/entrypoints/http_server.py
 * (generate_request: `data: <json>\n\n` per output, `{"error": {"message"}}` for a failure mid-stream, then
 * `data: [DONE]`; a 400 `{"error": {"message"}}` before streaming), python/sglang/srt/sampling/sampling_params.py
 * (max_new_tokens (default 128, so it is always sent), temperature, top_p, sampling_seed, stop_token_ids,
 * skip_special_tokens, no_stop_trim) and python/sglang/srt/managers/detokenizer_manager.py (trim_matched_stop:
 * a stop token that ended generation is dropped from `output_ids` and named in
 * `meta_info.finish_reason.matched`). Each output carries `output_ids` and `meta_info` (`finish_reason`: null,
 * or `{type: 'stop' | 'length' | 'abort', matched?, message?}`, `prompt_tokens`, `completion_tokens`).
 *
 * `output_ids` are cumulative by default and the new ids only with `--incremental-streaming-output` (older:
 * `--stream-output`): option `incremental`, `'auto'` by default, which decides on the second output that has
 * ids: cumulative when its `output_ids` are as many as `meta_info.completion_tokens` (or, without that field,
 * when they start with every id seen so far and add more).
 */
import { ASSISTANT_ACTION_STOP_TOKENS } from '../special-tokens'
import { EngineError } from './errors'
import { type HttpOptions, postEvents } from './http'
import { checkEngineOptions } from './options'
import { checkGenerateRequest } from './request'
import { isObject, openAIStyleMessage, parseEvent, step, streamError, tokenIds, withStopToken } from './steps'
import type { Engine, EngineFinishReason, EngineStep, GenerateRequest } from './types'

export interface SglangEngineOptions extends HttpOptions {
  /** Base URL, e.g. `http://127.0.0.1:30000`. */
  url: string
  /** Whether the server streams only new ids (`--incremental-streaming-output`). Default `'auto'`. */
  incremental?: boolean | 'auto'
  /** Sent when a request has no `maxTokens` (SGLang's own default is 128). Default 8192. */
  defaultMaxTokens?: number
}

const ENGINE = 'sglang'

export class SglangEngine implements Engine {
  readonly name = ENGINE
  private readonly endpoint: URL

  constructor(private readonly options: SglangEngineOptions) {
    checkEngineOptions(options, 'SglangEngine', ['url', 'incremental', 'defaultMaxTokens', 'connectTimeoutMs', 'readTimeoutMs', 'headers', 'maxEventBytes'])
    if (options.incremental !== undefined && typeof options.incremental !== 'boolean' && options.incremental !== 'auto') {
      throw new TypeError("SglangEngine: incremental must be true, false or 'auto'")
    }
    this.endpoint = new URL('generate', options.url.endsWith('/') ? options.url : `${options.url}/`)
  }

  generate(request: GenerateRequest): AsyncIterable<EngineStep> {
    checkGenerateRequest(request, 'SglangEngine.generate')
    return this.run(request)
  }

  private async *run(request: GenerateRequest): AsyncGenerator<EngineStep> {
    const stops = request.stopTokens ?? ASSISTANT_ACTION_STOP_TOKENS
    const sampling: Record<string, unknown> = {
      max_new_tokens: request.maxTokens ?? this.options.defaultMaxTokens ?? 8192,
      stop_token_ids: [...stops],
      skip_special_tokens: false,
    }
    if (request.temperature !== undefined) sampling.temperature = request.temperature
    if (request.topP !== undefined) sampling.top_p = request.topP
    if (request.seed !== undefined) sampling.sampling_seed = request.seed
    const body = { input_ids: Array.from(request.tokens), sampling_params: sampling, stream: true }
    let incremental: boolean | null = this.options.incremental === 'auto' || this.options.incremental === undefined ? null : this.options.incremental
    const seen: number[] = []
    let outputs = 0
    for await (const event of postEvents(ENGINE, this.endpoint, body, this.options, request.signal, openAIStyleMessage)) {
      if (event.data === '[DONE]') break
      const json = parseEvent(ENGINE, event)
      const failure = streamError(ENGINE, json)
      if (failure !== null) throw failure
      if (!isObject(json)) throw new EngineError('engine-protocol-error', `${ENGINE} sent an output that is not an object`, { engine: ENGINE })
      const ids = tokenIds(ENGINE, json.output_ids, 'output_ids')
      const meta = isObject(json.meta_info) ? json.meta_info : {}
      const finish = isObject(meta.finish_reason) ? meta.finish_reason : null
      if (incremental === null && ids.length > 0 && outputs++ > 0 && finish === null) incremental = !isCumulative(ids, seen, meta.completion_tokens)
      // Until decided (the first output), both readings give the same new ids.
      let fresh = incremental === true ? ids : ids.length >= seen.length && startsWith(ids, seen) ? ids.slice(seen.length) : incremental === false ? [] : ids
      if (finish !== null && finish.type === 'stop') fresh = withStopToken(fresh, seen[seen.length - 1], finish.matched, stops)
      seen.push(...fresh)
      if (finish === null) {
        if (fresh.length > 0) yield step(fresh)
        continue
      }
      const usage = { promptTokens: Number(meta.prompt_tokens ?? request.tokens.length), completionTokens: seen.length }
      yield step(fresh, finishReasonOf(finish), usage)
      return
    }
    throw new EngineError('engine-protocol-error', `${ENGINE}: the stream ended without a finish reason`, { engine: ENGINE })
  }
}

function startsWith(ids: readonly number[], prefix: readonly number[]): boolean {
  for (let i = 0; i < prefix.length; i++) if (ids[i] !== prefix[i]) return false
  return true
}

function isCumulative(ids: readonly number[], seen: readonly number[], completionTokens: unknown): boolean {
  if (typeof completionTokens === 'number') return ids.length === completionTokens
  return ids.length > seen.length && startsWith(ids, seen)
}

function finishReasonOf(finish: Record<string, unknown>): EngineFinishReason {
  if (finish.type === 'stop') return 'stop'
  if (finish.type === 'length') return 'length'
  if (finish.type === 'abort') {
    // SGLang aborts a request it cannot serve (e.g. a prompt too long) with a message: that is a failure.
    if (typeof finish.message === 'string' && finish.message !== '') {
      throw new EngineError('engine-stream-error', `${ENGINE} aborted the request: ${finish.message}`, { engine: ENGINE, engineMessage: finish.message })
    }
    return 'abort'
  }
  throw new EngineError('engine-stream-error', `${ENGINE} ended generation with finish_reason ${JSON.stringify(finish)}`, { engine: ENGINE })
}
