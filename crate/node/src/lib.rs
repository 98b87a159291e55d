//! Node-API binding of harmony-stream-core. Thin on purpose: it maps options, results and errors; the
//! streams live in Rust, in `StreamPool`s, and answer in the compact format (`compact.rs`). The public
//! API (objects, typed errors) is built in TypeScript (`src/`), on the same protocol the TypeScript
//! implementation speaks.
//!
//! Two ways in, for two call patterns:
//! - `parser*` functions: each native `HarmonyStreamParser` is a stream in its thread's default pool.
//!   They are plain functions with the tokens and the output in two arrays bound once (`parserBind`),
//!   because at one token per call the fixed costs of a crossing (unwrapping a class instance, reading
//!   typed-array arguments) are most of the work. `parserPush` takes even the stream id and the
//!   count from the bound input: converting arguments costs more than parsing a token.
//! - `NativePool`: a pool the caller drives, one call per engine step for many streams.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use harmony_stream_core::compact::{
    AT_BAD_INDEX, AT_DIAGNOSTICS, AT_RECORDS, AT_STATE, AT_STATUS, FIELDS, HEADER_SLOTS, NOT_INTERNED, OPEN, RECORD_SLOTS,
    STATUS_INTERNAL_ERROR, STATUS_OK,
};
use harmony_stream_core::tokens::FIRST_SPECIAL;
use harmony_stream_core::{
    Diagnostic, Encoder, FrameSlot, FrameTemplate, Header, ParseError, ParserOptions, PoolError, State, StreamPool, Vocabulary,
};
use napi::bindgen_prelude::{ToNapiValue, Uint32Array, Uint32ArraySlice, Uint8Array};
use napi::{sys, Env, Error, JsString, Result};
use napi_derive::napi;

/// Loaded once per process and shared by every stream (worker threads included: they share this library).
static VOCABULARY: Mutex<Option<Arc<Vocabulary>>> = Mutex::new(None);

fn shared_vocabulary() -> Result<Arc<Vocabulary>> {
    let slot = VOCABULARY.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    slot.clone().ok_or_else(|| Error::from_reason("call loadVocabulary first"))
}

/// Reads the o200k_base `.tiktoken` file at `path` unless a vocabulary is already loaded.
#[napi]
pub fn load_vocabulary(path: String) -> Result<()> {
    let mut slot = VOCABULARY.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if slot.is_none() {
        let data = std::fs::read(&path).map_err(|e| Error::from_reason(format!("cannot read vocabulary {path}: {e}")))?;
        let vocabulary = Vocabulary::from_tiktoken(&data).map_err(|e| Error::from_reason(format!("{path}: {e}")))?;
        *slot = Some(Arc::new(vocabulary));
    }
    Ok(())
}

/// The BPE encoder for rendering, built from the shared vocabulary on first use (about 0.1 s), then shared
/// by every thread.
static ENCODER: Mutex<Option<Arc<Encoder>>> = Mutex::new(None);

fn shared_encoder() -> Result<Arc<Encoder>> {
    let mut slot = ENCODER.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(encoder) = slot.as_ref() {
        return Ok(encoder.clone());
    }
    let vocabulary = shared_vocabulary()?;
    let encoder = Arc::new(Encoder::new(&vocabulary).map_err(|e| Error::from_reason(e.to_string()))?);
    *slot = Some(encoder.clone());
    Ok(encoder)
}

/// The o200k tokens of `text` as ordinary text (special-token spellings stay text).
#[napi(ts_return_type = "Uint32Array")]
pub fn encode_ordinary(text: String) -> Result<Tokens> {
    let tokens = shared_encoder()?.try_encode_ordinary(&text).map_err(|e| Error::from_reason(e.to_string()))?;
    Ok(Tokens(tokens))
}

/// Tokens as a `Uint32Array` in memory JavaScript allocates, copied there: napi-rs's `Uint32Array` hands over
/// the `Vec` as an external buffer, whose finalizer every garbage collection after a render then runs, once
/// per message (a first render of a long conversation left hundreds).
pub struct Tokens(Vec<u32>);

