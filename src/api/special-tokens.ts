/** Token ids a gateway needs besides the parser, e.g. to configure its sampler. */
import { CALL, CHANNEL, CONSTRAIN, END, MESSAGE, RETURN, START } from '../backend/tokens'

export const HarmonyTokens = Object.freeze({
  start: START,
  end: END,
  message: MESSAGE,
  channel: CHANNEL,
  constrain: CONSTRAIN,
  return: RETURN,
  call: CALL,
} as const)

/** Tokens that end a message: `<|return|>`, `<|end|>`, `<|call|>`. */
export const STOP_TOKENS: readonly number[] = Object.freeze([RETURN, END, CALL])

/**
 * Tokens that should stop sampling: `<|return|>` and `<|call|>`. `<|end|>` only separates messages within
 * one completion (e.g. analysis then final) and must not stop generation.
 */
export const ASSISTANT_ACTION_STOP_TOKENS: readonly number[] = Object.freeze([RETURN, CALL])
