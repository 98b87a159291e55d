/**
 * Log probabilities in OpenAI's shape (Chat `choices[].logprobs.content[]`, Responses `output_text` parts'
 * and deltas' `logprobs[]`): each token of the answer as text and bytes, its log probability, and the
 * likeliest alternatives at its position. The ids and numbers come from engine steps (`EngineStep.logprobs`
 * of `harmony-stream/engines`, described here by its shape: wire/ does not import serving/); the bytes from
 * the vocabulary. A token that is part of a character has that character's bytes only in part: `token` is
 * then their lossy decoding (U+FFFD), `bytes` exact, as OpenAI does.
 */
import { sharedVocabulary } from '../backend/js/vocabulary'

/** One engine step's log probability of an id (`TokenLogprob` of `harmony-stream/engines`). */
export interface StepLogprob {
  logprob: number
  top: readonly { id: number; logprob: number }[]
}

/** OpenAI's log probability of one token of the output. */
export interface OutputLogprob {
  token: string
  logprob: number
  bytes: number[]
  top_logprobs: { token: string; logprob: number; bytes: number[] }[]
}

/** Whether `value` is a step's log probability of an id (the adapters check each entry they read). */
export function isStepLogprob(value: unknown): value is StepLogprob {
  const entry = value as StepLogprob | null
  return (
    entry !== null &&
    typeof entry === 'object' &&
    typeof entry.logprob === 'number' &&
    Array.isArray(entry.top) &&
    entry.top.every(
      (t) =>
        t !== null &&
        typeof t === 'object' &&
        Number.isSafeInteger(t.id) &&
        sharedVocabulary().contains(t.id) &&
        typeof t.logprob === 'number',
    )
  )
}

const decoder = new TextDecoder('utf-8', { ignoreBOM: true })

/** A token as OpenAI writes it: its text, its log probability, its bytes (in that order). */
function entryOf(id: number, logprob: number): { token: string; logprob: number; bytes: number[] } {
  const bytes = sharedVocabulary().tokenBytes(id)
  return { token: decoder.decode(bytes), logprob, bytes: Array.from(bytes) }
}

/** Token `id` with the engine's log probabilities of it, in OpenAI's shape. */
export function outputLogprob(id: number, step: StepLogprob): OutputLogprob {
  return { ...entryOf(id, step.logprob), top_logprobs: step.top.map((alternative) => entryOf(alternative.id, alternative.logprob)) }
}