impl ToNapiValue for Tokens {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> Result<sys::napi_value> {
        let tokens = value.0;
        let bytes = std::mem::size_of_val(tokens.as_slice());
        let (mut buffer, mut data, mut array) = (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: `env` is the call's; the new buffer has room for `bytes`, which `tokens` holds.
        unsafe {
            if sys::napi_create_arraybuffer(env, bytes, &mut data, &mut buffer) != sys::Status::napi_ok {
                return Err(Error::from_reason("cannot allocate the tokens"));
            }
            if bytes > 0 {
                std::ptr::copy_nonoverlapping(tokens.as_ptr().cast::<u8>(), data.cast::<u8>(), bytes);
            }
            if sys::napi_create_typedarray(env, sys::TypedarrayType::uint32_array, tokens.len(), buffer, 0, &mut array)
                != sys::Status::napi_ok
            {
                return Err(Error::from_reason("cannot make the tokens' array"));
            }
        }
        Ok(array)
    }
}

#[napi(object)]
pub struct NativeHeader {
    pub role: String,
    pub name: Option<String>,
    pub channel: Option<String>,
    pub recipient: Option<String>,
    pub content_type: Option<String>,
}

#[napi(object)]
pub struct NativeDiagnostic {
    pub code: String,
    pub message: String,
    pub token_offset: f64,
    pub text: Option<String>,
}

#[napi(object)]
pub struct NativeParseError {
    pub code: String,
    pub message: String,
    pub token_offset: f64,
    pub header: Option<String>,
}

fn options(role: Option<String>, strict: bool, max_header_tokens: u32, tool_names: Vec<String>) -> ParserOptions {
    ParserOptions { role, strict, max_header_tokens: max_header_tokens as usize, tool_names }
}

fn pool_error(error: PoolError) -> Error {
    Error::from_reason(error.to_string())
}

/// Errors the caller can cause become statuses in `out` (the wrapper throws typed errors) and an empty
/// text; the rest (an output array too small: the wrapper sizes it) are thrown.
fn status_or_throw(error: PoolError, out: &mut [u32]) -> Result<&'static str> {
    if error.write_status(out) {
        Ok("")
    } else {
        Err(pool_error(error))
    }
}

/// UTF-16 units `js_string` keeps allocated between calls at most.
const MAX_KEPT_UNITS: usize = 1 << 16;

/// `text` as a JavaScript string without V8's UTF-8 decoder, which reads the bytes twice (to size the string,
/// then to fill it) and measured as more than the parse itself in profiles of a push at batch 16 and 64: ASCII
/// goes as Latin-1 (a copy), other text as UTF-16 transcoded here in one pass into `units` (reused).
///
/// # Safety
/// `env` must be the live env of the current call.
unsafe fn js_string(env: sys::napi_env, text: &str, units: &mut Vec<u16>) -> Result<sys::napi_value> {
    let mut value = std::ptr::null_mut();
    let status = if text.is_ascii() {
        // SAFETY: ASCII bytes are their Latin-1 code points; the pointer and length are the slice's.
        unsafe { sys::napi_create_string_latin1(env, text.as_ptr().cast(), text.len() as isize, &mut value) }
    } else {
        units.clear();
        units.extend(text.encode_utf16());
        // SAFETY: as above, for the UTF-16 code units just written.
        let status = unsafe { sys::napi_create_string_utf16(env, units.as_ptr(), units.len() as isize, &mut value) };
        // One huge text must not keep its buffer for good.
        if units.capacity() > MAX_KEPT_UNITS {
            *units = Vec::new();
        }
        status
    };
    if status != sys::Status::napi_ok {
        return Err(Error::from_reason("cannot create a string"));
    }
    Ok(value)
}

/// `js_string` for a `JsString` result.
fn create_string<'env>(env: &'env Env, text: &str, units: &mut Vec<u16>) -> Result<JsString<'env>> {
    // SAFETY: `env` is the current call's, and the value returned is a string.
    unsafe {
        let value = js_string(env.raw(), text, units)?;
        napi::bindgen_prelude::FromNapiValue::from_napi_value(env.raw(), value)
    }
}

// ---- the default pool of this thread, behind HarmonyStreamParser ----

struct ThreadPool {
    pool: StreamPool,
    /// Tokens of the next `parserPush`, then the compact output: bound by `parserBind`.
    input: Option<Uint32Array>,
    output: Option<Uint32Array>,
    /// `parserStepFrames`: the frames and the streams left to the caller (both reused).
    frames: Vec<u8>,
    slow: Vec<u32>,
    /// Where `parserStepFrames` copies each step's frames (`parserBindFrames`), how much of it is used, and
    /// whether `frames` holds a step's frames that did not fit in it (for the next chunk bound).
    chunk: Option<Uint8Array>,
    chunk_used: usize,
    frames_pending: bool,
    /// `parserDefineTemplate`'s templates, and the text `parserTakeLaneBound` returns.
    templates: Vec<Option<Arc<FrameTemplate>>>,
    lane_text: String,
    /// The UTF-16 units `js_string` writes (reused).
    units: Vec<u16>,
}

thread_local! {
    static THREAD_POOL: RefCell<Option<ThreadPool>> = const { RefCell::new(None) };
}

