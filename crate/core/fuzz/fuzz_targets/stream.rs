//! `StreamParser` over fuzzer-chosen token streams, pushed whole and cut into batches.
//!
//! Input layout:
//! - byte 0: flags. bit 0 strict, bit 1 role `Some("assistant")` (else `None`), bit 2 tool names,
//!   bit 3 probe with an invalid id before `finish` (split run only; it must consume nothing).
//! - byte 1: `max_header_tokens` = 1 + byte % 64.
//! - byte 2: number of cuts (mod 16), then 2 bytes (u16 LE) per cut, taken modulo `tokens.len() + 1`.
//! - the rest: tokens, see `decode_tokens` (Harmony specials are frequent, plus a dictionary of header
//!   words and split-UTF-8 tokens, other special ids and random ordinary ids).
//!
//! Checked: no panic; lenient `push` never fails on valid ids; per batch, the events are well formed
//! (messages open in order, Text and Close belong to the open message, Text ends strictly increase and
//! the last one is the batch text's UTF-16 length, every header is used); after `finish` no message is
//! open and the parser refuses more input; and the messages rebuilt from the events (header, content,
//! terminator), the diagnostics and (strict mode, continuing after each error) the errors are the same
//! whether the stream was pushed in one batch or in many.

#![no_main]

use harmony_stream_core::output::{BatchOutput, Diagnostic, Event, ParseError};
use harmony_stream_core::tokens::LAST_TOKEN;
use harmony_stream_core::{Header, ParserOptions, PushError, State, StreamParser, Terminator};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;
use common::{decode_tokens, vocabulary};

#[derive(Debug, PartialEq, Clone)]
struct Message {
    index: u32,
    header: Header,
    content: String,
    terminator: Option<Terminator>,
}

/// Everything a client can observe, accumulated over batches.
#[derive(Debug, Default, PartialEq)]
struct Record {
    messages: Vec<Message>,
    open: Option<Message>,
    next_index: u32,
    diagnostics: Vec<Diagnostic>,
    errors: Vec<ParseError>,
}

impl Record {
    fn collect(&mut self, out: &BatchOutput) {
        let utf16: Vec<u16> = out.text.text.encode_utf16().collect();
        assert_eq!(out.text.utf16_len, utf16.len(), "TextSink.utf16_len is out of step");
        let mut headers = out.headers.iter();
        let mut start = 0usize;
        for event in &out.events {
            match *event {
                Event::Open { message } => {
                    assert!(self.open.is_none(), "message {message} opened while another is open");
                    assert_eq!(message, self.next_index, "messages open in order");
                    self.next_index += 1;
                    let header = headers.next().expect("an Open event without a header").clone();
                    self.open = Some(Message { index: message, header, content: String::new(), terminator: None });
                }
                Event::Text { message, end } => {
                    let open = self.open.as_mut().expect("text outside a message");
                    assert_eq!(open.index, message, "text of a message that is not open");
                    let end = end as usize;
                    assert!(end > start && end <= utf16.len(), "text end {end} after {start}, batch length {}", utf16.len());
                    let segment = String::from_utf16(&utf16[start..end]).expect("a segment boundary splits a surrogate pair");
                    open.content.push_str(&segment);
                    start = end;
                }
                Event::Close { message, terminator } => {
                    let mut open = self.open.take().expect("close without an open message");
                    assert_eq!(open.index, message, "close of a message that is not open");
                    open.terminator = terminator;
                    self.messages.push(open);
                }
            }
        }
        assert_eq!(start, utf16.len(), "every character of the batch text belongs to a Text event");
        assert!(headers.next().is_none(), "a header without an Open event");
        self.diagnostics.extend(out.diagnostics.iter().cloned());
    }
}

fn run(tokens: &[u32], cuts: &[usize], options: &ParserOptions, probe: Option<u32>) -> Record {
    let strict = options.strict;
    let mut parser = StreamParser::new(vocabulary().clone(), options.clone());
    let mut record = Record::default();
    let mut consumed = 0u64;
    let mut start = 0usize;
    for end in cuts.iter().copied().chain([tokens.len()]) {
        let mut batch = &tokens[start..end];
        start = end;
        loop {
            match parser.push(batch) {
                Ok(()) => {
                    record.collect(parser.output());
                    consumed += batch.len() as u64;
                    break;
                }
                Err(PushError::Parse(error)) => {
                    assert!(strict, "lenient push failed: {error:?}");
                    record.collect(parser.output());
                    // Continue after the failing token, as the TypeScript tests do.
                    let failed = error.token_offset.checked_sub(consumed).expect("error before the batch") as usize;
                    assert!(failed < batch.len(), "error offset {} outside the batch", error.token_offset);
                    record.errors.push(error);
                    batch = &batch[failed + 1..];
                    consumed += failed as u64 + 1;
                }
                Err(other) => panic!("push of valid ids failed: {other:?}"),
            }
        }
    }
    if let Some(probe) = probe {
        let bad = LAST_TOKEN + 1 + probe;
        let state = parser.state();
        assert_eq!(parser.push(&[0, bad]), Err(PushError::InvalidToken { index: 1, id: bad }));
        let out = parser.output();
        assert!(out.text.text.is_empty() && out.events.is_empty() && out.headers.is_empty() && out.diagnostics.is_empty());
        assert_eq!(parser.state(), state, "a rejected batch changed the state");
    }
    match parser.finish() {
        Ok(()) => assert_eq!(parser.state(), State::ExpectStart, "finish leaves the parser expecting a start"),
        Err(PushError::Parse(error)) => {
            assert!(strict, "lenient finish failed: {error:?}");
            assert_eq!(error.code, "unexpected-eos-in-header");
            record.errors.push(error);
        }
        Err(other) => panic!("finish failed: {other:?}"),
    }
    record.collect(parser.output());
    assert!(record.open.is_none(), "a message is still open after finish");
    assert!(parser.is_finished());
    assert_eq!(parser.push(&[]), Err(PushError::Finished));
    assert_eq!(parser.finish(), Ok(()), "finish is idempotent");
    assert!(parser.output().events.is_empty() && parser.output().text.text.is_empty());
    record
}

fuzz_target!(|data: &[u8]| {
    let [flags, max_header, cut_count, rest @ ..] = data else { return };
    let cut_count = usize::from(cut_count % 16);
    if rest.len() < 2 * cut_count {
        return;
    }
    let (cut_bytes, token_bytes) = rest.split_at(2 * cut_count);
    let tokens = decode_tokens(token_bytes);
    let mut cuts: Vec<usize> =
        cut_bytes.chunks_exact(2).map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])) % (tokens.len() + 1)).collect();
    cuts.sort_unstable();

    let options = ParserOptions {
        role: (flags & 2 != 0).then(|| "assistant".to_owned()),
        strict: flags & 1 != 0,
        max_header_tokens: 1 + usize::from(max_header % 64),
        tool_names: if flags & 4 != 0 { vec!["functions.get_weather".to_owned(), "functions.shell".to_owned()] } else { Vec::new() },
    };
    let probe = (flags & 8 != 0).then(|| u32::from(flags >> 4));

    let whole = run(&tokens, &[], &options, None);
    let split = run(&tokens, &cuts, &options, probe);
    assert_eq!(whole, split, "pushing in batches {cuts:?} changed the result (options {options:?})");
    if !options.strict {
        assert!(whole.errors.is_empty());
    }
});
