/**
 * llama.cpp's server, native `POST /completion`, token ids in and out (`llama-server -m gpt-oss-20b.gguf`).
 * Followed: tools/server/README.md (`prompt` as an array of token ids, `n_predict` (-1: no limit but the
 * context), `temperature`, `top_p`, `seed`, `stream`, `return_tokens`, `cache_prompt`),
 * tools/server/server-task.cpp (server_task_result_cmpl_partial / _final, to_json_non_oaicompat: each chunk
 * `{index, content, tokens, stop: false, id_slot, tokens_predicted, tokens_evaluated}`, the last `{…, tokens:
 * [] (streamed already), stop: true, stop_type: 'eos' | 'limit' | 'word' | 'none', stopping_word,
 * tokens_predicted, tokens_evaluated, timings}`; no `[DONE]` on this endpoint) and
 * tools/server/server-context.cpp (process_token sends each sampled token, the end-of-generation one
 * included, before it stops; handle_completions_impl answers an error before the first result with an
 * error status and `{"error": {code, message, type}}`, one after it as `data: {"error": {…}}`; older servers
 * wrote `error: {…}` lines instead). The response head comes only with the first result, after the prefill:
 * that wait is under `readTimeoutMs`, not `connectTimeoutMs`.
 *
 * Penalties and logit bias: `presence_penalty`, `frequency_penalty`, and `logit_bias` as `[[id, bias], …]`
 * (tools/server/server-schema.cpp, the `logit_bias` field's handler; ids past the vocabulary are skipped there,
 * so the client checks them first).
 *
 * Structured outputs: `grammar` (GBNF) with `grammar_lazy` and `grammar_triggers` (tools/server/server-schema.cpp,
 * the fields of make_llama_cmpl_schema; trigger objects `{type, value}` as server_grammar_trigger in
 * server-common.h), from constraints.ts. `json_schema` is not used: its grammar would start at the trigger's
 * text, not at the JSON.
 *
 * Log probabilities: `n_probs` (tools/server/server-schema.cpp), read from each result's
 * `completion_probabilities` (logprobs.ts); ids found again by held-ids.ts have none (null).
 *
 * Ids held back: llama-server streams no result while its text ends inside a character, and a result carries
 * only its own id; held-ids.ts finds such ids again from the text (`tokens_predicted` says how many are
 * missing), or the step reports `engine-ids-lost`. Cached tokens: the final result's `timings.cache_n`.
 *
 * Stop tokens: llama.cpp takes no stop token ids. It ends generation at the vocabulary's end-of-generation
 * tokens: for a gpt-oss GGUF `<|return|>` and `<|call|>`, and not `<|end|>` (src/llama-vocab.cpp drops
 * `<|end|>` from that set when `<|return|>` and `<|call|>` are in it; builds before that stop at `<|end|>`).
 * Those arrive among the ids, so nothing is appended. To honour `stopTokens` all the same (other ids, or
 * a subset), the client watches the ids itself: at the first stop id it ends the step there with finish
 * reason `stop` and closes the connection, which makes llama.cpp stop that slot.
 */
import { isRecord } from '../base/records'
import { llamaCppGrammarFields } from './constraints'
import { EngineError } from './errors'
import { heldIds } from './held-ids'
import type { HttpOptions } from './http'
import { llamaCppLogprobs } from './logprobs'
import { HttpEngine, type StepReader } from './skeleton'
import type { SseEvent } from './sse'
import { openAIStyleMessage, samplingFields, step, tokenIds } from './steps'
import type { EngineDiagnostic, EngineFinishReason, EngineStep, EngineUsage, GenerateRequest } from './types'

export interface LlamaCppEngineOptions extends HttpOptions {
  /** Base URL, e.g. `http://127.0.0.1:8080`. */
  url: string
}

const ENGINE = 'llamacpp'

export class LlamaCppEngine extends HttpEngine<LlamaCppEngineOptions> {
  readonly name = ENGINE

  constructor(options: LlamaCppEngineOptions) {
    super(options, { where: 'LlamaCppEngine', path: () => 'completion', eventError: lineError })
  }

  /** The request body, in the README's `/completion` fields (see the top of this file). */
  protected body(request: GenerateRequest): Record<string, unknown> {
    // n_predict -1: until an end-of-generation token or the context is full.
    return {
      prompt: Array.from(request.tokens),
      n_predict: request.maxTokens ?? -1,
      stream: true,
      return_tokens: true,
      cache_prompt: true,
      ...samplingFields(request, 'seed', 'pairs'),
      ...llamaCppGrammarFields(request),
      // n_probs 0 sends no probabilities at all: at least 1, and the alternatives cut to what was asked.
      ...(request.logprobs === undefined ? {} : { n_probs: Math.max(1, request.logprobs) }),
    }
  }

  protected reader(request: GenerateRequest, stops: readonly number[]): StepReader {
    return new LlamaCppReader(request, stops)
  }
}

/** One generation's results: held ids found again, the client's own stop at a stop id, usage. */
class LlamaCppReader implements StepReader {
  /** Ids delivered so far (held ids found again included), and ids generated but neither sent nor found. */
  private generated = 0
  private lost = 0
  /** The end of the text received so far: what held-ids.ts needs to follow the server's rule. */
  private recent = ''
  /** A stop id was delivered: the next result only ends the stream. */
  private stopped = false
  private promptTokens: number