fn with_thread_pool<T>(call: impl FnOnce(&mut ThreadPool) -> Result<T>) -> Result<T> {
    THREAD_POOL.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(ThreadPool {
                pool: StreamPool::new(shared_vocabulary()?),
                input: None,
                output: None,
                frames: Vec::new(),
                slow: Vec::new(),
                chunk: None,
                chunk_used: 0,
                frames_pending: false,
                templates: Vec::new(),
                lane_text: String::new(),
                units: Vec::new(),
            });
        }
        call(slot.as_mut().expect("created above"))
    })
}

/// Binds the arrays `parserPush` reads from and writes results to. The wrapper keeps them
/// private (never resized, transferred or shared), so the memory stays valid while they are bound.
#[napi]
pub fn parser_bind(input: Uint32Array, output: Uint32Array) -> Result<()> {
    let (a, b) = (input.as_ptr() as usize, output.as_ptr() as usize);
    let (a_end, b_end) = (a + input.len() * 4, b + output.len() * 4);
    if a < b_end && b < a_end {
        return Err(Error::from_reason("the input and output arrays must not share memory"));
    }
    if input.len() < INPUT_TOKENS {
        return Err(Error::from_reason("input array too small"));
    }
    if output.len() < HEADER_SLOTS {
        return Err(Error::from_reason("output array too small"));
    }
    with_thread_pool(|thread| {
        thread.input = Some(input);
        thread.output = Some(output);
        Ok(())
    })
}

#[napi]
pub fn parser_open(role: Option<String>, strict: bool, max_header_tokens: u32, tool_names: Vec<String>) -> Result<u32> {
    with_thread_pool(|thread| thread.pool.open(options(role, strict, max_header_tokens, tool_names)).map_err(pool_error))
}

#[napi]
pub fn parser_close(id: u32) -> Result<bool> {
    with_thread_pool(|thread| Ok(thread.pool.close(id)))
}

/// Slots of the bound input: the stream id, the count of tokens, the ordinary tokens the wrapper took as
/// plain content since the stream's last push (`StreamPool::skip_content`), the reply (`REPLY_*` bits,
/// written here), then the tokens. Mirror INPUT_* in src/backend/native.ts, which writes them
/// (`__test__/parser/constants.test.mts` compares the two, as it does for every constant here that TypeScript
/// mirrors).
const INPUT_STREAM: usize = 0;
const INPUT_COUNT: usize = 1;
const INPUT_SKIPPED: usize = 2;
const INPUT_REPLY: usize = 3;
const INPUT_ROOM: usize = 4;
const INPUT_TOKENS: usize = 5;

/// Reply bits of `parserPush`, after the call: the stream takes plain content (`StreamPool::takes_plain_content`);
/// the call's tokens were all ordinary, the stream took plain content before them and takes it again after
/// them, so the call's text is what these tokens give inside any message (a token's own text, or a character
/// split across them), which the wrapper may keep; the same, except that they left a character pending (the
/// text is that of the whole characters before it, often none), so the wrapper may hold them back next time,
/// returning that text itself; a `<|start|>` would open a header silently
/// (`StreamPool::silent_room`, whose header room goes in INPUT_ROOM). Mirror REPLY_* in src/backend/native.ts.
const REPLY_PLAIN: u32 = 1;
const REPLY_OWN_TEXT: u32 = 2;
const REPLY_BEGINS_CHARACTER: u32 = 4;
const REPLY_OPENS: u32 = 8;
/// Reply bit of `parserEnd`: the stream was closed as well.
const REPLY_RELEASED: u32 = 16;

/// Parses tokens for a stream, both named in the bound input (`INPUT_*` slots); results in the bound
/// output. No parameters, not even `Env`: napi-rs then skips reading the call's arguments, which costs
/// about 50 ns; the text becomes a JavaScript string as napi-rs converts the result (`PushText`).
#[napi(ts_return_type = "string")]
pub fn parser_push() -> Result<PushText> {
    with_thread_pool(|thread| {
        let (Some(input), Some(output)) = (thread.input.as_mut(), thread.output.as_mut()) else {
            return Err(Error::from_reason("call parserBind first"));
        };
        let (id, count, skipped) = (input[INPUT_STREAM], input[INPUT_COUNT] as usize, input[INPUT_SKIPPED]);
        let tokens = input
            .get(INPUT_TOKENS..INPUT_TOKENS.saturating_add(count))
            .ok_or_else(|| Error::from_reason("count exceeds the bound input"))?;
        let pool = &mut thread.pool;
        if skipped > 0 {
            pool.skip_content(id, skipped);
        }
        // Ordinary tokens while the stream takes plain content: their text (or its lack) is theirs alone.
        let from_plain = count > 0 && tokens.iter().all(|&token| token < FIRST_SPECIAL) && pool.takes_plain_content(id);
        // SAFETY: the call is synchronous, so JavaScript cannot touch the buffer while Rust holds the
        // slice, and parserBind refused arrays that overlap.
        let out = unsafe { output.as_mut() };
        let text = match pool.call_one(id, Some(tokens), out) {
            Ok(text) => text,
            Err(error) => status_or_throw(error, out)?,
        };
        let empty = text.is_empty();
        let ok = out[AT_STATUS] == STATUS_OK && out[AT_DIAGNOSTICS] == 0;
        let plain = pool.takes_plain_content(id);
        let own_text = from_plain && ok && plain;
        // Plain before, not after, still in the message (the state this call wrote): the tokens' bytes end with
        // the start of a character.
        let begins_character = from_plain && ok && !plain && out[AT_STATE] == State::Content as u32;
        let (opens, room) = pool.silent_room(id);
        let reply = if plain { REPLY_PLAIN } else { 0 }
            | if own_text { REPLY_OWN_TEXT } else { 0 }
            | if begins_character { REPLY_BEGINS_CHARACTER } else { 0 }
            | if opens { REPLY_OPENS } else { 0 };
        // SAFETY: as above; the token slice is no longer used.
        let input = unsafe { input.as_mut() };
        input[INPUT_REPLY] = reply;
        input[INPUT_ROOM] = u32::try_from(room).unwrap_or(u32::MAX);
        Ok(PushText { empty })
    })
}

