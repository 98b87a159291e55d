/**
 * What the adapters' `push`/`pushSse` take: token ids, Harmony text (adapters made with `input: 'text'`), or
 * an engine step as `harmony-stream/engines` yields it, `{ tokens, finishReason?, usage? }` (described here
 * by its shape: wire/ does not import serving/). Anything else is a TypeError naming what came, so that a
 * decode loop passing the wrong thing fails at once instead of losing the answer.
 */

import { describe } from '../base/options'
import { isRecord } from '../base/records'
import type { StepLogprob } from './logprobs'

export type TokenIds = Uint32Array | readonly number[]

/** How the engine ended generation: a stop token, its token limit, or an abort. */
export type StepFinishReason = 'stop' | 'length' | 'abort'

/** One engine step (`EngineStep` of `harmony-stream/engines`): the ids since the previous step, and how generation ended. */
export interface EngineStepInput {
  tokens: TokenIds
  /** On the last step: `length` makes `finish()` report the completion as cut (`finish_reason: 'length'`, `response.incomplete`). */
  finishReason?: StepFinishReason
  /**
   * As the engine reports it: its `promptTokens` stand in for the `promptTokens`/`inputTokens` option when that
   * is not given; `cachedPromptTokens` becomes usage's `cached_tokens`.
   */
  usage?: { promptTokens: number; completionTokens: number; cachedPromptTokens?: number }
  /** What the engine client could not deliver (`engine-ids-lost`): kept in the adapter's `diagnostics`. */
  diagnostics?: readonly { code: string; message: string }[]
  /** With the adapters' `logprobs` option: one per id of `tokens` (null where the engine gave none). */
  logprobs?: readonly (StepLogprob | null)[]
}

/** What `push`/`pushSse` take. */
export type AdapterInput = TokenIds | string | EngineStepInput

const FINISH_REASONS: readonly unknown[] = ['stop', 'length', 'abort']

const isCount = (value: unknown) => Number.isSafeInteger(value) && (value as number) >= 0

/** Token ids in a typed array other than a Uint32Array: the parser checks and converts them. */
function isOtherIdArray(input: unknown): boolean {
  return ArrayBuffer.isView(input) && !(input instanceof DataView)
}

/**
 * `input` (not a Uint32Array, an array or a string: those are taken as they are) as an engine step, checked;
 * null for token ids in another typed array. `where` names the call in the error (`ChatCompletionsStream.push`).
 */
export function engineStepOf(input: unknown, where: string): EngineStepInput | null {
  if (isOtherIdArray(input)) return null
  if (!isRecord(input) || Array.isArray(input) || !('tokens' in input)) {
    const what =
      isRecord(input) && !Array.isArray(input)
        ? `an object without 'tokens' (keys: ${Object.keys(input).join(', ') || 'none'})`
        : describe(input)
    throw new TypeError(
      `${where} takes token ids (a Uint32Array or an array of ids), an engine step { tokens, finishReason?, usage? }, or Harmony text (input: 'text'), not ${what}`,
    )
  }
  const { tokens, finishReason, usage } = input
  if (!(tokens instanceof Uint32Array) && !Array.isArray(tokens) && !isOtherIdArray(tokens))
    throw new TypeError(`${where}: the engine step's tokens must be a Uint32Array or an array of token ids, not ${describe(tokens)}`)
  if (finishReason !== undefined && !FINISH_REASONS.includes(finishReason))
    throw new TypeError(`${where}: the engine step's finishReason must be "stop", "length" or "abort", not ${describe(finishReason)}`)
  if (
    usage !== undefined &&
    !(isRecord(usage) && isCount(usage.promptTokens) && (usage.cachedPromptTokens === undefined || isCount(usage.cachedPromptTokens)))
  )
    throw new TypeError(
      `${where}: the engine step's usage must be { promptTokens, completionTokens, cachedPromptTokens? } with counts, not ${describe(usage)}`,
    )
  const { diagnostics } = input
  if (
    diagnostics !== undefined &&
    !(Array.isArray(diagnostics) && diagnostics.every((d) => isRecord(d) && typeof d.code === 'string' && typeof d.message === 'string'))
  )
    throw new TypeError(`${where}: the engine step's diagnostics must be an array of { code, message }, not ${describe(diagnostics)}`)
  const { logprobs } = input
  // Each entry is read only for an answer token the adapter asked for: checked there by shape, here by count.
  if (logprobs !== undefined && !(Array.isArray(logprobs) && logprobs.length === (tokens as ArrayLike<number>).length))
    throw new TypeError(`${where}: the engine step's logprobs must be an array with one entry (or null) per id, not ${describe(logprobs)}`)
  return input as unknown as EngineStepInput
}
