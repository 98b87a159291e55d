//! The token → bytes table: o200k_base ranks from a `.tiktoken` file plus the Harmony special tokens.
//!
//! Built once per process and shared behind an `Arc`. Besides the bytes it records, per token, whether the
//! bytes are valid UTF-8 on their own, so the hot path can append such tokens without running the UTF-8
//! assembler, and their length in UTF-16 code units, which is what JavaScript string offsets count.

use base64::Engine as _;

use crate::tokens::{special_token_text, FIRST_SPECIAL, VOCAB_SIZE};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VocabularyError {
    /// A line is not `base64 SP rank`.
    Malformed { line: usize },
    /// A rank is outside 0..FIRST_SPECIAL or appears twice.
    BadRank { line: usize, rank: u64 },
    /// Some rank in 0..FIRST_SPECIAL never appeared.
    MissingRank { rank: u32 },
}

impl std::fmt::Display for VocabularyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VocabularyError::Malformed { line } => write!(f, "malformed vocabulary file: line {line} is not `base64 rank`"),
            VocabularyError::BadRank { line, rank } => {
                write!(f, "malformed vocabulary file: line {line} has rank {rank}, out of range or repeated")
            }
            VocabularyError::MissingRank { rank } => write!(f, "malformed vocabulary file: rank {rank} is missing"),
        }
    }
}

impl std::error::Error for VocabularyError {}

pub struct Vocabulary {
    /// Unique per vocabulary made in this process (never reused, unlike an address): what caches of
    /// results derived from token bytes (`header::cache`) are keyed by.
    id: u64,
    /// The bytes of every token, concatenated in id order.
    bytes: Vec<u8>,
    /// `offsets[id]..offsets[id + 1]` is the range of token `id` in `bytes`.
    offsets: Vec<u32>,
    /// Per id, packed for the content hot path (one 8-byte load per token): offset in `bytes` (bits 0–31),
    /// byte length (32–47), and the UTF-16 length of the token's text when its bytes are valid UTF-8 on
    /// their own, else 0 (bits 48–63; no token is empty, so 0 is free to mean "needs the assembler").
    entries: Vec<u64>,
}

/// Bytes readable past the last token, so short tokens can be copied with one fixed-size move (`TextSink::push_short`).
pub(crate) const PADDING: usize = 16;

/// A token's text with the `PADDING` bytes that start where it starts. Only the vocabulary makes these,
/// so `window` always begins with `text`'s bytes (what makes `TextSink::push_short` sound).
pub(crate) struct PaddedText<'a> {
    pub(crate) text: &'a str,
    pub(crate) window: &'a [u8; PADDING],
    pub(crate) utf16: usize,
}

impl Vocabulary {
    /// Parses the contents of `o200k_base.tiktoken` (lines of `base64(bytes) rank`).
    pub fn from_tiktoken(data: &[u8]) -> Result<Vocabulary, VocabularyError> {
        let ordinary = FIRST_SPECIAL as usize;
        let mut ranks: Vec<Option<Vec<u8>>> = vec![None; ordinary];
        for (index, line) in data.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            let number = index + 1;
            let space = line.iter().position(|&b| b == b' ').ok_or(VocabularyError::Malformed { line: number })?;
            let token = base64::engine::general_purpose::STANDARD
                .decode(&line[..space])
                .map_err(|_| VocabularyError::Malformed { line: number })?;
            let rank: u64 = std::str::from_utf8(&line[space + 1..])
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or(VocabularyError::Malformed { line: number })?;
            let slot = ranks.get_mut(rank as usize).filter(|slot| slot.is_none() && rank < ordinary as u64);
            match slot {
                Some(slot) if !token.is_empty() => *slot = Some(token),
                _ => return Err(VocabularyError::BadRank { line: number, rank }),
            }
        }
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut vocabulary = Vocabulary {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            bytes: Vec::with_capacity(data.len()),
            offsets: Vec::with_capacity(VOCAB_SIZE + 1),
            entries: Vec::with_capacity(VOCAB_SIZE),
        };
        for (rank, token) in ranks.into_iter().enumerate() {
            let token = token.ok_or(VocabularyError::MissingRank { rank: rank as u32 })?;
            vocabulary.push(&token);
        }
        for id in FIRST_SPECIAL..VOCAB_SIZE as u32 {
            let text = special_token_text(id).expect("every id from FIRST_SPECIAL on is special");
            vocabulary.push(text.as_bytes());
        }
        vocabulary.offsets.push(vocabulary.bytes.len() as u32);
        vocabulary.bytes.extend_from_slice(&[0; PADDING]);
        Ok(vocabulary)
    }

    fn push(&mut self, token: &[u8]) {
        let offset = self.bytes.len() as u64;
        self.offsets.push(offset as u32);
        self.bytes.extend_from_slice(token);
        // Token texts are at most a few hundred bytes; a UTF-16 length that does not fit counts as "use the assembler".
        let utf16 = std::str::from_utf8(token).map(crate::utf8::utf16_len).unwrap_or(0);
        let utf16 = if utf16 > 0xFFFF || token.len() > 0xFFFF { 0 } else { utf16 as u64 };
        self.entries.push(offset | (token.len() as u64 & 0xFFFF) << 32 | utf16 << 48);
    }

    /// The bytes of token `id`, or `None` if the id is outside the vocabulary.
    #[inline]
    pub fn bytes(&self, id: u32) -> Option<&[u8]> {
        let id = id as usize;
        if id >= VOCAB_SIZE {
            return None;
        }
        Some(&self.bytes[self.offsets[id] as usize..self.offsets[id + 1] as usize])
    }

    /// The text of token `id` with its UTF-16 length, when its bytes are valid UTF-8 on their own.
    #[inline]
    pub fn text(&self, id: u32) -> Option<(&str, usize)> {
        let entry = *self.entries.get(id as usize)?;
        let utf16 = (entry >> 48) as usize;
        if utf16 == 0 {
            return None;
        }
        let start = entry as u32 as usize;
        let bytes = &self.bytes[start..start + (entry >> 32 & 0xFFFF) as usize];
        // SAFETY: the UTF-16 length is non-zero only for tokens whose bytes passed `std::str::from_utf8` in `push`.
        Some((unsafe { std::str::from_utf8_unchecked(bytes) }, utf16))
    }

    /// Like `text`, with the `PADDING` bytes that start at the text (the text, then whatever follows it:
    /// later tokens or the padding) as one array, for `TextSink::push_short`.
    #[inline]
    pub(crate) fn padded_text(&self, id: u32) -> Option<PaddedText<'_>> {
        let (text, utf16) = self.text(id)?;
        let start = (self.entries[id as usize] as u32) as usize;
        // Every token is followed by at least PADDING bytes (later tokens or the padding), so this slice exists.
        let window = self.bytes[start..start + PADDING].try_into().expect("PADDING bytes follow every token");
        Some(PaddedText { text, window, utf16 })
    }

    /// This vocabulary's unique id (see the field).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub fn contains(&self, id: u32) -> bool {
        (id as usize) < VOCAB_SIZE
    }
}