/// What `parserPush` returns: the text of the call, which stays in the thread's pool (`StreamPool::text`)
/// until it is made a JavaScript string here, where napi-rs hands over the env (the call itself takes none).
pub struct PushText {
    empty: bool,
}

impl ToNapiValue for PushText {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> Result<sys::napi_value> {
        THREAD_POOL.with(|cell| {
            let mut slot = cell.borrow_mut();
            let thread = slot.as_mut().ok_or_else(|| Error::from_reason("no parser pool on this thread"))?;
            let text = if value.empty { "" } else { thread.pool.text() };
            // SAFETY: napi-rs passes the env of the call being answered.
            unsafe { js_string(env, text, &mut thread.units) }
        })
    }
}

/// `parserFinish` for the object API, without arguments: the stream is named in the bound input
/// (`INPUT_STREAM`), and if the call left nothing to take (no diagnostics, error or header too long to
/// intern), it is closed too, which `REPLY_RELEASED` in `INPUT_REPLY` says: one crossing instead of two.
#[napi(ts_return_type = "string")]
pub fn parser_end() -> Result<PushText> {
    with_thread_pool(|thread| {
        let (Some(input), Some(output)) = (thread.input.as_mut(), thread.output.as_mut()) else {
            return Err(Error::from_reason("call parserBind first"));
        };
        // SAFETY: as in parser_push.
        let (input, out) = unsafe { (input.as_mut(), output.as_mut()) };
        let id = input[INPUT_STREAM];
        let empty = match thread.pool.call_one(id, None, out) {
            Ok(text) => text.is_empty(),
            Err(error) => status_or_throw(error, out)?.is_empty(),
        };
        let released = out[AT_STATUS] == STATUS_OK && out[AT_DIAGNOSTICS] == 0 && names_interned(out) && thread.pool.close(id);
        input[INPUT_REPLY] = if released { REPLY_RELEASED } else { 0 };
        Ok(PushText { empty })
    })
}

/// Whether every header field of the records in `out` was interned (none has to come from `takeHeaders`).
fn names_interned(out: &[u32]) -> bool {
    let records = out[AT_RECORDS] as usize;
    let mut at = HEADER_SLOTS;
    for _ in 0..records {
        let record = &out[at..at + RECORD_SLOTS];
        if (record[0] == OPEN || record[0] == FIELDS) && record[1..].contains(&NOT_INTERNED) {
            return false;
        }
        at += RECORD_SLOTS;
    }
    true
}

/// `parserOpen` without arguments, for the options most parsers have (no tool names; role `assistant` or
/// none), read from the bound input: `INPUT_STREAM` holds `OPEN_ROLE_*`, `INPUT_COUNT` the header bound and
/// `INPUT_SKIPPED` 1 for strict mode. Reading a string and an array argument cost more than the rest of
/// opening a stream.
#[napi]
pub fn parser_open_bound() -> Result<u32> {
    with_thread_pool(|thread| {
        let Some(input) = thread.input.as_ref() else { return Err(Error::from_reason("call parserBind first")) };
        let role = match input[INPUT_STREAM] {
            OPEN_ROLE_NONE => None,
            OPEN_ROLE_ASSISTANT => Some("assistant".to_owned()),
            other => return Err(Error::from_reason(format!("unknown role code {other}"))),
        };
        let options = ParserOptions {
            role,
            strict: input[INPUT_SKIPPED] != 0,
            max_header_tokens: input[INPUT_COUNT] as usize,
            tool_names: Vec::new(),
        };
        thread.pool.open(options).map_err(pool_error)
    })
}

