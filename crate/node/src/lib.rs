//! Node-API binding of harmony-stream-core. Thin on purpose: it maps options, results and errors and
//! keeps the per-stream state in Rust. The public API (objects, typed errors) is built in TypeScript
//! (`src/parser.ts`) on top of the engine protocol described in `src/engine.ts`, which the pure
//! TypeScript engine implements too.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use harmony_stream_core::{Diagnostic, Header, ParseError, ParserOptions, PushError, StreamParser, Vocabulary};
use napi::bindgen_prelude::Uint32ArraySlice;
use napi::{Error, Result};
use napi_derive::napi;

/// Loaded once per process and shared by every parser (worker threads included: they share this library).
static VOCABULARY: Mutex<Option<Arc<Vocabulary>>> = Mutex::new(None);

fn shared_vocabulary() -> Option<Arc<Vocabulary>> {
    VOCABULARY.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
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

// Layout of the `out` array, mirrored in src/engine.ts.
const OUT_STATUS: usize = 0;
const OUT_EVENTS: usize = 1;
const OUT_HEADERS: usize = 2;
const OUT_DIAGNOSTICS: usize = 3;
const OUT_BAD_INDEX: usize = 4;
const OUT_STATE: usize = 5;
const OUT_FIRST_EVENT: usize = 8;
const STATUS_OK: u32 = 0;
const STATUS_PARSE_ERROR: u32 = 1;
const STATUS_INVALID_TOKEN: u32 = 2;
const STATUS_FINISHED: u32 = 3;

/// One stream's parser. Methods are called by the TypeScript wrapper only.
#[napi]
pub struct NativeEngine {
    parser: StreamParser,
    error: Option<ParseError>,
    /// Set when a call panicked: the state may be inconsistent, so every later call fails.
    broken: bool,
}

#[napi]
impl NativeEngine {
    #[napi(constructor)]
    pub fn new(role: Option<String>, strict: bool, max_header_tokens: u32, tool_names: Vec<String>) -> Result<Self> {
        let vocabulary = shared_vocabulary().ok_or_else(|| Error::from_reason("call loadVocabulary first"))?;
        let options = ParserOptions { role, strict, max_header_tokens: max_header_tokens as usize, tool_names };
        Ok(NativeEngine { parser: StreamParser::new(vocabulary, options), error: None, broken: false })
    }

    /// Parses `tokens`; returns the batch text and writes the status and events into `out`.
    #[napi]
    pub fn push(&mut self, tokens: Uint32ArraySlice, mut out: Uint32ArraySlice) -> Result<String> {
        let tokens: &[u32] = &tokens;
        let out = writable(&mut out, tokens)?;
        self.guarded(out, |parser| parser.push(tokens))
    }

    #[napi]
    pub fn finish(&mut self, mut out: Uint32ArraySlice) -> Result<String> {
        let out = writable(&mut out, &[])?;
        self.guarded(out, StreamParser::finish)
    }

    /// Headers of the messages opened by the last call, in order.
    #[napi]
    pub fn take_headers(&mut self) -> Vec<NativeHeader> {
        self.parser.output_mut().headers.drain(..).map(header_to_js).collect()
    }

    #[napi]
    pub fn take_diagnostics(&mut self) -> Vec<NativeDiagnostic> {
        self.parser.output_mut().diagnostics.drain(..).map(diagnostic_to_js).collect()
    }

    #[napi]
    pub fn take_error(&mut self) -> Option<NativeParseError> {
        self.error.take().map(|e| NativeParseError {
            code: e.code.to_owned(),
            message: e.message,
            token_offset: e.token_offset as f64,
            header: e.header,
        })
    }

    /// Panics inside the guard, so tests can check that a panic reaches JavaScript as an error and the
    /// process lives on. Not part of the public API.
    #[napi]
    pub fn debug_panic(&mut self, mut out: Uint32ArraySlice) -> Result<String> {
        let out = writable(&mut out, &[])?;
        self.guarded(out, |_| panic!("deliberate panic (debugPanic)"))
    }

    #[napi(getter)]
    pub fn state(&self) -> u32 {
        self.parser.state() as u32
    }
}

impl NativeEngine {
    /// Runs `call`, catching a panic so that it reaches JavaScript as an error instead of aborting Node.
    fn guarded(&mut self, out: &mut [u32], call: impl FnOnce(&mut StreamParser) -> std::result::Result<(), PushError>) -> Result<String> {
        if self.broken {
            return Err(Error::from_reason("this parser failed earlier with an internal error and cannot be used"));
        }
        if out.len() < OUT_FIRST_EVENT {
            return Err(Error::from_reason("output array too small"));
        }
        let parser = &mut self.parser;
        let result = catch_unwind(AssertUnwindSafe(|| call(parser))).map_err(|panic| {
            let reason = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Error::from_reason(format!("internal error in the native parser (a Rust panic: {reason})"))
        });
        let result = match result {
            Ok(result) => result,
            Err(error) => {
                self.broken = true;
                return Err(error);
            }
        };
        out[OUT_BAD_INDEX] = 0;
        out[OUT_STATUS] = match result {
            Ok(()) => STATUS_OK,
            Err(PushError::Parse(error)) => {
                self.error = Some(error);
                STATUS_PARSE_ERROR
            }
            Err(PushError::InvalidToken { index, .. }) => {
                out[OUT_BAD_INDEX] = index as u32;
                STATUS_INVALID_TOKEN
            }
            Err(PushError::Finished) => STATUS_FINISHED,
        };
        let output = self.parser.output();
        let needed = OUT_FIRST_EVENT + 3 * output.events.len();
        if out.len() < needed {
            return Err(Error::from_reason(format!("output array too small: {needed} slots needed")));
        }
        out[OUT_EVENTS] = output.events.len() as u32;
        out[OUT_HEADERS] = output.headers.len() as u32;
        out[OUT_DIAGNOSTICS] = output.diagnostics.len() as u32;
        out[OUT_STATE] = self.parser.state() as u32;
        for (slot, event) in out[OUT_FIRST_EVENT..needed].chunks_exact_mut(3).zip(&output.events) {
            slot.copy_from_slice(&event.encode());
        }
        Ok(output.text.text.clone())
    }
}

/// The caller's output array as a mutable slice, refusing one that overlaps the input.
fn writable<'a>(out: &'a mut Uint32ArraySlice, input: &[u32]) -> Result<&'a mut [u32]> {
    // SAFETY: the call is synchronous, so JavaScript cannot touch the buffer while Rust holds the slice;
    // the only other view Rust holds is `input`, and overlapping it is refused below.
    let out = unsafe { out.as_mut() };
    let (out_start, out_end) = (out.as_ptr() as usize, out.as_ptr() as usize + std::mem::size_of_val(out));
    let (in_start, in_end) = (input.as_ptr() as usize, input.as_ptr() as usize + std::mem::size_of_val(input));
    if !input.is_empty() && in_start < out_end && out_start < in_end {
        return Err(Error::from_reason("the output array must not share memory with the tokens"));
    }
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
