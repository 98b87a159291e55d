//! Token ids of the o200k_harmony encoding and the Harmony special tokens.
//!
//! Ordinary text tokens are the o200k_base ranks 0..=199_997. Every id in 199_998..=201_088 is a special
//! token. Names follow the reference parser (openai/harmony), not tiktoken: 200_018 is
//! `<|reserved_200018|>` (tiktoken calls it `<|endofprompt|>`) and 201_088 exists.
//!
//! `src/backend/tokens.ts` mirrors these ids; `__test__/parser/constants.test.mts` compares the two.

pub const FIRST_SPECIAL: u32 = 199_998;
pub const LAST_TOKEN: u32 = 201_088;
/// Number of ids in the vocabulary (0..=LAST_TOKEN).
pub const VOCAB_SIZE: usize = LAST_TOKEN as usize + 1;

pub const RETURN: u32 = 200_002;
pub const CONSTRAIN: u32 = 200_003;
pub const CHANNEL: u32 = 200_005;
pub const START: u32 = 200_006;
pub const END: u32 = 200_007;
pub const MESSAGE: u32 = 200_008;
pub const CALL: u32 = 200_012;

/// `<|startoftext|>` and `<|endoftext|>`: special, never met in a completion, named for `special_token_text`.
/// Mirror START_OF_TEXT and END_OF_TEXT in src/backend/tokens.ts.
pub const START_OF_TEXT: u32 = 199_998;
pub const END_OF_TEXT: u32 = 199_999;
/// From here to `LAST_TOKEN`, an id without a name of its own is `<|reserved_{id}|>`. Mirrors FIRST_RESERVED
/// in src/backend/tokens.ts.
pub const FIRST_RESERVED: u32 = 200_000;

/// How a message was closed. The numeric codes are part of the backend protocol shared with TypeScript
/// (TERMINATOR_* in src/backend/protocol.ts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Terminator {
    End = 1,
    Return = 2,
    Call = 3,
}

/// The terminator code of a message closed by the end of the stream (no stop token): a CLOSE record's code
/// when the `Option<Terminator>` is `None`. Mirrors TERMINATOR_NONE in src/backend/protocol.ts.
pub const TERMINATOR_NONE: u32 = 0;

impl Terminator {
    pub fn of_token(token: u32) -> Option<Terminator> {
        match token {
            END => Some(Terminator::End),
            RETURN => Some(Terminator::Return),
            CALL => Some(Terminator::Call),
            _ => None,
        }
    }
}

/// The literal text of a special token, e.g. `<|channel|>`; `None` for ordinary ids.
pub fn special_token_text(id: u32) -> Option<String> {
    let name = match id {
        START_OF_TEXT => "<|startoftext|>",
        END_OF_TEXT => "<|endoftext|>",
        RETURN => "<|return|>",
        CONSTRAIN => "<|constrain|>",
        CHANNEL => "<|channel|>",
        START => "<|start|>",
        END => "<|end|>",
        MESSAGE => "<|message|>",
        CALL => "<|call|>",
        FIRST_RESERVED..=LAST_TOKEN => return Some(format!("<|reserved_{id}|>")),
        _ => return None,
    };
    Some(name.to_owned())
}
