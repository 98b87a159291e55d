//! `StreamPool` against separate `StreamParser`s: several fuzzer-chosen streams, served in interleaved
//! steps of fuzzer-chosen sizes, must give each stream exactly what the same batches give a parser of its
//! own, as read back from the compact output (messages with their header strings, text, terminators,
//! diagnostics and strict errors).
//!
//! Input layout:
//! - byte 0: flags. bit 0 strict, bits 1–2: number of streams − 1 (1 to 4).
//! - byte 1: `max_header_tokens` = 1 + byte % 64.
//! - byte 2: batch-size seed.
//! - the rest: tokens (see `common::decode_tokens`), dealt to the streams in turn.

#![no_main]

use harmony_stream_core::compact::{
    capacity, write_records, NameTable, CLOSE, FIELDS, HEADER_SLOTS, NOT_INTERNED, OPEN, RECORD_SLOTS, STATUS_PARSE_ERROR, STREAM, TEXT,
};
use harmony_stream_core::output::Diagnostic;
use harmony_stream_core::{PushError, StreamParser, StreamPool};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;
use common::{decode_tokens, streams_and_options, vocabulary};

/// What a client reads from one stream's records, with names resolved and text sliced.
#[derive(Debug, PartialEq)]
enum Item {
    Open { message: u32, fields: [Option<String>; 5] },
    Text { message: u32, text: String },
    Close { message: u32, terminator: u32 },
    Diagnostics(Vec<Diagnostic>),
    Error { code: &'static str, offset: u64 },
}

/// The string behind an id; a name too long to intern (`NOT_INTERNED`) reads as a marker, the same on
/// both sides (the table fills up only after 65,536 names, out of reach here).
fn name(names: &[Box<str>], id: u32) -> Option<String> {
    match id {
        0 => None,
        NOT_INTERNED => Some("(not interned)".to_owned()),
        id => Some(names[id as usize - 1].to_string()),
    }
}

/// Reads the records `out[from..to]`, whose text offsets index `text` (UTF-16).
fn read(out: &[u32], from: usize, to: usize, text: &[u16], names: &[Box<str>], items: &mut Vec<Item>) {
    let mut at = from;
    while at < to {
        let r = &out[at..at + RECORD_SLOTS];
        match r[0] {
            OPEN => {
                let f = &out[at + RECORD_SLOTS..at + 2 * RECORD_SLOTS];
                assert_eq!(f[0], FIELDS, "OPEN without FIELDS");
                let fields = [name(names, r[2]), name(names, r[3]), name(names, f[1]), name(names, f[2]), name(names, f[3])];
                items.push(Item::Open { message: r[1], fields });
                at += RECORD_SLOTS;
            }
            TEXT => {
                let slice = String::from_utf16(&text[r[2] as usize..r[3] as usize]).expect("a text range splits a character");
                items.push(Item::Text { message: r[1], text: slice });
            }
            CLOSE => items.push(Item::Close { message: r[1], terminator: r[2] }),
            kind => panic!("unexpected record kind {kind}"),
        }
        at += RECORD_SLOTS;
    }
}

fuzz_target!(|data: &[u8]| {
    let &[flags, max_header, seed, ref rest @ ..] = data else { return };
    let (count, options) = streams_and_options(flags, max_header);
    let tokens = decode_tokens(rest);
    // Stream i gets tokens i, i + count, …, in batches of 1 to 5 tokens.
    let batches: Vec<Vec<Vec<u32>>> = (0..count)
        .map(|i| {
            let own: Vec<u32> = tokens.iter().skip(i).step_by(count).copied().collect();
            let mut out = Vec::new();
            let mut at = 0;
            let mut step = usize::from(seed) + i;
            while at < own.len() {
                let size = 1 + step % 5;
                out.push(own[at..(at + size).min(own.len())].to_vec());
                at += size;
                step = step.wrapping_mul(31).wrapping_add(7);
            }
            out
        })
        .collect();

    // Separate parsers, each with its own name table, read the same way. After a strict error the rest of
    // that batch is not consumed, and neither side serves it again.
    let expected: Vec<Vec<Item>> = batches
        .iter()
        .map(|stream| {
            let mut parser = StreamParser::new(vocabulary().clone(), options.clone());
            let mut names = NameTable::default();
            let mut items = Vec::new();
            let calls = stream.iter().map(|b| Some(b.as_slice())).chain([None]);
            for call in calls {
                let result = match call {
                    Some(tokens) => parser.push(tokens),
                    None => parser.finish(),
                };
                let output = parser.output();
                let mut out = vec![0; capacity(1, call.map_or(0, <[u32]>::len))];
                let end = write_records(output, &mut names, &mut out, 0, 0).expect("capacity");
                let text: Vec<u16> = output.text.text.encode_utf16().collect();
                read(&out, 0, end, &text, names.names_from(0), &mut items);
                items.push(Item::Diagnostics(output.diagnostics.clone()));
                match result {
                    Ok(()) => {}
                    Err(PushError::Parse(error)) => items.push(Item::Error { code: error.code, offset: error.token_offset }),
                    Err(error) => panic!("unexpected {error}"),
                }
            }
            items
        })
        .collect();

    let mut pool = StreamPool::new(vocabulary().clone());
    let ids: Vec<u32> = (0..count).map(|_| pool.open(options.clone()).expect("room")).collect();
    let mut actual: Vec<Vec<Item>> = (0..count).map(|_| Vec::new()).collect();
    let steps = batches.iter().map(Vec::len).max().unwrap_or(0);
    for t in 0..=steps {
        // Step t serves batch t of every stream that has one; the last step finishes them all.
        let live: Vec<usize> = if t < steps { (0..count).filter(|&i| t < batches[i].len()).collect() } else { (0..count).collect() };
        let streams: Vec<u32> = live.iter().map(|&i| ids[i]).collect();
        let mut tokens = Vec::new();
        let mut offsets = vec![0u32];
        for &i in &live {
            if t < steps {
                tokens.extend_from_slice(&batches[i][t]);
            }
            offsets.push(tokens.len() as u32);
        }
        let mut out = vec![0; capacity(live.len(), tokens.len())];
        let text: Vec<u16> = if t < steps {
            pool.step(&streams, &offsets, &tokens, &mut out).expect("a valid step").encode_utf16().collect()
        } else {
            pool.finish(&streams, &mut out).expect("a valid finish").encode_utf16().collect()
        };
        let end = HEADER_SLOTS + RECORD_SLOTS * out[0] as usize;
        let mut starts: Vec<usize> = (HEADER_SLOTS..end).step_by(RECORD_SLOTS).filter(|&at| out[at] == STREAM).collect();
        assert_eq!(starts.len(), live.len(), "one STREAM record per stream served");
        starts.push(end);
        for (k, &i) in live.iter().enumerate() {
            let at = starts[k];
            assert_eq!(out[at + 1], ids[i], "STREAM records come in the order of the streams");
            let names: Vec<Box<str>> = pool.names_from(0).to_vec();
            read(&out, at + RECORD_SLOTS, starts[k + 1], &text, &names, &mut actual[i]);
            let diagnostics = pool.take_diagnostics(ids[i]);
            assert_eq!(diagnostics.len(), out[at + 3] as usize, "the STREAM record counts the diagnostics");
            actual[i].push(Item::Diagnostics(diagnostics));
            if out[at + 2] == STATUS_PARSE_ERROR {
                let error = pool.take_error(ids[i]).expect("a parse error behind the status");
                actual[i].push(Item::Error { code: error.code, offset: error.token_offset });
            }
        }
    }
    assert_eq!(actual, expected, "the pool changed what a stream gives (options {options:?})");
});
