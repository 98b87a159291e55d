//! The floor: the least work any parser with the core's contract must do per token, written as plainly
//! and as fast as we can, so the core can be reported as a ratio to it.
//!
//! What it does, per token: one lookup in a packed table (offset, length, UTF-16 length or "not whole
//! UTF-8"); for content, the byte copy into the batch text, the UTF-8 join of a character split across
//! tokens (with U+FFFD for invalid bytes), the UTF-16 count the offsets need, and one text event per run
//! of a message's text; for headers, the copy of the header's bytes; for `<|message|>` and the stop
//! tokens, an open or close event. Per batch, the output is cleared and read back.
//!
//! What it leaves out, because a cache or a rare path can make it nearly free in a real parser: header
//! parsing (one header per message; the floor records only its length), diagnostics and recovery of
//! malformed streams, the separate id check, strict mode, and per-stream allocation (its output buffers
//! are reused across streams). So it is a lower bound, not a parser: its text is checked against the
//! core's once, on the corpus, before timing.

use harmony_stream_core::tokens::{CALL, CHANNEL, END, FIRST_SPECIAL, MESSAGE, RETURN, START, VOCAB_SIZE};
use harmony_stream_core::Vocabulary;

/// Per id: offset in `bytes` (bits 0–31), length (32–47), UTF-16 length when the bytes are whole UTF-8
/// on their own, else 0 (48–63).
pub struct FloorTable {
    entries: Vec<u64>,
    /// Followed by `WINDOW` zero bytes, so every token starts a `WINDOW`-byte slice.
    bytes: Vec<u8>,
}

/// Tokens up to this long are copied with one fixed-size move (most are a few bytes; a `memcpy` call of a
/// variable length costs more than the copy).
const WINDOW: usize = 16;

impl FloorTable {
    pub fn new(vocabulary: &Vocabulary) -> FloorTable {
        let mut table = FloorTable { entries: Vec::with_capacity(VOCAB_SIZE), bytes: Vec::new() };
        for id in 0..VOCAB_SIZE as u32 {
            let token = vocabulary.bytes(id).expect("every id below VOCAB_SIZE has bytes");
            let utf16 = std::str::from_utf8(token).map_or(0, |s| s.encode_utf16().count() as u64);
            table.entries.push(table.bytes.len() as u64 | (token.len() as u64) << 32 | utf16 << 48);
            table.bytes.extend_from_slice(token);
        }
        table.bytes.extend_from_slice(&[0; WINDOW]);
        table
    }

    #[inline]
    fn get(&self, id: u32) -> (&[u8], u32) {
        let entry = self.entries[id as usize];
        let start = entry as u32 as usize;
        (&self.bytes[start..start + (entry >> 32 & 0xFFFF) as usize], (entry >> 48) as u32)
    }

