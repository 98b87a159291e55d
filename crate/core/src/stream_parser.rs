//! The streaming state machine: expect-start → header → content, one token at a time, as the reference
//! parser does, writing each batch's results into a `BatchOutput`.
//!
//! Strict mode reproduces the reference parser's errors (same texts, same state afterwards). Lenient
//! mode (the default) never fails on anything a model can emit: every reference error becomes a recovery
//! plus a `Diagnostic`, and no content text is dropped.

use std::sync::Arc;

use crate::header::{cache, parse_header, recover_header, Header, HeaderRules, ReadHeader, RecoveredHeader};
use crate::output::{BatchOutput, Diagnostic, ParseError};
use crate::tokens::{Terminator, CHANNEL, END_OF_TEXT, FIRST_SPECIAL, LAST_TOKEN, MESSAGE, START};
use crate::utf8::{decode_lossy, TextSink, Utf8Assembler};
use crate::vocabulary::Vocabulary;

/// Headers are a handful of tokens; a header this long means the model never wrote `<|message|>`.
/// Mirrored, as this file's other limits and codes shared with the TypeScript backend, in `src/backend/`
/// (`__test__/parser/constants.test.mts` compares them).
pub const DEFAULT_MAX_HEADER_TOKENS: usize = 256;
/// Bytes of text a content token holds, a little above the average (English ~4, CJK 3–6), for reserving.
const TYPICAL_TOKEN_BYTES: usize = 6;
/// Ignored text between messages is reported in diagnostics of at most this many bytes each.
pub const MAX_STRAY_BYTES: usize = 4096;

#[derive(Clone, Debug)]
pub struct ParserOptions {
    /// Role of the first message, as if `<|start|>{role}` had been consumed; `None` waits for `<|start|>`.
    pub role: Option<String>,
    pub strict: bool,
    pub max_header_tokens: usize,
    /// Tools the request offered (e.g. `functions.get_weather`): lets lenient mode split `to=functions.xjson`.
    pub tool_names: Vec<String>,
}

impl Default for ParserOptions {
    fn default() -> Self {
        ParserOptions {
            role: Some("assistant".to_owned()),
            strict: false,
            max_header_tokens: DEFAULT_MAX_HEADER_TOKENS,
            tool_names: Vec::new(),
        }
    }
}

/// The state codes are part of the backend protocol shared with TypeScript (STATE_* in src/backend/protocol.ts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    ExpectStart = 0,
    Header = 1,
    Content = 2,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PushError {
    /// An id outside the vocabulary; nothing of the batch was consumed.
    InvalidToken { index: usize, id: u32 },
    /// `push` after `finish`.
    Finished,
    /// Strict mode: the token at `error.token_offset` failed; the tokens before it were consumed and
    /// their results are in the output, the tokens after it were not.
    Parse(ParseError),
}

