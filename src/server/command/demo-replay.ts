/**
 * How the demo (`serve --engine replay` with the recordings the package ships) picks a recording for a request
 * that names none (`x-harmony-replay` names one): one that fits the request it answers. A recording that calls
 * a function answers only a prompt that offers functions (a client that offered none cannot run the call), and
 * a recording its engine cut short (no stop id at its end) answers none (a client would take the cut for a
 * failure of its own request). Round robin over those that fit; over all of them when none fits. An operator's
 * own recordings (`--replay FILE`) are served round robin as they are: they were recorded for a purpose.
 */
import { ordinaryEncoder } from '../../backend/encoder'
import { CALL } from '../../backend/tokens'
import type { ReplayGenerateRequest } from '../../engines/replay'
import { GENERATION_STOP_TOKENS } from '../../engines/request'

/** Picks the index of the recording a request gets, as `ReplayEngineOptions.pick`. */
export function fittingPick(completions: readonly (readonly number[])[]): (request: ReplayGenerateRequest, turn: number) => number {
  const indexes = completions.map((_, i) => i)
  const whole = indexes.filter((i) => GENERATION_STOP_TOKENS.includes(completions[i]!.at(-1) ?? -1))
  const answers = whole.filter((i) => !completions[i]!.includes(CALL))
  // The developer message of a prompt that offers functions declares them as `namespace functions {` (the
  // renderer's tool section, src/render); these are the ids that text takes there.
  const declaration = Array.from(ordinaryEncoder('js').encode('namespace functions'))
  return (request, turn) => {
    const fitting = offers(request.tokens, declaration) ? whole : answers
    const from = fitting.length > 0 ? fitting : indexes
    return from[turn % from.length]!
  }
}

/** Whether `tokens` hold `sequence`. */
function offers(tokens: ArrayLike<number>, sequence: readonly number[]): boolean {
  outer: for (let i = 0; i + sequence.length <= tokens.length; i++) {
    for (let j = 0; j < sequence.length; j++) if (tokens[i + j] !== sequence[j]) continue outer
    return true
  }
  return false
}
