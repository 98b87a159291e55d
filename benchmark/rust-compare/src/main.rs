//! The Rust core beside the openai-harmony crate's `StreamableParser` (the reference parser), on the
//! benchmark corpus, in one run. The reference consumes one token per call, as vLLM and SGLang drive it;
//! the core is measured at batch 1 and on whole streams.
//!
//! Run with `npm run bench:rust-compare`, which writes the corpus and sets HARMONY_BENCH_CORPUS and
//! TIKTOKEN_ENCODINGS_BASE (a folder holding gpt-tokenizer's `o200k_base.tiktoken`, so nothing is downloaded).

use std::sync::Arc;

use harmony_stream_core::Vocabulary;
use openai_harmony::chat::Role;
use openai_harmony::{load_harmony_encoding, HarmonyEncoding, HarmonyEncodingName, StreamableParser};

#[path = "../../../crate/core/benches/support/mod.rs"]
mod support;
use support::{measure, read_corpus, replay};

/// The reference as gateways drive it: one `process` per token and the content delta read after each.
fn reference(encoding: &HarmonyEncoding, corpus: &[Vec<u32>]) -> usize {
    let mut sink = 0;
    for stream in corpus {
        let mut parser = StreamableParser::new(encoding.clone(), Some(Role::Assistant)).expect("parser");
        for &token in stream {
            // The corpus is well formed; a rare reference error (it is stricter) ends that completion.
            if parser.process(token).is_err() {
                break;
            }
            sink += parser.last_content_delta().ok().flatten().map_or(0, |d| d.len());
        }
        let _ = parser.process_eos();
        sink += parser.messages().len();
    }
    sink
}

fn main() {
    let corpus = read_corpus(&std::env::var("HARMONY_BENCH_CORPUS").expect("HARMONY_BENCH_CORPUS (run `npm run bench:rust-compare`)"));
    let base = std::env::var("TIKTOKEN_ENCODINGS_BASE").expect("TIKTOKEN_ENCODINGS_BASE (run `npm run bench:rust-compare`)");
    let tokens: usize = corpus.iter().map(Vec::len).sum();
    let vocabulary = Arc::new(Vocabulary::from_tiktoken(&std::fs::read(format!("{base}/o200k_base.tiktoken")).expect("vocabulary")).expect("valid"));
    let encoding = load_harmony_encoding(HarmonyEncodingName::HarmonyGptOss).expect("the reference encoding (TIKTOKEN_ENCODINGS_BASE)");
    println!("corpus: {} completions, {tokens} tokens\n", corpus.len());
    let reference_tps = measure(tokens, || reference(&encoding, &corpus));
    println!("| parser | M tokens/s | ns/token | × openai-harmony crate |");
    println!("|---|---:|---:|---:|");
    println!("| openai-harmony 0.0.8 StreamableParser, token by token | {:.2} | {:.1} | 1.0 |", reference_tps / 1e6, 1e9 / reference_tps);
    for (label, batch) in [("batch 1", 1), ("batch 16", 16), ("whole stream", usize::MAX)] {
        let tps = measure(tokens, || replay(&vocabulary, &corpus, batch));
        println!("| harmony-stream core, {label} | {:.1} | {:.1} | {:.1} |", tps / 1e6, 1e9 / tps, tps / reference_tps);
    }
}
