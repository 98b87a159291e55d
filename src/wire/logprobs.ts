/**
 * Log probabilities in OpenAI's shape (Chat `choices[].logprobs.content[]`, Responses `output_text` parts'
 * and deltas' `logprobs[]`): each token of the answer as text and bytes, its log probability, and the
 * likeliest alternatives at its position. The ids and numbers come from engine steps (`EngineStep.logprobs`
 * of `harmony-stream/engines`, described here by its shape: wire/ does not import serving/); the bytes from
 * the vocabulary. A token that is part of a character has that character's bytes only in part: `token` is
 * then their lossy decoding (U+FFFD), `bytes` exact, as OpenAI does.
 */
import { sharedVocabulary } from '../backend/js/vocabulary'
import { optionError } from '../base/options'
import type { HarmonyDiagnostic } from '../base/types'

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
function isStepLogprob(value: unknown): value is StepLogprob {
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
function outputLogprob(id: number, step: StepLogprob): OutputLogprob {
  return { ...entryOf(id, step.logprob), top_logprobs: step.top.map((alternative) => entryOf(alternative.id, alternative.logprob)) }
}

/**
 * The log probabilities of one completion's answer as an adapter reads them (its `logprobs` option): each answer
 * token's, kept until the text it makes is delivered with it, and a count of the answer tokens that had none.
 */
export class AnswerLogprobs {
  private pending: OutputLogprob[] = []
  private missing = 0

  private constructor(private readonly where: string) {}

  /**
   * For an adapter's options: null without `logprobs: true`. Refused with the options that move text away from
   * the token it came with (`stop`, text-call recovery, text input).
   */
  static of(options: { logprobs?: boolean; stop?: unknown; textToolCalls?: string; input?: string }, where: string): AnswerLogprobs | null {
    if (options.logprobs !== true) return null
    const conflict =
      options.stop !== undefined
        ? 'stop'
        : options.textToolCalls === 'recover'
          ? "textToolCalls: 'recover'"
          : options.input === 'text' || options.input === 'stripped'
            ? `input: '${options.input}'`
            : null
    if (conflict !== null) throw optionError(TypeError, `${where}: option 'logprobs' cannot be combined with ${conflict}`)
    return new AnswerLogprobs(where)
  }

  /** Answer token `id`, the `i`-th id of an engine step whose log probabilities are `step` (null: it had none). */
  read(id: number, step: readonly (StepLogprob | null)[] | null, i: number): void {
    const logprob = step?.[i] ?? null
    if (logprob === null) this.missing++
    else if (!isStepLogprob(logprob))
      throw new TypeError(`${this.where}: logprobs[${i}] of the engine step must be { logprob, top: [{ id, logprob }] } or null`)
    else this.pending.push(outputLogprob(id, logprob))
  }

  /** Whether answer tokens wait for their text (a character cut by the end never brings it). */
  get waiting(): boolean {
    return this.pending.length > 0
  }

  /** The log probabilities of the answer text being delivered now. */
  take(): OutputLogprob[] {
    const taken = this.pending
    this.pending = []
    return taken
  }

  /** At the end: the `logprobs-missing` diagnostic, when answer tokens came without a log probability. */
  missingDiagnostic(tokenOffset: number): HarmonyDiagnostic | null {
    if (this.missing === 0) return null
    return {
      code: 'logprobs-missing',
      message: `${this.missing} token(s) of the answer came without a log probability from the engine: left out of logprobs`,
      tokenOffset,
    }
  }
}
