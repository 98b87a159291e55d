/**
 * Token ids of the o200k_harmony encoding and the Harmony special tokens. Mirrors crate/core/src/tokens.rs
 * (__test__/parser/constants.test.mts compares the two).
 *
 * Ordinary text tokens are the o200k_base ranks 0..=199_997; every id in 199_998..=201_088 is special.
 * Names follow the reference parser, not tiktoken: 200_018 is `<|reserved_200018|>` and 201_088 exists.
 */
import { TERMINATOR_CALL, TERMINATOR_END, TERMINATOR_NONE, TERMINATOR_RETURN } from './protocol'

export const FIRST_SPECIAL = 199_998
export const LAST_TOKEN = 201_088
export const VOCAB_SIZE = LAST_TOKEN + 1

export const RETURN = 200_002
export const CONSTRAIN = 200_003
export const CHANNEL = 200_005
export const START = 200_006
export const END = 200_007
export const MESSAGE = 200_008
export const CALL = 200_012

/** `<|startoftext|>`: mirrors START_OF_TEXT in crate/core/src/tokens.rs. @mirrored */
export const START_OF_TEXT = 199_998
/** `<|endoftext|>`: mirrors END_OF_TEXT in crate/core/src/tokens.rs. */
export const END_OF_TEXT = 199_999
/**
 * From here to LAST_TOKEN, an id without a name of its own is `<|reserved_{id}|>`. Mirrors FIRST_RESERVED in
 * crate/core/src/tokens.rs.
 * @mirrored
 */
export const FIRST_RESERVED = 200_000

/** The terminator code of a stop token, or TERMINATOR_NONE for any other token. */
export function terminatorOf(token: number): number {
  switch (token) {
    case END:
      return TERMINATOR_END
    case RETURN:
      return TERMINATOR_RETURN
    case CALL:
      return TERMINATOR_CALL
    default:
      return TERMINATOR_NONE
  }
}

const NAMED_SPECIALS: Record<number, string> = {
  [START_OF_TEXT]: '<|startoftext|>',
  [END_OF_TEXT]: '<|endoftext|>',
  [RETURN]: '<|return|>',
  [CONSTRAIN]: '<|constrain|>',
  [CHANNEL]: '<|channel|>',
  [START]: '<|start|>',
  [END]: '<|end|>',
  [MESSAGE]: '<|message|>',
  [CALL]: '<|call|>',
}

/** The literal text of a special token, e.g. `<|channel|>`; null for ordinary ids. */
export function specialTokenText(id: number): string | null {
  const named = NAMED_SPECIALS[id]
  if (named !== undefined) return named
  if (id >= FIRST_RESERVED && id <= LAST_TOKEN) return `<|reserved_${id}|>`
  return null
}