/// Role codes of `parserOpenBound`. Mirror OPEN_ROLE_* in src/backend/native.ts.
const OPEN_ROLE_NONE: u32 = 0;
const OPEN_ROLE_ASSISTANT: u32 = 1;

#[napi]
pub fn parser_finish(env: &Env, id: u32) -> Result<JsString<'_>> {
    with_thread_pool(|thread| {
        let Some(output) = thread.output.as_mut() else { return Err(Error::from_reason("call parserBind first")) };
        // SAFETY: as in parser_push.
        let out = unsafe { output.as_mut() };
        let text = match thread.pool.call_one(id, None, out) {
            Ok(text) => text,
            Err(error) => status_or_throw(error, out)?,
        };
        create_string(env, text, &mut thread.units)
    })
}

#[napi]
pub fn parser_take_diagnostics(id: u32) -> Result<Vec<NativeDiagnostic>> {
    with_thread_pool(|thread| Ok(thread.pool.take_diagnostics(id).into_iter().map(diagnostic_to_js).collect()))
}

#[napi]
pub fn parser_take_headers(id: u32) -> Result<Vec<NativeHeader>> {
    with_thread_pool(|thread| Ok(thread.pool.take_headers(id).into_iter().map(header_to_js).collect()))
}

#[napi]
pub fn parser_take_error(id: u32) -> Result<Option<NativeParseError>> {
    with_thread_pool(|thread| Ok(thread.pool.take_error(id).map(error_to_js)))
}

/// The state code `parserState` and `NativePool#state` answer for an id that is not open. Mirrors
/// STATE_NOT_OPEN in src/backend/protocol.ts.
const STATE_NOT_OPEN: u32 = u32::MAX;

/// The stream's parser state code, or `STATE_NOT_OPEN` (0xFFFFFFFF) if `id` is not open.
#[napi]
pub fn parser_state(id: u32) -> Result<u32> {
    with_thread_pool(|thread| Ok(thread.pool.state(id).map_or(STATE_NOT_OPEN, |state| state as u32)))
}

/// Names the default pool interned, with ids `from + 1` onwards.
#[napi]
pub fn parser_names(from: u32) -> Result<Vec<String>> {
    with_thread_pool(|thread| Ok(thread.pool.names_from(from as usize).iter().map(|name| name.to_string()).collect()))
}

/// Panics inside the guard of stream `id`, so tests can check that a panic reaches JavaScript as an
/// error and the process lives on. Not part of the public API. Returns the status.
#[napi]
pub fn parser_debug_panic(id: u32) -> Result<u32> {
    with_thread_pool(|thread| Ok(thread.pool.debug_panic(id).unwrap_or(STATUS_INTERNAL_ERROR)))
}

// ---- the fast lane of many adapters per engine step (SsePool), on this thread's parsers ----

/// The codes of a frame template's slots: mirror FRAME_TEXT and FRAME_COUNTER in src/backend/frames.ts.
const FRAME_TEXT: u32 = 0;
const FRAME_COUNTER: u32 = 1;

/// Keeps a frame template under the slot in the bound input's `INPUT_STREAM` (below `MAX_TEMPLATES`),
/// replacing what it held: its frames are its literals with, between two of them, the text (`FRAME_TEXT`) or
/// the counter (`FRAME_COUNTER`), the kinds of its `INPUT_COUNT` slots, from `INPUT_TOKENS` on. The literals
/// come joined by U+0000, which none holds: they are JSON and SSE text, where that character is escaped.
/// A lane is then given a template by its slot (`parserSetLaneBound`): an adapter's templates, the same for all
/// its messages of one kind, cross once, not as strings at each message (which measured a tenth of a pool's
/// step at 64 streams), and as one string (an array of strings cost 3 µs to read). A lane keeps its template if
/// the slot is given another.
#[napi]
pub fn parser_define_template(literals: String) -> Result<()> {
    with_thread_pool(|thread| {
        let Some(input) = thread.input.as_ref() else { return Err(Error::from_reason("call parserBind first")) };
        let (slot, count) = (input[INPUT_STREAM], input[INPUT_COUNT] as usize);
        let index = slot as usize;
        if index >= MAX_TEMPLATES {
            return Err(Error::from_reason(format!("template slot {slot} is not below {MAX_TEMPLATES}")));
        }
        let kinds = input.get(INPUT_TOKENS..INPUT_TOKENS.saturating_add(count)).ok_or_else(|| Error::from_reason("too many slots"))?;
        let template = template_of(&literals, kinds)?;
        if thread.templates.len() <= index {
            thread.templates.resize(index + 1, None);
        }
        thread.templates[index] = Some(Arc::new(template));
        Ok(())
    })
}

