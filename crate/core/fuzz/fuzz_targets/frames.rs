//! `StreamPool::step_frames` (the frame lane) against separate `StreamParser`s. Several fuzzer-chosen
//! streams are stepped in interleaved batches; what the lane leaves to the caller is pushed on the same
//! stream as an adapter would, which then sets a lane template (or none, or a silent one) at random. Each
//! stream must give exactly what the same batches give a parser of its own: every message's text (from
//! the frames, the lane's text and the caller's records together), every diagnostic, the strict error,
//! and every token accounted for. The frames must decode to the lane's text.
//!
//! Input layout:
//! - byte 0: flags. bit 0 strict, bits 1–2: number of streams − 1 (1 to 4).
//! - byte 1: `max_header_tokens` = 1 + byte % 64.
//! - byte 2: seed of the batch sizes and of the templates chosen.
//! - the rest: tokens (see `common::decode_tokens`), dealt to the streams in turn.

#![no_main]

use std::collections::BTreeMap;

use harmony_stream_core::compact::{capacity, CLOSE, HEADER_SLOTS, OPEN, RECORD_SLOTS, STATUS_OK, STATUS_PARSE_ERROR, TEXT};
use harmony_stream_core::output::{Diagnostic, Event};
use harmony_stream_core::pool::LaneReport;
use harmony_stream_core::{FrameSlot, FrameTemplate, PushError, State, StreamParser, StreamPool};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;
use common::{decode_tokens, streams_and_options, vocabulary};

/// What a stream gave: the text of each message, its diagnostics, and the strict error if one stopped it.
#[derive(Debug, Default, PartialEq)]
struct Outcome {
    texts: BTreeMap<u32, String>,
    diagnostics: Vec<Diagnostic>,
    error: Option<(&'static str, u64)>,
}

/// The frames of the lane, one per step: `<` the text as a JSON string `>`.
fn template() -> FrameTemplate {
    FrameTemplate::new(vec!["<".into(), ">".into()], vec![FrameSlot::Text]).expect("one literal more than slots")
}

/// Undoes `write_json_string` on frames `<"…">` laid end to end.
fn decode_frames(mut bytes: &[u8]) -> String {
    let mut text = String::new();
    while let Some(rest) = bytes.strip_prefix(b"<\"") {
        let end = rest
            .iter()
            .enumerate()
            .position(|(i, &b)| b == b'"' && rest[..i].iter().rev().take_while(|&&c| c == b'\\').count() % 2 == 0)
            .expect("a closing quote");
        let literal = std::str::from_utf8(&rest[..end]).expect("frames are UTF-8");
        let mut chars = literal.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                text.push(c);
                continue;
            }
            match chars.next().expect("an escape") {
                'n' => text.push('\n'),
                'r' => text.push('\r'),
                't' => text.push('\t'),
                'b' => text.push('\u{8}'),
                'f' => text.push('\u{c}'),
                'u' => text.push(char::from_u32(u32::from_str_radix(&chars.by_ref().take(4).collect::<String>(), 16).unwrap()).unwrap()),
                c => text.push(c),
            }
        }
        bytes = rest[end + 1..].strip_prefix(b">").expect("a frame ends with >");
    }
    assert!(bytes.is_empty(), "frames are laid end to end");
    text
}

