//! The compact output format: a batch's results as small integers in a `u32` array the caller owns and
//! reuses, beside one string holding the batch's text. It is the public fast path of the Node package and
//! the form a `StreamPool` step answers in; the TypeScript implementation writes exactly the same
//! (`src/backend/compact.ts` documents the layout for users and mirrors these constants;
//! `__test__/parser/constants.test.mts` compares the two).
//!
//! Layout: `HEADER_SLOTS` slots (record count, status, diagnostic count, parser state, index of a bad
//! token), then records of `RECORD_SLOTS` slots each:
//!
//! | kind | slots 1–3 |
//! |---|---|
//! | `OPEN` | message index, role id, name id; always followed by a `FIELDS` record |
//! | `FIELDS` | channel id, recipient id, content type id (of the message just opened) |
//! | `TEXT` | message index, start, end (UTF-16 offsets into the returned string) |
//! | `CLOSE` | message index, terminator code (`TERMINATOR_NONE` = end of stream), 0 |
//! | `STREAM` | stream id, status, diagnostic count (pool steps only: the records up to the next `STREAM` are this stream's) |
//!
//! Header fields are interned: 0 means absent, other ids name a string in the `NameTable` of the pool
//! that produced them.

use std::collections::HashMap;

use crate::output::{BatchOutput, Event};
use crate::tokens::TERMINATOR_NONE;

pub const HEADER_SLOTS: usize = 8;
pub const AT_RECORDS: usize = 0;
pub const AT_STATUS: usize = 1;
pub const AT_DIAGNOSTICS: usize = 2;
pub const AT_STATE: usize = 3;
/// With `STATUS_INVALID_TOKEN`: index of the offending id in the batch.
pub const AT_BAD_INDEX: usize = 4;

pub const RECORD_SLOTS: usize = 4;
pub const OPEN: u32 = 1;
pub const TEXT: u32 = 2;
pub const CLOSE: u32 = 3;
pub const FIELDS: u32 = 4;
pub const STREAM: u32 = 5;

pub const STATUS_OK: u32 = 0;
/// Strict mode: the batch stopped at a token the reference rejects; the error is kept for `take_error`.
pub const STATUS_PARSE_ERROR: u32 = 1;
pub const STATUS_INVALID_TOKEN: u32 = 2;
/// The parser was finished before this call.
pub const STATUS_FINISHED: u32 = 3;
/// A bug (a Rust panic) stopped this stream; it refuses further use.
pub const STATUS_INTERNAL_ERROR: u32 = 4;

/// Pool calls only, in the header slots, when nothing was consumed: `streams[AT_BAD_INDEX]` is not open.
pub const STATUS_UNKNOWN_STREAM: u32 = 5;
/// Pool calls only: `offsets` does not fit `streams` and `tokens`.
pub const STATUS_BAD_OFFSETS: u32 = 6;
/// Internal to `StreamPool::step_frames`: a stream named twice in one step.
pub const STATUS_REPEATED_STREAM: u32 = 7;

/// A header field too long to intern, or one met after the table filled: read it from `take_headers`.
pub const NOT_INTERNED: u32 = u32::MAX;

/// Records one token can cause at most: a header closed by a stop token opens (OPEN + FIELDS), writes
/// its text and closes. One more token's worth covers `finish`.
pub const MAX_RECORDS_PER_TOKEN: usize = 4;

/// Slots an output array needs for a call over `streams` streams and `tokens` tokens in all
/// (a single parser's call: `streams` = 1; its header slots hold no `STREAM` record but the formula allows one).
pub fn capacity(streams: usize, tokens: usize) -> usize {
    HEADER_SLOTS + RECORD_SLOTS * (streams + MAX_RECORDS_PER_TOKEN * (tokens + streams))
}

/// Interned header strings. Ids start at 1 and never change; the table is bounded (a model that emits
/// endless distinct recipients must not grow memory without limit), so past `MAX_NAMES` names, or for a
/// name longer than `MAX_NAME_BYTES`, the id is `NOT_INTERNED`.
#[derive(Default)]
pub struct NameTable {
    ids: HashMap<Box<str>, u32>,
    names: Vec<Box<str>>,
}

impl NameTable {
    pub const MAX_NAMES: usize = 65_536;
    pub const MAX_NAME_BYTES: usize = 256;

    pub fn intern(&mut self, name: Option<&str>) -> u32 {
        let Some(name) = name else { return 0 };
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        if self.names.len() >= Self::MAX_NAMES || name.len() > Self::MAX_NAME_BYTES {
            return NOT_INTERNED;
        }
        self.names.push(name.into());
        let id = self.names.len() as u32;
        self.ids.insert(name.into(), id);
        id
    }

    /// The names with ids `from + 1` onwards, for a mirror that knows the first `from`.
    pub fn names_from(&self, from: usize) -> &[Box<str>] {
        self.names.get(from..).unwrap_or(&[])
    }
}

/// Writes the records of `output` at `out[at..]`, with text offsets shifted by `text_base` (where this
/// output's text starts in the string returned for the whole call). Returns the end of what was written,
/// or `None` if `out` is too small.
pub fn write_records(output: &BatchOutput, names: &mut NameTable, out: &mut [u32], mut at: usize, text_base: u32) -> Option<usize> {
    let mut headers = output.headers.iter();
    let mut text_start = text_base;
    for event in &output.events {
        let records: &[[u32; RECORD_SLOTS]] = match *event {
            Event::Open { message } => {
                let header = headers.next().expect("one header per open event");
                &[
                    [OPEN, message, names.intern(Some(&header.role)), names.intern(header.name.as_deref())],
                    [
                        FIELDS,
                        names.intern(header.channel.as_deref()),
                        names.intern(header.recipient.as_deref()),
                        names.intern(header.content_type.as_deref()),
                    ],
                ]
            }
            Event::Text { message, end } => {
                let start = text_start;
                text_start = text_base + end;
                &[[TEXT, message, start, text_start]]
            }
            Event::Close { message, terminator } => &[[CLOSE, message, terminator.map_or(TERMINATOR_NONE, |t| t as u32), 0]],
        };
        for record in records {
            out.get_mut(at..at + RECORD_SLOTS)?.copy_from_slice(record);
            at += RECORD_SLOTS;
        }
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_is_stable_and_bounded() {
        let mut names = NameTable::default();
        assert_eq!(names.intern(None), 0);
        let analysis = names.intern(Some("analysis"));
        assert_eq!(analysis, 1);
        assert_eq!(names.intern(Some("final")), 2);
        assert_eq!(names.intern(Some("analysis")), analysis);
        assert_eq!(&*names.names_from(1)[0], "final");
        assert_eq!(names.intern(Some(&"x".repeat(NameTable::MAX_NAME_BYTES + 1))), NOT_INTERNED);
        for i in names.names.len()..NameTable::MAX_NAMES {
            names.intern(Some(&format!("to={i}")));
        }
        assert_eq!(names.intern(Some("one too many")), NOT_INTERNED);
        assert_eq!(names.intern(Some("final")), 2, "known names keep their ids when the table is full");
    }
}
