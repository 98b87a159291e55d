//! What the Rust benchmarks share (crate/core/benches/core.rs, and benchmark/rust-compare through a
//! `#[path]` module): the corpus file, one replay of it through the core, and the timing loop.

use std::sync::Arc;
use std::time::{Duration, Instant};

use harmony_stream_core::{ParserOptions, StreamParser, Vocabulary};

/// The corpus written by benchmark/write-corpus.mts: a count, then each stream as a length and its ids (u32 LE).
pub fn read_corpus(path: &str) -> Vec<Vec<u32>> {
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
pub fn replay(vocabulary: &Arc<Vocabulary>, corpus: &[Vec<u32>], batch: usize) -> usize {
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

/// Median tokens/s of 7 samples of `run`, each repeated for about 150 ms.
pub fn measure(tokens: usize, mut run: impl FnMut() -> usize) -> f64 {
    let mut rounds = 1;
    while {
        let t = Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(run());
        }
        t.elapsed()
    } < Duration::from_millis(150)
    {
        rounds *= 2;
    }
    let mut samples: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..rounds {
                std::hint::black_box(run());
            }
            (tokens * rounds) as f64 / t.elapsed().as_secs_f64()
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[3]
}
