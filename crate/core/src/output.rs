//! What one `push` or `finish` produced: the batch text, events that cut it into per-message segments,
//! the headers of messages opened in the batch, diagnostics, and (strict mode) the error that stopped it.
//!
//! `compact.rs` writes it out in the compact format (one string plus small integers, objects only for the
//! rare parts). The TypeScript implementation produces the same shape (`src/backend/js/output.ts`).

use crate::header::Header;
use crate::tokens::Terminator;
use crate::utf8::TextSink;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Message `message` started; its header is the next one in `BatchOutput::headers`.
    Open { message: u32 },
    /// Text of `message` runs up to `end` (UTF-16 units into the batch text) from the previous event's end.
    Text { message: u32, end: u32 },
    /// Message `message` ended, by a stop token or (None) by the end of the stream.
    Close { message: u32, terminator: Option<Terminator> },
}

/// A recovery made in lenient mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: &'static str,
    pub message: String,
    /// Offset in the parser's token stream (counted from 0 over all batches) where it was detected.
    pub token_offset: u64,
    /// The raw text involved (ignored tokens, a header that could not be parsed).
    pub text: Option<String>,
}

/// A strict-mode error, with the reference's message text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub code: &'static str,
    pub message: String,
    pub token_offset: u64,
    /// The decoded header text, for header errors.
    pub header: Option<String>,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ParseError {}

/// `*to = from.clone()`, reusing `to`'s Strings (Option's `clone_from` does so when both are `Some`).
fn copy_header(to: &mut Header, from: &Header) {
    let Header { role, name, channel, recipient, content_type } = from;
    to.role.clone_from(role);
    to.name.clone_from(name);
    to.channel.clone_from(channel);
    to.recipient.clone_from(recipient);
    to.content_type.clone_from(content_type);
}

#[derive(Default, Debug)]
pub struct BatchOutput {
    pub text: TextSink,
    pub events: Vec<Event>,
    pub headers: Vec<Header>,
    pub diagnostics: Vec<Diagnostic>,
    /// End of the text already attributed to a message by a Text event.
    marked: u32,
    /// Headers of earlier batches, whose Strings the next headers are copied into: every message has a
    /// header, and allocating and freeing its Strings each time showed in profiles.
    spare_headers: Vec<Header>,
}

/// Headers kept in `spare_headers` at most (a batch that opened more than this frees the rest).
const MAX_SPARE_HEADERS: usize = 8;

impl BatchOutput {
    pub fn clear(&mut self) {
        self.text.clear();
        self.events.clear();
        if !self.headers.is_empty() {
            self.keep_spare_headers();
        }
        self.diagnostics.clear();
        self.marked = 0;
    }

    /// Whether the buffers' capacities are small enough to be worth keeping for another parser.
    pub(crate) fn is_modest(&self) -> bool {
        self.text.text.capacity() <= 16 * 1024
            && self.events.capacity() <= 1024
            && self.headers.capacity() <= 64
            && self.diagnostics.capacity() <= 64
    }

    fn keep_spare_headers(&mut self) {
        let room = MAX_SPARE_HEADERS.saturating_sub(self.spare_headers.len());
        // Draining empties `headers` whole: what does not fit is dropped.
        self.spare_headers.extend(self.headers.drain(..).take(room));
    }

    pub(crate) fn open(&mut self, message: u32, header: &Header) {
        self.events.push(Event::Open { message });
        let mut copy = self.spare_headers.pop().unwrap_or_default();
        copy_header(&mut copy, header);
        self.headers.push(copy);
    }

    /// Records that the text appended since the last event belongs to `message`,
    /// extending the previous segment when it is the same message's.
    pub(crate) fn mark_text(&mut self, message: u32) {
        let end = self.text.utf16_len as u32;
        if end == self.marked {
            return;
        }
        self.marked = end;
        if let Some(Event::Text { message: last, end: last_end }) = self.events.last_mut() {
            if *last == message {
                *last_end = end;
                return;
            }
        }
        self.events.push(Event::Text { message, end });
    }

    pub(crate) fn close(&mut self, message: u32, terminator: Option<Terminator>) {
        self.events.push(Event::Close { message, terminator });
    }
}