impl std::fmt::Display for PushError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PushError::InvalidToken { index, id } => {
                write!(f, "token id {id} at index {index} is outside the vocabulary (0..={LAST_TOKEN})")
            }
            PushError::Finished => f.write_str("the parser is finished; create a new parser for a new stream"),
            PushError::Parse(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for PushError {}

/// Tokens seen between messages (lenient mode), reported as one diagnostic per run.
#[derive(Default)]
struct StrayRun {
    bytes: Vec<u8>,
    tokens: usize,
    start: u64,
}

pub struct StreamParser {
    vocabulary: Arc<Vocabulary>,
    strict: bool,
    max_header_tokens: usize,
    /// Shared with the header cache's entries (which compare it by pointer first), with its hash.
    tool_names: Arc<[String]>,
    tool_names_hash: u64,
    state: State,
    /// Role for the next header: the constructor's role (first message only, as in the reference)
    /// or `assistant` for a message started without `<|start|>`.
    next_role: Option<String>,
    header_tokens: Vec<u32>,
    /// Offset of the `<|start|>` that opened the current header, if one did.
    header_start: Option<u64>,
    /// Index of the message whose content is being read.
    open_message: Option<u32>,
    next_message_index: u32,
    utf8: Utf8Assembler,
    stray: StrayRun,
    /// Lenient: the last message closed with `<|end|>` and no header began since: text written now, where
    /// `<|start|>` belongs, is an answer the model wrote without its header (`strand`).
    strandable: bool,
    /// Tokens consumed so far over all batches.
    offset: u64,
    finished: bool,
    output: BatchOutput,
}

impl StreamParser {
    pub fn new(vocabulary: Arc<Vocabulary>, options: ParserOptions) -> StreamParser {
        let state = if options.role.is_some() { State::Header } else { State::ExpectStart };
        let recycled::Buffers { output, header_tokens } = recycled::take();
        StreamParser {
            vocabulary,
            strict: options.strict,
            max_header_tokens: options.max_header_tokens,
            tool_names_hash: cache::hash_tool_names(&options.tool_names),
            tool_names: options.tool_names.into(),
            state,
            next_role: options.role,
            header_tokens,
            header_start: None,
            open_message: None,
            next_message_index: 0,
            utf8: Utf8Assembler::default(),
            stray: StrayRun::default(),
            strandable: false,
            offset: 0,
            finished: false,
            output,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Whether pushing `tokens` would produce nothing at all (no text, event, diagnostic or error): a
    /// `<|start|>` that opens a header with no stray tokens to report, and header tokens other than
    /// `<|message|>` while the header has room (lenient mode: nor a stop token or `<|start|>`, which end it).
    /// What a caller serving many streams may skip telling anyone about (`StreamPool::step_frames`).
    /// `<|endoftext|>` is never taken silently: the adapters above end the completion there
    /// (src/wire/message-stream.ts), so it must reach them.
    pub fn takes_silently(&self, tokens: &[u32]) -> bool {
        let (mut state, mut header) = (self.state, self.header_tokens.len());
        for &token in tokens {
            match state {
                State::ExpectStart if token == START && self.stray.tokens == 0 => {
                    state = State::Header;
                    header = 0;
                }
                State::Header
                    if token != MESSAGE
                        && token != END_OF_TEXT
                        && header < self.max_header_tokens
                        && (self.strict || (token != START && Terminator::of_token(token).is_none())) =>
                {
                    header += 1
                }
                _ => return false,
            }
        }
        !self.finished
    }

    /// Whether an ordinary token would now only add its own text to the open message: a message is being
    /// read, no part of a character is pending, and the stream goes on. In this state the Node wrapper may
    /// take ordinary tokens itself, from texts this parser gave it before, and count them with `skip_content`
    /// at its next call (src/backend/native.ts: at one token per call the crossing costs more than the parse).
    pub fn takes_plain_content(&self) -> bool {
        self.state == State::Content && self.utf8.is_empty() && !self.finished
    }

    /// What `takes_silently` would take now without a look at the tokens: whether a `<|start|>` would open a
    /// header silently (the header then has `max_header_tokens` of room), and how many more header tokens the
    /// header being read has room for. Header tokens here are those taken silently in both modes: any id but
    /// `<|message|>`, `<|endoftext|>`, `<|start|>` and the stop tokens. The Node wrapper holds such tokens and
    /// sends them with the next call that needs Rust (src/backend/native.ts), as one crossing.
    pub fn silent_room(&self) -> (bool, usize) {
        match self.state {
            _ if self.finished => (false, 0),
            State::ExpectStart => (self.stray.tokens == 0, 0),
            State::Header => (false, self.max_header_tokens.saturating_sub(self.header_tokens.len())),
            State::Content => (false, 0),
        }
    }

    /// Counts `count` ordinary tokens that the caller took as content itself while `takes_plain_content`
    /// held: their text never came through here, only the offset moves (diagnostics after them stay exact).
    /// False, with nothing changed, if that state does not hold.
    pub fn skip_content(&mut self, count: u64) -> bool {
        if !self.takes_plain_content() {
            return false;
        }
        self.offset += count;
        true
    }

    /// Results of the last `push` or `finish` (also after it returned an error).
    pub fn output(&self) -> &BatchOutput {
        &self.output
    }

    pub fn output_mut(&mut self) -> &mut BatchOutput {
        &mut self.output
    }

    pub fn push(&mut self, tokens: &[u32]) -> Result<(), PushError> {
        self.output.clear();
        if self.finished {
            return Err(PushError::Finished);
        }
        if let Some(index) = tokens.iter().position(|&id| !self.vocabulary.contains(id)) {
            return Err(PushError::InvalidToken { index, id: tokens[index] });
        }
        // Room for a typical batch's text at once, rather than regrowing it a few times per stream.
        self.output.text.text.reserve(tokens.len() * TYPICAL_TOKEN_BYTES);
        let mut rest = tokens;
        while let Some((&token, tail)) = rest.split_first() {
            if self.state == State::Content && token < FIRST_SPECIAL {
                let taken = self.append_content_run(rest);
                self.offset += taken as u64;
                rest = &rest[taken..];
                continue;
            }
            let offset = self.offset;
            self.offset += 1;
            rest = tail;
            self.process(token, offset).map_err(PushError::Parse)?;
        }
        Ok(())
    }

    /// The content hot path: appends the leading run of ordinary tokens, with one text event for the run;
    /// returns how many tokens it took (at least one: `tokens` starts with an ordinary token). A token
    /// whose bytes are whole UTF-8 text is copied as is; the pieces of a character split across tokens
    /// go through the UTF-8 assembler without leaving the loop. Special tokens go through `process`.
    fn append_content_run(&mut self, tokens: &[u32]) -> usize {
        let vocabulary = &*self.vocabulary;
        let text = &mut self.output.text;
        let mut taken = 0;
        for &token in tokens {
            if token >= FIRST_SPECIAL {
                break;
            }
            match vocabulary.padded_text(token) {
                Some(whole) if self.utf8.is_empty() => text.push_short(whole),
                _ => self.utf8.push(vocabulary.bytes(token).expect("ids are checked in push"), text),
            }
            taken += 1;
        }
        let message = self.open_message.expect("content state has an open message");
        self.output.mark_text(message);
        taken
    }

    /// Ends the stream: closes an open message, recovers (lenient) or rejects (strict) an unfinished header.
    /// A second call does nothing.
    pub fn finish(&mut self) -> Result<(), PushError> {
        self.output.clear();
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        match self.state {
            State::Content => self.close_message(None),
            State::Header if self.strict => {
                return Err(PushError::Parse(ParseError {
                    code: "unexpected-eos-in-header",
                    message: "Unexpected EOS while waiting for message header to complete".to_owned(),
                    token_offset: self.offset,
                    header: Some(self.header_text()),
                }));
            }
            State::Header => {
                if !self.header_tokens.is_empty() {
                    self.recover_unfinished_header(None, self.offset, "unterminated-header", "the stream ended inside a message header");
                } else if self.header_start.is_some() {
                    self.diagnose(
                        "unterminated-header",
                        "the stream ended inside a message header".to_owned(),
                        self.offset,
                        Some(String::new()),
                    );
                }
                self.state = State::ExpectStart;
            }
            State::ExpectStart => self.flush_stray(),
        }
        Ok(())
    }

    fn process(&mut self, token: u32, offset: u64) -> Result<(), ParseError> {
        match self.state {
            State::ExpectStart => self.expect_start(token, offset),
            State::Header => self.header(token, offset),
            State::Content => {
                match Terminator::of_token(token) {
                    Some(terminator) => self.close_message(Some(terminator)),
                    // Lenient: the model began a new message without closing this one (no token id can
                    // stand for these as text, so this is never content the model meant).
                    None if !self.strict && (token == START || token == CHANNEL) => {
                        self.diagnose(
                            "missing-end",
                            "a new message began before <|end|>; the open message was closed".to_owned(),
                            offset,
                            None,
                        );
                        self.close_message(None);
                        return self.expect_start(token, offset);
                    }
                    None => self.append_content(token),
                }
                Ok(())
            }
        }
    }

    fn expect_start(&mut self, token: u32, offset: u64) -> Result<(), ParseError> {
        if token == START {
            self.flush_stray();
            self.begin_header(Some(offset));
        } else if self.strict {
            return Err(ParseError {
                code: "unexpected-token",
                message: format!("Unexpected token {token} while expecting start token {START}"),
                token_offset: offset,
                header: None,
            });
        } else if token == CHANNEL {
            // The model skipped `<|start|>assistant` between messages (vLLM PR #35901).
            self.flush_stray();
            self.diagnose("missing-start", "<|channel|> without <|start|>: started an assistant message".to_owned(), offset, None);
            self.begin_header(None);
            self.next_role = Some("assistant".to_owned());
            self.header_tokens.push(token);
        } else {
            self.add_stray(token, offset);
            if token >= FIRST_SPECIAL {
                self.strandable = false;
            } else if self.strandable && !self.vocabulary.bytes(token).expect("ids are checked in push").iter().all(u8::is_ascii_whitespace)
            {
                self.strand();
            }
        }
        Ok(())
    }

    /// Lenient: text after a message's `<|end|>` without a header (SGLang #31019: `…analysis…<|end|>{"country":…}`)
    /// is the final answer the model wrote without `<|start|>assistant<|channel|>final<|message|>`: the text
    /// held since the `<|end|>` opens an assistant message on the final channel, its leading white space left
    /// out (it stays in the diagnostic's text), and what follows is its content (as stream-parser.ts `strand`).
    fn strand(&mut self) {
        let bytes = std::mem::take(&mut self.stray.bytes);
        let from = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
        let start = self.stray.start;
        self.diagnose(
            "stranded-text",
            "text after <|end|> without a message header: read as the final answer".to_owned(),
            start,
            Some(decode_lossy(&bytes)),
        );
        self.stray.tokens = 0;
        self.strandable = false;
        let header = Header { role: "assistant".to_owned(), channel: Some("final".to_owned()), ..Header::default() };
        let message = self.open(&header);
        self.utf8.push(&bytes[from..], &mut self.output.text);
        self.output.mark_text(message);
        self.stray.bytes = bytes;
        self.stray.bytes.clear();
    }

    fn header(&mut self, token: u32, offset: u64) -> Result<(), ParseError> {
        if token == MESSAGE {
            return self.open_from_header(offset);
        }
        if !self.strict {
            if let Some(terminator) = Terminator::of_token(token) {
                self.recover_unfinished_header(Some(terminator), offset, "header-without-message", "a stop token ended a message header");
                return Ok(());
            }
            if token == START {
                self.restart_header(offset);
                return Ok(());
            }
        }
        if self.header_tokens.len() < self.max_header_tokens {
            // In strict mode stop tokens land here too, as in the reference.
            self.header_tokens.push(token);
            return Ok(());
        }
        let message = format!("message header exceeded {} tokens without <|message|>", self.max_header_tokens);
        if self.strict {
            let header = Some(self.header_text());
            self.reset_header();
            return Err(ParseError { code: "header-too-long", message, token_offset: offset, header });
        }
        // Bounded memory: the header so far becomes the start of a message and the stream continues as content.
        let text = self.header_text();
        self.diagnose("header-too-long", message, offset, Some(text));
        self.open_recovered_header(true);
        self.append_content(token);
        Ok(())
    }

    /// Lenient: `<|start|>` inside a header. Right after `<|start|>` (or at the parser start) it is a
    /// doubled `<|start|>` and ignored; later, the header so far never got `<|message|>`: if it holds text
    /// beyond a role word, that text becomes a message (as for a stop token), and a new header begins.
    fn restart_header(&mut self, offset: u64) {
        if self.header_tokens.is_empty() {
            self.diagnose("repeated-start", "<|start|> repeated; ignored".to_owned(), offset, Some(String::new()));
            return;
        }
        let text = self.header_text();
        let recovered = recover_header(&text, self.next_role.as_deref(), false);
        if recovered.content.is_empty() {
            self.diagnose(
                "repeated-start",
                "<|start|> inside a header without text; the header was dropped".to_owned(),
                offset,
                Some(text),
            );
        } else {
            self.recover_unfinished_header(None, offset, "header-without-message", "<|start|> ended a message header");
        }
        self.next_role = None;
        self.begin_header(Some(offset));
    }

    fn begin_header(&mut self, start: Option<u64>) {
        self.strandable = false;
        self.state = State::Header;
        self.header_tokens.clear();
        self.header_start = start;
    }

    /// Leaves the header state as the reference does on a failed header: the tokens are dropped and the
    /// role given for the first message is kept.
    fn reset_header(&mut self) {
        self.header_tokens.clear();
        self.state = State::ExpectStart;
    }

    fn header_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::new();
        for &token in &self.header_tokens {
            bytes.extend_from_slice(self.vocabulary.bytes(token).expect("ids are checked in push"));
        }
        bytes
    }

    fn header_text(&self) -> String {
        decode_lossy(&self.header_bytes())
    }

    /// Opens the message whose header ends at this `<|message|>` (at `offset`), reporting the header's
    /// problems as diagnostics, or (strict) the first one as the error.
    fn open_from_header(&mut self, offset: u64) -> Result<(), ParseError> {
        let key = cache::Key {
            vocabulary: self.vocabulary.id(),
            tokens: &self.header_tokens,
            role: self.next_role.as_deref(),
            strict: self.strict,
            tool_names: &self.tool_names,
            tool_names_hash: self.tool_names_hash,
        };
        let read = cache::get_or_read(key, || self.read_header());
        if read.invalid_utf8 {
            if self.strict {
                self.reset_header();
                return Err(ParseError {
                    code: "invalid-header-utf8",
                    message: "could not decode header".to_owned(),
                    token_offset: offset,
                    header: Some(read.text.clone()),
                });
            }
            self.diagnose(
                "invalid-header-utf8",
                "could not decode header: invalid UTF-8 replaced".to_owned(),
                offset,
                Some(read.text.clone()),
            );
        }
        if self.strict {
            if let Some(problem) = read.parsed.problems.first() {
                self.reset_header();
                return Err(ParseError {
                    code: problem.code(),
                    message: problem.message(),
                    token_offset: offset,
                    header: Some(read.text.clone()),
                });
            }
        }
        for problem in &read.parsed.problems {
            self.diagnose(problem.code(), problem.message(), offset, Some(read.text.clone()));
        }
        self.next_role = None;
        self.header_tokens.clear();
        self.open(&read.parsed.header);
        Ok(())
    }

    /// Decodes and parses the header read so far (what `header::cache` keeps).
    fn read_header(&self) -> ReadHeader {
        let (text, invalid_utf8) = match String::from_utf8(self.header_bytes()) {
            Ok(text) => (text, false),
            Err(error) => (decode_lossy(error.as_bytes()), true),
        };
        let rules = HeaderRules { repair: !self.strict, tool_names: &self.tool_names };
        let parsed = parse_header(&text, self.next_role.as_deref(), rules);
        ReadHeader { text, invalid_utf8, parsed }
    }

    /// Lenient recovery of a header that ended without `<|message|>`: a message with the header's channel
    /// whose content is the rest of the header text, closed by `terminator` if one ended it.
    fn recover_unfinished_header(&mut self, terminator: Option<Terminator>, offset: u64, code: &'static str, what: &str) {
        if self.header_tokens.is_empty() {
            self.diagnose(code, format!("{what} before any header text"), offset, Some(String::new()));
            self.reset_header();
            self.next_role = None;
            return;
        }
        let text = self.header_text();
        let mut recovered = self.recovered_header(false);
        if terminator == Some(Terminator::End) && is_headerless(&recovered) {
            // gpt-oss ends only reasoning and preambles with `<|end|>`: text that never got its header and is
            // ended so is the reasoning it writes first (openai/harmony #80: refusals that skip
            // `<|channel|>analysis<|message|>`). The whole header is held until then (at most max_header_tokens),
            // so this reads alike at every batch split.
            self.diagnose(
                "headerless-reasoning",
                "text without a message header, ended by <|end|>: read as reasoning".to_owned(),
                offset,
                Some(text),
            );
            recovered.header.channel = Some("analysis".to_owned());
        } else {
            self.diagnose(code, format!("{what} before <|message|>; the header text was kept as content"), offset, Some(text));
        }
        self.open_recovered(recovered);
        self.close_message(terminator);
    }

    /// Opens a message from the header tokens read so far (see `recover_header`). Bytes of a character
    /// split at the end of the header stay pending, to be completed by the content that follows.
    fn open_recovered_header(&mut self, continues: bool) {
        let recovered = self.recovered_header(continues);
        self.open_recovered(recovered);
    }

    fn recovered_header(&mut self, continues: bool) -> RecoveredHeader {
        let mut decoded = TextSink::default();
        let bytes = self.header_bytes();
        self.utf8.push(&bytes, &mut decoded);
        recover_header(&decoded.text, self.next_role.as_deref(), continues)
    }

    fn open_recovered(&mut self, recovered: RecoveredHeader) {
        self.next_role = None;
        self.header_tokens.clear();
        let message = self.open(&recovered.header);
        self.output.text.push_str(&recovered.content);
        self.output.mark_text(message);
    }

    fn open(&mut self, header: &Header) -> u32 {
        let message = self.next_message_index;
        self.next_message_index += 1;
        self.open_message = Some(message);
        self.state = State::Content;
        self.output.open(message, header);
        message
    }

    fn append_content(&mut self, token: u32) {
        let message = self.open_message.expect("content state has an open message");
        match self.vocabulary.text(token) {
            Some((text, utf16)) if self.utf8.is_empty() => self.output.text.push(text, utf16),
            _ => {
                let bytes = self.vocabulary.bytes(token).expect("ids are checked in push");
                self.utf8.push(bytes, &mut self.output.text);
            }
        }
        self.output.mark_text(message);
    }

    fn close_message(&mut self, terminator: Option<Terminator>) {
        let message = self.open_message.take().expect("only an open message is closed");
        self.utf8.flush(&mut self.output.text);
        self.output.mark_text(message);
        self.output.close(message, terminator);
        self.state = State::ExpectStart;
        self.strandable = !self.strict && terminator == Some(Terminator::End);
    }

    fn diagnose(&mut self, code: &'static str, message: String, token_offset: u64, text: Option<String>) {
        self.output.diagnostics.push(Diagnostic { code, message, token_offset, text });
    }

    fn add_stray(&mut self, token: u32, offset: u64) {
        if self.stray.tokens == 0 {
            self.stray.start = offset;
        }
        self.stray.tokens += 1;
        let bytes = self.vocabulary.bytes(token).expect("ids are checked in push");
        self.stray.bytes.extend_from_slice(bytes);
        if self.stray.bytes.len() >= MAX_STRAY_BYTES {
            // A character cut by the bound goes whole into the next diagnostic, counted with the token that
            // crossed it: no diagnostic's text ends or begins inside a character, which would lose it.
            let end = complete_end(&self.stray.bytes);
            if end == self.stray.bytes.len() || self.stray.tokens == 1 {
                self.flush_stray();
            } else {
                let tail = self.stray.bytes.split_off(end);
                self.stray.tokens -= 1;
                self.flush_stray();
                self.stray.bytes = tail;
                self.stray.tokens = 1;
                self.stray.start = offset;
            }
        }
    }

    fn flush_stray(&mut self) {
        if self.stray.tokens == 0 {
            return;
        }
        let text = decode_lossy(&self.stray.bytes);
        let message = format!("ignored {} token(s) between messages, where <|start|> was expected", self.stray.tokens);
        let start = self.stray.start;
        self.stray.bytes.clear();
        self.stray.tokens = 0;
        self.diagnose("stray-tokens", message, start, Some(text));
    }
}

/// Where `bytes` end before a character they hold only the start of (`bytes.len()` when none is cut).
fn complete_end(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=len.min(3) {
        let byte = bytes[len - back];
        if byte & 0xC0 == 0x80 {
            continue;
        }
        let needs = match byte {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if needs > back { len - back } else { len };
    }
    len
}

/// An assistant's header read back with no channel and some text: words the model wrote where a header belongs.
fn is_headerless(recovered: &RecoveredHeader) -> bool {
    recovered.header.role == "assistant" && recovered.header.channel.is_none() && !recovered.content.is_empty()
}

impl Drop for StreamParser {
    fn drop(&mut self) {
        let output = std::mem::take(&mut self.output);
        let header_tokens = std::mem::take(&mut self.header_tokens);
        recycled::give(recycled::Buffers { output, header_tokens });
    }
}

/// The buffers of parsers dropped on this thread, for the next parsers made on it. A new parser otherwise
/// allocates and grows its batch text, events, headers and header tokens anew, which for a short stream
/// cost more than parsing it. Bounded: a few sets are kept, and only buffers of modest capacity.
mod recycled {
    use std::cell::RefCell;

    use crate::output::BatchOutput;

    const MAX_KEPT: usize = 16;
    const MAX_HEADER_TOKENS_KEPT: usize = 64;

    #[derive(Default)]
    pub(super) struct Buffers {
        pub output: BatchOutput,
        pub header_tokens: Vec<u32>,
    }

    thread_local! {
        static KEPT: RefCell<Vec<Buffers>> = const { RefCell::new(Vec::new()) };
    }

    /// Empty buffers, recycled when some are kept.
    pub(super) fn take() -> Buffers {
        let kept = KEPT.try_with(|kept| kept.try_borrow_mut().ok()?.pop()).ok().flatten();
        kept.unwrap_or_default()
    }

    /// Keeps `buffers` (emptied) for a later parser if there is room and they are not large.
    pub(super) fn give(mut buffers: Buffers) {
        if !buffers.output.is_modest() || buffers.header_tokens.capacity() > MAX_HEADER_TOKENS_KEPT {
            return;
        }
        buffers.output.clear();
        buffers.header_tokens.clear();
        // `try_`: a parser dropped while the thread's storage is torn down, or (never today) while it
        // is borrowed, just frees its buffers.
        let _ = KEPT.try_with(|kept| {
            if let Ok(mut kept) = kept.try_borrow_mut() {
                if kept.len() < MAX_KEPT {
                    kept.push(buffers);
                }
            }
        });
    }
}