fuzz_target!(|data: &[u8]| {
    let &[flags, max_header, seed, ref rest @ ..] = data else { return };
    let (count, options) = streams_and_options(flags, max_header);
    let tokens = decode_tokens(rest);
    let mut random = u32::from(seed) | 1;
    let mut next = move |n: u32| {
        random = random.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        (random >> 16) % n
    };
    // Stream i gets tokens i, i + count, …, in batches of 0 to 4 tokens.
    let batches: Vec<Vec<Vec<u32>>> = (0..count)
        .map(|i| {
            let own: Vec<u32> = tokens.iter().skip(i).step_by(count).copied().collect();
            let mut out = Vec::new();
            let mut at = 0;
            while at < own.len() {
                let size = next(5) as usize;
                out.push(own[at..(at + size).min(own.len())].to_vec());
                at += size;
            }
            out
        })
        .collect();

    // Separate parsers; a stream stops at its strict error.
    let expected: Vec<Outcome> = batches
        .iter()
        .map(|stream| {
            let mut parser = StreamParser::new(vocabulary().clone(), options.clone());
            let mut outcome = Outcome::default();
            for call in stream.iter().map(|b| Some(b.as_slice())).chain([None]) {
                let result = match call {
                    Some(tokens) => parser.push(tokens),
                    None => parser.finish(),
                };
                let output = parser.output();
                let mut start = 0;
                for event in &output.events {
                    if let Event::Text { message, end } = *event {
                        let text: Vec<u16> = output.text.text.encode_utf16().collect();
                        outcome.texts.entry(message).or_default().push_str(&String::from_utf16(&text[start..end as usize]).unwrap());
                        start = end as usize;
                    }
                }
                outcome.diagnostics.extend(output.diagnostics.iter().cloned());
                match result {
                    Ok(()) => {}
                    Err(PushError::Parse(error)) => {
                        outcome.error = Some((error.code, error.token_offset));
                        break;
                    }
                    Err(error) => panic!("unexpected {error}"),
                }
            }
            outcome
        })
        .collect();

    let mut pool = StreamPool::new(vocabulary().clone());
    let ids: Vec<u32> = (0..count).map(|_| pool.open(options.clone()).expect("room")).collect();
    for &id in &ids {
        assert!(pool.claim(id, 7));
    }
    let mut actual: Vec<Outcome> = (0..count).map(|_| Outcome::default()).collect();
    let mut open: Vec<Option<u32>> = vec![None; count];
    let mut framed: Vec<String> = vec![String::new(); count];
    let mut silent: Vec<bool> = vec![false; count];
    let mut taken: Vec<usize> = vec![0; count];
    let mut stopped = vec![false; count];
    // The caller's call on a stream: its records' text by message, its diagnostics, its strict error.
    let serve = |pool: &mut StreamPool,
                 i: usize,
                 call: Option<&[u32]>,
                 actual: &mut Vec<Outcome>,
                 open: &mut Vec<Option<u32>>,
                 stopped: &mut Vec<bool>| {
        let mut out = vec![0; capacity(1, call.map_or(0, <[u32]>::len))];
        let text: Vec<u16> = pool.call_one(ids[i], call, &mut out).expect("an open stream").encode_utf16().collect();
        let status = out[harmony_stream_core::compact::AT_STATUS];
        for at in (HEADER_SLOTS..HEADER_SLOTS + RECORD_SLOTS * out[0] as usize).step_by(RECORD_SLOTS) {
            match out[at] {
                OPEN => open[i] = Some(out[at + 1]),
                TEXT => actual[i]
                    .texts
                    .entry(out[at + 1])
                    .or_default()
                    .push_str(&String::from_utf16(&text[out[at + 2] as usize..out[at + 3] as usize]).unwrap()),
                CLOSE => open[i] = None,
                _ => {}
            }
        }
        actual[i].diagnostics.extend(pool.take_diagnostics(ids[i]));
        if status == STATUS_PARSE_ERROR {
            let error = pool.take_error(ids[i]).expect("an error behind the status");
            actual[i].error = Some((error.code, error.token_offset));
            stopped[i] = true;
        } else {
            assert_eq!(status, STATUS_OK, "the caller's call went through");
        }
    };
    let steps = batches.iter().map(Vec::len).max().unwrap_or(0);
    for t in 0..steps {
        let live: Vec<usize> = (0..count).filter(|&i| t < batches[i].len() && !stopped[i]).collect();
        let streams: Vec<u32> = live.iter().map(|&i| ids[i]).collect();
        let mut step_tokens = Vec::new();
        let mut offsets = vec![0u32];
        for &i in &live {
            step_tokens.extend_from_slice(&batches[i][t]);
            offsets.push(step_tokens.len() as u32);
        }
        let (mut bytes, mut ends, mut slow) = (Vec::new(), vec![0u32; live.len()], Vec::new());
        pool.step_frames(7, &streams, &offsets, &step_tokens, &mut bytes, &mut ends, &mut slow).expect("a valid step");
        let left: BTreeMap<usize, u32> = slow.chunks(2).map(|pair| (pair[0] as usize, pair[1])).collect();
        for (k, &i) in live.iter().enumerate() {
            let start = if k == 0 { 0 } else { ends[k - 1] as usize };
            framed[i].push_str(&decode_frames(&bytes[start..ends[k] as usize]));
            // A batch the lane served is counted in the lane's report or progress, later.
            let Some(&report) = left.get(&k) else { continue };
            // The adapter's turn: what the lane did, then the batch itself, then a new template.
            taken[i] += (report & !LaneReport::TEXT) as usize;
            if let Some(progress) = pool.take_lane(ids[i]) {
                assert_eq!(report & LaneReport::TEXT != 0, !progress.text.is_empty(), "the report says whether text waits");
                taken[i] += progress.tokens as usize;
                if !silent[i] {
                    assert_eq!(std::mem::take(&mut framed[i]), progress.text, "the frames decode to the lane's text");
                }
                if !progress.text.is_empty() {
                    let message = open[i].expect("lane text belongs to the open message");
                    actual[i].texts.entry(message).or_default().push_str(&progress.text);
                }
            }
            serve(&mut pool, i, Some(&batches[i][t]), &mut actual, &mut open, &mut stopped);
            taken[i] += batches[i][t].len();
            let choice = next(4);
            if pool.state(ids[i]) == Some(State::Content) || next(2) == 0 {
                let lane = match choice {
                    0 => None,
                    3 => Some(FrameTemplate::new(vec!["".into()], Vec::new()).unwrap()),
                    _ => Some(template()),
                };
                silent[i] = choice == 3;
                assert!(pool.set_lane(ids[i], lane, 0), "a claimed stream takes a lane");
            }
        }
    }
    for i in 0..count {
        if stopped[i] {
            continue;
        }
        if let Some(progress) = pool.take_lane(ids[i]) {
            taken[i] += progress.tokens as usize;
            if !progress.text.is_empty() {
                actual[i].texts.entry(open[i].expect("an open message")).or_default().push_str(&progress.text);
            }
        }
        serve(&mut pool, i, None, &mut actual, &mut open, &mut stopped);
        let all: usize = batches[i].iter().map(Vec::len).sum();
        assert_eq!(taken[i], all, "stream {i}: every token is accounted for");
    }
    assert_eq!(actual, expected, "the lane changed what a stream gives (options {options:?})");
});