  constructor(
    private readonly request: GenerateRequest,
    private readonly stops: readonly number[],
  ) {
    this.promptTokens = request.tokens.length
  }

  *read(json: Record<string, unknown>): Generator<EngineStep, boolean> {
    const { request } = this
    if (Number.isSafeInteger(json.tokens_evaluated)) this.promptTokens = json.tokens_evaluated as number
    if (this.stopped) {
      // The result after a stop id: the final one when llama.cpp stopped there too (its timings give the
      // cached tokens), else the next id, which is not read.
      yield step([], 'stop', withCache({ promptTokens: this.promptTokens, completionTokens: this.generated + this.lost }, json))
      return true
    }
    let tokens = tokenIds(ENGINE, json.tokens, 'tokens')
    // `tokens_predicted` counts every id generated so far: more than were delivered means ids were held
    // (see held-ids.ts), found again from this result's text, or reported.
    const predicted = Number.isSafeInteger(json.tokens_predicted) ? (json.tokens_predicted as number) : this.generated + tokens.length
    const diagnostics: EngineDiagnostic[] = []
    const missing = predicted - this.generated - this.lost - tokens.length
    if (missing > 0) {
      const found = tokens.length > 0 && typeof json.content === 'string' ? heldIds(json.content, tokens, missing, this.recent) : null
      if (found !== null) tokens = [...found, ...tokens]
      else {
        this.lost += missing
        diagnostics.push(idsLost(missing, json.stop === true))
      }
    }
    if (typeof json.content === 'string' && json.content !== '') this.recent = (this.recent + json.content).slice(-8)
    let logprobs = request.logprobs === undefined ? undefined : llamaCppLogprobs(json.completion_probabilities, tokens, request.logprobs)
    const stopAt = tokens.findIndex((id) => this.stops.includes(id))
    if (stopAt >= 0) {
      // A stop id: generation ends here, whatever llama.cpp does next. Its ids go out now; the step that
      // ends the stream waits for the next result (ending the read then closes the connection, and
      // llama.cpp releases the slot).
      tokens = tokens.slice(0, stopAt + 1)
      logprobs = logprobs?.slice(0, stopAt + 1)
      this.generated += tokens.length
      this.stopped = true
      if (tokens.length > 0 || diagnostics.length > 0) yield step(tokens, undefined, undefined, diagnostics, logprobs)
      if (json.stop !== true) return false
      yield step([], 'stop', withCache({ promptTokens: this.promptTokens, completionTokens: this.generated + this.lost }, json))
      return true
    }
    this.generated += tokens.length
    if (json.stop !== true) {
      if (tokens.length > 0 || diagnostics.length > 0) yield step(tokens, undefined, undefined, diagnostics, logprobs)
      return false
    }
    yield step(
      tokens,
      finishReasonOf(json.stop_type),
      withCache({ promptTokens: this.promptTokens, completionTokens: Math.max(predicted, this.generated + this.lost) }, json),
      diagnostics,
      logprobs,
    )
    return true
  }

  end(): EngineStep {
    // The stream closed after a stop id was delivered: it ends there.
    if (this.stopped) return step([], 'stop', { promptTokens: this.promptTokens, completionTokens: this.generated + this.lost })
    throw new EngineError('engine-protocol-error', `${ENGINE}: the stream ended without a final chunk`, { engine: ENGINE })
  }
}

/** Ids the server generated and never sent, which could not be found again: said, not lost silently. */
function idsLost(count: number, atEnd: boolean): EngineDiagnostic {
  const where = atEnd ? 'before the end of the stream (the text ended inside a character)' : 'and their bytes are not in its text'
  return { code: 'engine-ids-lost', count, message: `${ENGINE} generated ${count} id(s) it did not stream ${where}` }
}

/** The prompt tokens llama.cpp reused from the slot's cache (`timings.cache_n`, on the final result), when it says. */
function withCache(usage: EngineUsage, json: Record<string, unknown>): EngineUsage {
  const timings = json.timings
  if (isRecord(timings) && Number.isSafeInteger(timings.cache_n) && (timings.cache_n as number) >= 0)
    usage.cachedPromptTokens = timings.cache_n as number
  return usage
}

/** An older server's `error: {…}` line (see the top of this file), an event named `error`. */
function lineError(event: SseEvent): EngineError | null {
  if (event.event !== 'error') return null
  const { data } = event
  let json: unknown = null
  try {
    json = JSON.parse(data)
  } catch {
    // Not JSON: the raw text below.
  }
  const message = openAIStyleMessage(isRecord(json) && json.error === undefined ? { error: json } : json) ?? data.slice(0, 1000)
  return new EngineError('engine-stream-error', `${ENGINE} failed mid-stream: ${message}`, { engine: ENGINE, engineMessage: message })
}

function finishReasonOf(stopType: unknown): EngineFinishReason {
  // 'limit': n_predict or the context ran out. 'eos': an end-of-generation token that is not one of the
  // request's stop ids (those end the loop above), e.g. `<|end|>` in an older build: llama.cpp did stop
  // there, and the adapters read the terminator. 'word' (no stop strings are sent) and 'none' likewise end it.
  return stopType === 'limit' ? 'length' : 'stop'
}