/// A frame template from its literals joined by U+0000 and the kinds of its slots.
fn template_of(literals: &str, kinds: &[u32]) -> Result<FrameTemplate> {
    let slots = kinds
        .iter()
        .map(|&slot| match slot {
            FRAME_TEXT => Ok(FrameSlot::Text),
            FRAME_COUNTER => Ok(FrameSlot::Counter),
            _ => Err(Error::from_reason(format!("unknown frame slot {slot}"))),
        })
        .collect::<Result<Vec<_>>>()?;
    let literals = literals.split('\0').map(Box::from).collect();
    FrameTemplate::new(literals, slots).ok_or_else(|| Error::from_reason("a frame template has one literal more than slots"))
}

/// Slots of `parserDefineTemplate` at most. Mirrors MAX_TEMPLATES in src/backend/native.ts.
const MAX_TEMPLATES: usize = 4096;
/// `parserSetLaneBound`'s template slot for none (the lane writes no frames). Mirrors TEMPLATE_NONE in
/// src/backend/native.ts.
const TEMPLATE_NONE: u32 = u32::MAX;

/// Sets the fast lane of the parser named in the bound input (`INPUT_STREAM`) to the template kept under the
/// slot in `INPUT_COUNT` (`parserDefineTemplate`; TEMPLATE_NONE: none), its counter going on from
/// `INPUT_SKIPPED`. False if the parser is not open or not claimed. No parameters, as `parserPush`.
#[napi]
pub fn parser_set_lane_bound() -> Result<bool> {
    with_thread_pool(|thread| {
        let Some(input) = thread.input.as_ref() else { return Err(Error::from_reason("call parserBind first")) };
        let (id, slot, counter) = (input[INPUT_STREAM], input[INPUT_COUNT], input[INPUT_SKIPPED]);
        let template = match slot {
            TEMPLATE_NONE => None,
            _ => Some(
                thread
                    .templates
                    .get(slot as usize)
                    .and_then(Option::clone)
                    .ok_or_else(|| Error::from_reason(format!("no template in slot {slot}")))?,
            ),
        };
        Ok(thread.pool.set_shared_lane(id, template, counter))
    })
}

/// What the fast lane of the parser named in the bound input (`INPUT_STREAM`) did since it was last asked: its
/// text is returned, its tokens go in `INPUT_COUNT` and its counter in `INPUT_SKIPPED`; `INPUT_REPLY` is 0 if it
/// has no lane (nothing else is then written), 1 otherwise. No parameters, as `parserPush`: an object with a
/// string cost as much to make as the rest of a message's boundary step in the pool.
#[napi(ts_return_type = "string")]
pub fn parser_take_lane_bound() -> Result<LaneText> {
    with_thread_pool(|thread| {
        let Some(input) = thread.input.as_mut() else { return Err(Error::from_reason("call parserBind first")) };
        // SAFETY: as in parser_push.
        let input = unsafe { input.as_mut() };
        match thread.pool.take_lane(input[INPUT_STREAM]) {
            Some(progress) => {
                input[INPUT_REPLY] = 1;
                input[INPUT_COUNT] = u32::try_from(progress.tokens).unwrap_or(u32::MAX);
                input[INPUT_SKIPPED] = progress.counter;
                thread.lane_text = progress.text;
            }
            None => {
                input[INPUT_REPLY] = 0;
                thread.lane_text.clear();
            }
        }
        Ok(LaneText)
    })
}

/// What `parserTakeLaneBound` returns: the text it took, kept in the thread's pool until napi-rs converts it.
pub struct LaneText;

impl ToNapiValue for LaneText {
    unsafe fn to_napi_value(env: sys::napi_env, _: Self) -> Result<sys::napi_value> {
        THREAD_POOL.with(|cell| {
            let mut slot = cell.borrow_mut();
            let thread = slot.as_mut().ok_or_else(|| Error::from_reason("no parser pool on this thread"))?;
            let text = std::mem::take(&mut thread.lane_text);
            // SAFETY: napi-rs passes the env of the call being answered.
            let value = unsafe { js_string(env, &text, &mut thread.units) };
            // The buffer, emptied, serves the next call.
            thread.lane_text = text;
            thread.lane_text.clear();
            value
        })
    }
}

/// Lets frame stepper `owner` (non-zero) serve parser `id` in `parserStepFrames`; false if `id` is not open
/// or another stepper has it.
#[napi]
pub fn parser_claim(id: u32, owner: u32) -> Result<bool> {
    with_thread_pool(|thread| Ok(thread.pool.claim(id, owner)))
}

