//! harmony-stream-core: a streaming parser for the Harmony format of OpenAI's gpt-oss models.
//!
//! Plain Rust with no binding concerns; `crate/node` exposes it to Node.js. The TypeScript fallback in
//! `src/backend/js/` mirrors these modules one for one: tokens, vocabulary, utf8, header, output, stream_parser,
//! compact (the output format of the fast path), pool (many streams per call) and frames (wire frames
//! written by the pool's fast lane). `encoder` (BPE for
//! rendering prompts) has no TypeScript mirror: the fallback encodes with gpt-tokenizer.

pub mod compact;
pub mod encoder;
pub mod frames;
pub mod header;
pub mod output;
pub mod pool;
pub mod stream_parser;
pub mod tokens;
pub mod utf8;
pub mod vocabulary;

pub use encoder::{Encoder, EncoderError};
pub use frames::{FrameSlot, FrameTemplate, LaneProgress};
pub use header::Header;
pub use output::{BatchOutput, Diagnostic, Event, ParseError};
pub use pool::{PoolError, StreamPool};
pub use stream_parser::{ParserOptions, PushError, State, StreamParser, DEFAULT_MAX_HEADER_TOKENS};
pub use tokens::Terminator;
pub use vocabulary::{Vocabulary, VocabularyError};