    /// Appends token bytes `bytes` (from `get`) to `text`: short ones as `WINDOW` bytes, then cut back.
    #[inline]
    fn copy(&self, bytes: &[u8], text: &mut Vec<u8>) {
        if bytes.len() > WINDOW {
            return text.extend_from_slice(bytes);
        }
        let start = bytes.as_ptr() as usize - self.bytes.as_ptr() as usize;
        let window: &[u8; WINDOW] = self.bytes[start..start + WINDOW].try_into().expect("padded");
        let end = text.len() + bytes.len();
        text.extend_from_slice(window);
        text.truncate(end);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloorEvent {
    Open { message: u32, header_bytes: u32 },
    Text { message: u32, end: u32 },
    Close { message: u32 },
}

/// A batch's results: the text, its UTF-16 length and the events.
#[derive(Default)]
pub struct FloorOutput {
    pub text: Vec<u8>,
    pub utf16: u32,
    pub events: Vec<FloorEvent>,
    /// End of the text already in a text event.
    marked: u32,
}

impl FloorOutput {
    pub fn clear(&mut self) {
        self.text.clear();
        self.utf16 = 0;
        self.events.clear();
        self.marked = 0;
    }

    /// Puts the text since the last text event into one (extending the last one if it is the same message's).
    fn mark_text(&mut self, message: u32) {
        let end = self.utf16;
        if end == self.marked {
            return;
        }
        self.marked = end;
        if let Some(FloorEvent::Text { message: last, end: last_end }) = self.events.last_mut() {
            if *last == message {
                *last_end = end;
                return;
            }
        }
        self.events.push(FloorEvent::Text { message, end });
    }
}

/// One stream's state: where it is, the header so far, the bytes of an incomplete character.
pub struct FloorParser {
    in_header: bool,
    message: u32,
    header: Vec<u8>,
    pending: [u8; 4],
    pending_len: usize,
}

impl FloorParser {
    /// A parser whose first message's header starts at once (the role is given, as in the corpus).
    pub fn new() -> FloorParser {
        FloorParser { in_header: true, message: 0, header: Vec::new(), pending: [0; 4], pending_len: 0 }
    }

    /// One event per run of text: a run ends at a special token or at the end of the batch.
    pub fn push(&mut self, table: &FloorTable, tokens: &[u32], out: &mut FloorOutput) {
        out.clear();
        for &token in tokens {
            if token >= FIRST_SPECIAL {
                out.mark_text(self.message);
                self.special(token, out);
                continue;
            }
            let (bytes, utf16) = table.get(token);
            if self.in_header {
                self.header.extend_from_slice(bytes);
            } else if utf16 != 0 && self.pending_len == 0 {
                table.copy(bytes, &mut out.text);
                out.utf16 += utf16;
            } else {
                self.join(bytes, out);
            }
        }
        out.mark_text(self.message);
    }

    pub fn finish(&mut self, out: &mut FloorOutput) {
        out.clear();
        if !self.in_header {
            self.close(out);
        }
    }

    fn special(&mut self, token: u32, out: &mut FloorOutput) {
        match token {
            START => {
                self.in_header = true;
                self.header.clear();
            }
            CHANNEL if self.in_header => self.header.extend_from_slice(b"<|channel|>"),
            MESSAGE if self.in_header => {
                self.in_header = false;
                out.events.push(FloorEvent::Open { message: self.message, header_bytes: self.header.len() as u32 });
                self.header.clear();
            }
            END | RETURN | CALL if !self.in_header => self.close(out),
            _ => {}
        }
    }

    fn close(&mut self, out: &mut FloorOutput) {
        if self.pending_len > 0 {
            self.pending_len = 0;
            out.text.extend_from_slice("\u{FFFD}".as_bytes());
            out.utf16 += 1;
            out.mark_text(self.message);
        }
        out.events.push(FloorEvent::Close { message: self.message });
        self.message += 1;
        self.in_header = true;
    }

    /// Appends `bytes` after the pending bytes of a split character: completes that character, then
    /// decodes the rest, keeping a trailing incomplete character pending (invalid bytes become U+FFFD).
    fn join(&mut self, mut bytes: &[u8], out: &mut FloorOutput) {
        if self.pending_len > 0 {
            let need = sequence_len(self.pending[0]) - self.pending_len;
            let take = need.min(bytes.len());
            let continuation = bytes[..take].iter().position(|&b| b & 0xC0 != 0x80).unwrap_or(take);
            self.pending[self.pending_len..self.pending_len + continuation].copy_from_slice(&bytes[..continuation]);
            self.pending_len += continuation;
            bytes = &bytes[continuation..];
            if continuation < take {
                self.pending_len = 0;
                push_decoded("\u{FFFD}", out);
            } else if continuation == need {
                let len = std::mem::take(&mut self.pending_len);
                match std::str::from_utf8(&self.pending[..len]) {
                    Ok(text) => push_decoded(text, out),
                    Err(_) => push_decoded("\u{FFFD}", out),
                }
            } else {
                return;
            }
        }
        loop {
            match std::str::from_utf8(bytes) {
                Ok(text) => return push_decoded(text, out),
                Err(error) => {
                    let (valid, rest) = bytes.split_at(error.valid_up_to());
                    push_decoded(std::str::from_utf8(valid).expect("valid up to here"), out);
                    match error.error_len() {
                        Some(invalid) => {
                            push_decoded("\u{FFFD}", out);
                            bytes = &rest[invalid..];
                        }
                        None => {
                            self.pending[..rest.len()].copy_from_slice(rest);
                            self.pending_len = rest.len();
                            return;
                        }
                    }
                }
            }
        }
    }
}

fn sequence_len(lead: u8) -> usize {
    match lead {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        _ => 2,
    }
}

fn push_decoded(text: &str, out: &mut FloorOutput) {
    out.text.extend_from_slice(text.as_bytes());
    out.utf16 += text.encode_utf16().count() as u32;
}

/// Replays the corpus once at `batch` (as `support::replay` does for the core); `output` is reused.
pub fn replay_floor(table: &FloorTable, corpus: &[Vec<u32>], batch: usize, output: &mut FloorOutput) -> usize {
    let mut sink = 0;
    for stream in corpus {
        let mut parser = FloorParser::new();
        for chunk in stream.chunks(batch) {
            parser.push(table, chunk, output);
            sink += output.events.len() + output.utf16 as usize;
        }
        parser.finish(output);
        sink += output.events.len();
    }
    sink
}

/// The text the floor produces for a whole stream, for the check against the core.
pub fn floor_text(table: &FloorTable, stream: &[u32]) -> Vec<u8> {
    let mut parser = FloorParser::new();
    let mut output = FloorOutput::default();
    parser.push(table, stream, &mut output);
    let mut text = std::mem::take(&mut output.text);
    parser.finish(&mut output);
    text.extend_from_slice(&output.text);
    text
}

/// The floor of a pool step: per stream, its push, its events written as 4-slot records (with a stream
/// record first) and its text appended to the step's text, as `StreamPool::step` must do at least.
pub struct FloorPool {
    streams: Vec<(FloorParser, FloorOutput)>,
    text: Vec<u8>,
}

impl FloorPool {
    pub fn new(streams: usize) -> FloorPool {
        FloorPool { streams: (0..streams).map(|_| (FloorParser::new(), FloorOutput::default())).collect(), text: Vec::new() }
    }

    /// `tokens[offsets[i]..offsets[i + 1]]` go to stream `ids[i]`; returns the length of the step's text.
    pub fn step(&mut self, table: &FloorTable, ids: &[u32], offsets: &[u32], tokens: &[u32], out: &mut [u32]) -> usize {
        self.text.clear();
        let mut at = 8;
        let mut utf16 = 0;
        for (i, &id) in ids.iter().enumerate() {
            let (parser, output) = &mut self.streams[id as usize];
            parser.push(table, &tokens[offsets[i] as usize..offsets[i + 1] as usize], output);
            at = write_floor_records(id, output, utf16, out, at);
            self.text.extend_from_slice(&output.text);
            utf16 += output.utf16;
        }
        out[0] = ((at - 8) / 4) as u32;
        self.text.len()
    }

    pub fn finish(&mut self, out: &mut [u32]) -> usize {
        self.text.clear();
        let mut at = 8;
        for (id, (parser, output)) in self.streams.iter_mut().enumerate() {
            parser.finish(output);
            at = write_floor_records(id as u32, output, 0, out, at);
            self.text.extend_from_slice(&output.text);
        }
        out[0] = ((at - 8) / 4) as u32;
        self.text.len()
    }
}

fn write_floor_records(id: u32, output: &FloorOutput, text_base: u32, out: &mut [u32], mut at: usize) -> usize {
    out[at..at + 4].copy_from_slice(&[5, id, 0, 0]);
    at += 4;
    let mut start = text_base;
    for event in &output.events {
        let record = match *event {
            FloorEvent::Open { message, header_bytes } => [1, message, header_bytes, 0],
            FloorEvent::Text { message, end } => {
                let record = [2, message, start, text_base + end];
                start = text_base + end;
                record
            }
            FloorEvent::Close { message } => [3, message, 0, 0],
        };
        out[at..at + 4].copy_from_slice(&record);
        at += 4;
    }
    at
}