/// Where `parserStepFrames` writes into its `ends` argument: a status (a `COMPACT_STATUS_*`), the index
/// it concerns, how many streams the lane left to the caller, then one end per stream, then for each
/// stream left to the caller its index and its lane's report (`LaneReport`). Mirror FRAMES_* in
/// src/backend/frames.ts.
const FRAMES_STATUS: usize = 0;
const FRAMES_BAD_INDEX: usize = 1;
const FRAMES_SLOW: usize = 2;
const FRAMES_ENDS: usize = 3;
/// Slots `ends` needs per stream past `FRAMES_ENDS`: its end, and its index and report if left to the caller.
const FRAMES_SLOTS_PER_STREAM: usize = 3;

/// `parserStepFrames`' answer when a step's frames do not fit in the chunk bound: they wait here for the next
/// `parserBindFrames`. Mirrors FRAMES_NO_ROOM in src/backend/frames.ts.
const FRAMES_NO_ROOM: u32 = u32::MAX;

/// Binds the memory `parserStepFrames` copies frames into from now on, from its start: a chunk JavaScript
/// allocated and keeps while it is bound, never to be written twice (a socket may still hold a view of a
/// frame), replaced when full. Frames a step could not fit (FRAMES_NO_ROOM) are copied to its start: the chunk
/// must have room for them.
#[napi]
pub fn parser_bind_frames(chunk: Uint8Array) -> Result<()> {
    with_thread_pool(|thread| {
        let mut chunk = chunk;
        thread.chunk_used = 0;
        if thread.frames_pending {
            let frames = &thread.frames;
            // SAFETY: the call is synchronous and JavaScript keeps the chunk (the bound input's contract).
            let memory = unsafe { chunk.as_mut() };
            let target = memory.get_mut(..frames.len()).ok_or_else(|| Error::from_reason("the chunk has no room for the frames"))?;
            target.copy_from_slice(frames);
            thread.chunk_used = frames.len();
            thread.frames_pending = false;
        }
        thread.chunk = Some(chunk);
        Ok(())
    })
}

/// One engine step for many of this thread's parsers, those `owner` claimed (`StreamPool::step_frames`): copies the
/// frames the fast lane wrote into the chunk bound (`parserBindFrames`) after what earlier steps wrote there, and
/// returns where they start (their ends are in `ends`, laid out as above: `FRAMES_ENDS + FRAMES_SLOTS_PER_STREAM`
/// × streams slots), or FRAMES_NO_ROOM if they do not fit. A new buffer per step, which these copies replace,
/// cost more than the lane's work for the streams (fresh memory, a Buffer, its collection).
/// A panic outside the streams' own guards becomes a JavaScript error (`catch_unwind`), never an abort.
#[napi(catch_unwind)]
pub fn parser_step_frames(
    owner: u32,
    streams: Uint32ArraySlice,
    offsets: Uint32ArraySlice,
    tokens: Uint32ArraySlice,
    mut ends: Uint32ArraySlice,
) -> Result<u32> {
    let ends = writable(&mut ends, &[&streams, &offsets, &tokens])?;
    let count = streams.len();
    if ends.len() < FRAMES_ENDS + FRAMES_SLOTS_PER_STREAM * count {
        return Err(Error::from_reason("ends array too small"));
    }
    with_thread_pool(|thread| {
        let mut bytes = std::mem::take(&mut thread.frames);
        bytes.clear();
        thread.frames_pending = false;
        let mut slow = std::mem::take(&mut thread.slow);
        slow.clear();
        let (head, rest) = ends.split_at_mut(FRAMES_ENDS);
        let result = thread.pool.step_frames(owner, &streams, &offsets, &tokens, &mut bytes, &mut rest[..count], &mut slow);
        head.fill(0);
        match result {
            Ok(()) => {
                head[FRAMES_SLOW] = (slow.len() / 2) as u32;
                rest[count..count + slow.len()].copy_from_slice(&slow);
            }
            Err(error) => {
                let mut status = [0u32; HEADER_SLOTS];
                if !error.write_status(&mut status) {
                    return Err(pool_error(error));
                }
                head[FRAMES_STATUS] = status[AT_STATUS];
                head[FRAMES_BAD_INDEX] = status[AT_BAD_INDEX];
            }
        }
        thread.slow = slow;
        let at = thread.chunk_used;
        let fits = match thread.chunk.as_mut() {
            // SAFETY: as in parserBindFrames; the part written was never written before.
            Some(chunk) => match unsafe { chunk.as_mut() }.get_mut(at..at + bytes.len()) {
                Some(target) => {
                    target.copy_from_slice(&bytes);
                    true
                }
                None => false,
            },
            None => false,
        };
        thread.frames = bytes;
        if !fits {
            thread.frames_pending = true;
            return Ok(FRAMES_NO_ROOM);
        }
        thread.chunk_used = at + thread.frames.len();
        Ok(at as u32)
    })
}

// ---- pools the caller drives ----

/// A `StreamPool`: many streams, one call per engine step. Methods are called by `HarmonyStreamPool`.
#[napi]
pub struct NativePool {
    pool: StreamPool,
    /// The UTF-16 units `js_string` writes (reused).
    units: Vec<u16>,
}

