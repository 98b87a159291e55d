//! What the Rust benchmarks share (crate/core/benches/core.rs, and benchmark/rust-compare through a
//! `#[path]` module): the corpus file, one replay of it through the core, and the timing loop.

use std::sync::Arc;
use std::time::Duration;

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

/// Median tokens/s of 7 samples of `run`, each repeated for about 150 ms of CPU time.
#[allow(dead_code)] // used by benchmark/rust-compare
pub fn measure(tokens: usize, run: impl FnMut() -> usize) -> f64 {
    let mut run = run;
    measure_alternately(tokens, &mut [&mut run])[0]
}

/// Like `measure` for several functions over the same `tokens`, their samples taken in turn (a, b, a, b, …)
/// so that a machine busy with other work in one moment weighs on all of them alike.
pub fn measure_alternately(tokens: usize, runs: &mut [&mut dyn FnMut() -> usize]) -> Vec<f64> {
    let rounds: Vec<u32> = runs.iter_mut().map(|run| rounds_for(&mut **run, Duration::from_millis(150))).collect();
    let mut samples = vec![Vec::new(); runs.len()];
    for _ in 0..7 {
        for ((run, &rounds), samples) in runs.iter_mut().zip(&rounds).zip(&mut samples) {
            let elapsed = cpu_time(|| {
                for _ in 0..rounds {
                    std::hint::black_box(run());
                }
            });
            samples.push((tokens * rounds as usize) as f64 / elapsed.as_secs_f64());
        }
    }
    samples
        .into_iter()
        .map(|mut samples| {
            samples.sort_by(f64::total_cmp);
            samples[samples.len() / 2]
        })
        .collect()
}

/// How many calls of `run` take about `target`.
fn rounds_for(run: &mut dyn FnMut() -> usize, target: Duration) -> u32 {
    let mut rounds = 1;
    while cpu_time(|| {
        for _ in 0..rounds {
            std::hint::black_box(run());
        }
    }) < target
    {
        rounds *= 2;
    }
    rounds
}

/// The CPU time this thread spent in `work`: unlike the wall clock, it leaves out the time the thread
/// waited for a core, which on a shared machine is most of the noise.
fn cpu_time(work: impl FnOnce()) -> Duration {
    let start = thread_cpu_clock();
    work();
    thread_cpu_clock() - start
}

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn thread_cpu_clock() -> Duration {
    #[repr(C)]
    struct Timespec {
        seconds: i64,
        nanoseconds: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, time: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut time = Timespec { seconds: 0, nanoseconds: 0 };
    // SAFETY: `time` is a valid, writable timespec (two 64-bit fields on the 64-bit Linux targets we
    // benchmark on), and clock_gettime writes nothing else.
    let status = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut time) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(time.seconds as u64, time.nanoseconds as u32)
}

/// Elsewhere: the wall clock since the first call.
#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn thread_cpu_clock() -> Duration {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed()
}
