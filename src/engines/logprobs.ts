/**
 * Log probabilities as each engine sends them → `TokenLogprob`s aligned with a step's ids (one per id, null
 * where the engine gave none). Every reader checks that the engine's entry is for the id it stands beside, so
 * a shifted list never lends one id's probability to another. Sources followed are named at each reader.
 */
import { isRecord } from '../base/records'
import { isTokenId } from './request'
import type { TokenLogprob } from './types'

type Json = Record<string, unknown>

const isLogprob = (value: unknown): value is number => typeof value === 'number' && !Number.isNaN(value) && value <= 0

/**
 * The `count` likeliest of `candidates`, likeliest first (equals in the engine's order: the sort is stable);
 * an alternative that is no id of the model is left out rather than passed on.
 */
function topOf(candidates: { id: number; logprob: number }[], count: number): { id: number; logprob: number }[] {
  return candidates
    .filter((candidate) => isTokenId(candidate.id))
    .sort((a, b) => b.logprob - a.logprob)
    .slice(0, count)
}

/** vLLM's id placeholder with `return_tokens_as_token_ids` (vllm/entrypoints/utils.py `format_token_id_placeholder`). */
function idOfPlaceholder(text: unknown): number | null {
  if (typeof text !== 'string' || !text.startsWith('token_id:')) return null
  const id = Number(text.slice('token_id:'.length))
  return Number.isSafeInteger(id) && id >= 0 ? id : null
}

/**
 * vLLM `/v1/completions` with `logprobs` and `return_tokens_as_token_ids`: the chunk's `choices[0].logprobs`
 * is `{ tokens: ['token_id:N', …], token_logprobs: [lp, …], top_logprobs: [{ 'token_id:N': lp, … }, …] }`
 * for the chunk's ids (vllm/entrypoints/openai/completion/serving.py `_create_completion_logprobs`; -inf
 * written as -9999.0).
 */
export function vllmLogprobs(logprobs: unknown, tokens: readonly number[], count: number): (TokenLogprob | null)[] {
  const entries = isRecord(logprobs) ? logprobs : {}
  const ids = Array.isArray(entries.tokens) ? entries.tokens : []
  const values = Array.isArray(entries.token_logprobs) ? entries.token_logprobs : []
  const tops = Array.isArray(entries.top_logprobs) ? entries.top_logprobs : []
  return tokens.map((id, i) => {
    if (idOfPlaceholder(ids[i]) !== id || !isLogprob(values[i])) return null
    const top = isRecord(tops[i])
      ? Object.entries(tops[i] as Json).flatMap(([text, logprob]) => {
          const candidate = idOfPlaceholder(text)
          return candidate !== null && isLogprob(logprob) ? [{ id: candidate, logprob }] : []
        })
      : []
    return { logprob: values[i] as number, top: topOf(top, count) }
  })
}

/** SGLang's `[logprob, id, text]` triple (python/sglang/srt/managers/tokenizer_manager.py `detokenize_logprob_tokens`). */
function tripleOf(value: unknown): { id: number; logprob: number } | null {
  if (!Array.isArray(value) || !isLogprob(value[0]) || !Number.isSafeInteger(value[1])) return null
  return { id: value[1] as number, logprob: value[0] }
}

/**
 * SGLang `/generate` with `return_logprob` and `top_logprobs_num`: `meta_info.output_token_logprobs` holds a
 * triple per output id and `output_top_logprobs` a list of triples per id, for all ids so far (cumulative
 * streaming) or this output's (incremental); either way the last entries are the newest, so `fresh` (this
 * step's ids, the newest) are matched from the end.
 */
export function sglangLogprobs(meta: Json, fresh: readonly number[], count: number): (TokenLogprob | null)[] {
  const own = Array.isArray(meta.output_token_logprobs) ? meta.output_token_logprobs : []
  const tops = Array.isArray(meta.output_top_logprobs) ? meta.output_top_logprobs : []
  const offset = own.length - fresh.length
  return fresh.map((id, i) => {
    const entry = tripleOf(own[offset + i])
    if (entry === null || entry.id !== id) return null
    const top = tops.length === own.length && Array.isArray(tops[offset + i]) ? (tops[offset + i] as unknown[]) : []
    return {
      logprob: entry.logprob,
      top: topOf(
        top.map(tripleOf).filter((t) => t !== null),
        count,
      ),
    }
  })
}

/**
 * llama.cpp `/completion` with `n_probs`: each result's `completion_probabilities` is a list of `{ id, token,
 * bytes, logprob, top_logprobs: [{ id, token, bytes, logprob }] }` for its ids (tools/server/server-task.cpp,
 * `probs_vector_to_json`). Ids found again by held-ids.ts come without one.
 */
export function llamaCppLogprobs(probabilities: unknown, tokens: readonly number[], count: number): (TokenLogprob | null)[] {
  const entries = (Array.isArray(probabilities) ? probabilities : []).filter(isRecord)
  // The result's own ids are its last ones (held ids found again come first).
  const offset = tokens.length - entries.length
  return tokens.map((id, i) => {
    const entry = i >= offset ? entries[i - offset] : undefined
    if (entry === undefined || entry.id !== id || !isLogprob(entry.logprob)) return null
    const top = (Array.isArray(entry.top_logprobs) ? entry.top_logprobs : []).flatMap((candidate) =>
      isRecord(candidate) && Number.isSafeInteger(candidate.id) && isLogprob(candidate.logprob)
        ? [{ id: candidate.id as number, logprob: candidate.logprob }]
        : [],
    )
    return { logprob: entry.logprob, top: topOf(top, count) }
  })
}