#[napi]
impl NativePool {
    #[napi(constructor)]
    pub fn new() -> Result<Self> {
        Ok(NativePool { pool: StreamPool::new(shared_vocabulary()?), units: Vec::new() })
    }

    #[napi]
    pub fn open(&mut self, role: Option<String>, strict: bool, max_header_tokens: u32, tool_names: Vec<String>) -> Result<u32> {
        self.pool.open(options(role, strict, max_header_tokens, tool_names)).map_err(pool_error)
    }

    #[napi]
    pub fn close(&mut self, id: u32) -> bool {
        self.pool.close(id)
    }

    #[napi(getter)]
    pub fn size(&self) -> u32 {
        self.pool.len() as u32
    }

    #[napi]
    pub fn step<'env>(
        &mut self,
        env: &'env Env,
        streams: Uint32ArraySlice,
        offsets: Uint32ArraySlice,
        tokens: Uint32ArraySlice,
        mut out: Uint32ArraySlice,
    ) -> Result<JsString<'env>> {
        let out = writable(&mut out, &[&streams, &offsets, &tokens])?;
        let text = match self.pool.step(&streams, &offsets, &tokens, out) {
            Ok(text) => text,
            Err(error) => status_or_throw(error, out)?,
        };
        create_string(env, text, &mut self.units)
    }

    #[napi]
    pub fn finish<'env>(&mut self, env: &'env Env, streams: Uint32ArraySlice, mut out: Uint32ArraySlice) -> Result<JsString<'env>> {
        let out = writable(&mut out, &[&streams])?;
        let text = match self.pool.finish(&streams, out) {
            Ok(text) => text,
            Err(error) => status_or_throw(error, out)?,
        };
        create_string(env, text, &mut self.units)
    }

    #[napi]
    pub fn take_diagnostics(&mut self, id: u32) -> Vec<NativeDiagnostic> {
        self.pool.take_diagnostics(id).into_iter().map(diagnostic_to_js).collect()
    }

    #[napi]
    pub fn take_headers(&mut self, id: u32) -> Vec<NativeHeader> {
        self.pool.take_headers(id).into_iter().map(header_to_js).collect()
    }

    #[napi]
    pub fn take_error(&mut self, id: u32) -> Option<NativeParseError> {
        self.pool.take_error(id).map(error_to_js)
    }

    #[napi]
    pub fn state(&self, id: u32) -> u32 {
        self.pool.state(id).map_or(STATE_NOT_OPEN, |state| state as u32)
    }

    #[napi]
    pub fn names(&self, from: u32) -> Vec<String> {
        self.pool.names_from(from as usize).iter().map(|name| name.to_string()).collect()
    }

    /// Test hook, as `parserDebugPanic`.
    #[napi]
    pub fn debug_panic(&mut self, id: u32) -> u32 {
        self.pool.debug_panic(id).unwrap_or(STATUS_INTERNAL_ERROR)
    }
}

/// The caller's output array as a mutable slice, refusing one that overlaps an input.
fn writable<'a>(out: &'a mut Uint32ArraySlice, inputs: &[&[u32]]) -> Result<&'a mut [u32]> {
    // SAFETY: the call is synchronous, so JavaScript cannot touch the buffer while Rust holds the slice;
    // the only other views Rust holds are `inputs`, and overlapping them is refused below.
    let out = unsafe { out.as_mut() };
    let (out_start, out_end) = (out.as_ptr() as usize, out.as_ptr() as usize + std::mem::size_of_val(out));
    for input in inputs {
        let (start, end) = (input.as_ptr() as usize, input.as_ptr() as usize + std::mem::size_of_val(*input));
        if !input.is_empty() && start < out_end && out_start < end {
            return Err(Error::from_reason("the output array must not share memory with the inputs"));
        }
    }
    if out.len() < HEADER_SLOTS {
        return Err(Error::from_reason("output array too small"));
    }
    out[AT_STATUS] = 0;
    Ok(out)
}

fn header_to_js(header: Header) -> NativeHeader {
    NativeHeader {
        role: header.role,
        name: header.name,
        channel: header.channel,
        recipient: header.recipient,
        content_type: header.content_type,
    }
}

fn diagnostic_to_js(diagnostic: Diagnostic) -> NativeDiagnostic {
    NativeDiagnostic {
        code: diagnostic.code.to_owned(),
        message: diagnostic.message,
        token_offset: diagnostic.token_offset as f64,
        text: diagnostic.text,
    }
}

fn error_to_js(error: ParseError) -> NativeParseError {
    NativeParseError { code: error.code.to_owned(), message: error.message, token_offset: error.token_offset as f64, header: error.header }
}
