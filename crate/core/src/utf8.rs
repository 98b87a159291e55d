//! UTF-8 assembly across tokens and batches.
//!
//! Tokens are byte sequences, and a character may be split across two or more of them. The assembler
//! holds an incomplete sequence until it completes, and replaces invalid bytes with U+FFFD, one per
//! maximal invalid subpart (the WHATWG / Unicode rule `String::from_utf8_lossy` uses). So the text it emits
//! for a message is exactly the lossy decoding of all the message's bytes, however they were split.

use crate::vocabulary::{PaddedText, PADDING};

/// Length of `s` in UTF-16 code units, the unit of JavaScript string offsets.
#[inline]
pub fn utf16_len(s: &str) -> usize {
    // Each char contributes its lead byte: 1 unit for 1–3 byte sequences, 2 (a surrogate pair) for 4.
    s.bytes()
        .map(|b| match b {
            0x80..=0xBF => 0,
            0xF0..=0xFF => 2,
            _ => 1,
        })
        .sum()
}

/// A growing string plus its UTF-16 length, kept in step so offsets never need a rescan.
#[derive(Default, Debug)]
pub struct TextSink {
    pub text: String,
    pub utf16_len: usize,
}

impl TextSink {
    #[inline]
    pub fn push(&mut self, s: &str, utf16: usize) {
        self.text.push_str(s);
        self.utf16_len += utf16;
    }

    /// `push` for text from `Vocabulary::padded_text`: a short text is copied with one fixed 16-byte move
    /// instead of a `memcpy` call (most tokens are a few bytes, and the call dominated the content path).
    #[inline]
    pub(crate) fn push_short(&mut self, token: PaddedText<'_>) {
        let n = token.text.len();
        if n > PADDING {
            return self.push(token.text, token.utf16);
        }
        // SAFETY: `reserve` makes room for PADDING bytes past the end, so the 16-byte write stays inside the
        // allocation; `window` begins with the bytes of `text` (PaddedText's invariant), so the first `n`
        // bytes that become part of the string are `text`, valid UTF-8.
        unsafe {
            let bytes = self.text.as_mut_vec();
            bytes.reserve(PADDING);
            let end = bytes.len();
            std::ptr::write_unaligned(bytes.as_mut_ptr().add(end) as *mut [u8; PADDING], *token.window);
            bytes.set_len(end + n);
        }
        self.utf16_len += token.utf16;
    }

    pub fn push_str(&mut self, s: &str) {
        self.push(s, utf16_len(s));
    }

    pub fn clear(&mut self) {
        self.text.clear();
        self.utf16_len = 0;
    }
}

const REPLACEMENT: &str = "\u{FFFD}";

#[derive(Default, Debug)]
pub struct Utf8Assembler {
    /// Bytes of an incomplete (so far valid) sequence: at most 3.
    pending: Vec<u8>,
    /// Reused buffer for pending + new bytes.
    scratch: Vec<u8>,
}

impl Utf8Assembler {
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Decodes `bytes` after whatever is pending, appending complete text to `out` and keeping an
    /// incomplete trailing sequence for the next call.
    pub fn push(&mut self, bytes: &[u8], out: &mut TextSink) {
        if self.pending.is_empty() {
            if let Some(rest) = decode_into(bytes, out) {
                self.pending.extend_from_slice(rest);
            }
            return;
        }
        let mut joined = std::mem::take(&mut self.scratch);
        joined.clear();
        joined.extend_from_slice(&self.pending);
        joined.extend_from_slice(bytes);
        self.pending.clear();
        if let Some(rest) = decode_into(&joined, out) {
            self.pending.extend_from_slice(rest);
        }
        self.scratch = joined;
    }

    /// Ends the stream: an incomplete sequence becomes one U+FFFD.
    pub fn flush(&mut self, out: &mut TextSink) {
        if !self.pending.is_empty() {
            self.pending.clear();
            out.push(REPLACEMENT, 1);
        }
    }
}

/// Appends the lossy decoding of `bytes` to `out`, except a trailing incomplete sequence, which is returned.
fn decode_into<'a>(mut bytes: &'a [u8], out: &mut TextSink) -> Option<&'a [u8]> {
    loop {
        match std::str::from_utf8(bytes) {
            Ok(text) => {
                out.push_str(text);
                return None;
            }
            Err(error) => {
                let (valid, rest) = bytes.split_at(error.valid_up_to());
                // SAFETY: `valid_up_to` marks the end of the longest valid prefix.
                out.push_str(unsafe { std::str::from_utf8_unchecked(valid) });
                match error.error_len() {
                    Some(invalid) => {
                        out.push(REPLACEMENT, 1);
                        bytes = &rest[invalid..];
                    }
                    None => return Some(rest),
                }
            }
        }
    }
}

/// Lossy decoding of a complete byte string (nothing held back).
pub fn decode_lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(chunks: &[&[u8]]) -> String {
        let mut assembler = Utf8Assembler::default();
        let mut out = TextSink::default();
        for chunk in chunks {
            assembler.push(chunk, &mut out);
        }
        assembler.flush(&mut out);
        assert_eq!(out.utf16_len, out.text.encode_utf16().count());
        out.text
    }

    #[test]
    fn split_characters_are_joined() {
        let heart = "💖".as_bytes();
        assert_eq!(feed(&[&heart[..1], &heart[1..3], &heart[3..]]), "💖");
        assert_eq!(feed(&[b"a\xE4", b"\xBD", b"\xA0b"]), "a你b");
    }

    #[test]
    fn matches_lossy_decoding_for_every_split() {
        let cases: [&[u8]; 5] = [
            b" \xF0\x9F \xF0\x9Fworked",
            b"\xF0\x9F\x92",
            b"ok\xFF\xFEmore\xC3",
            b"\xE0\x80\xAF\xED\xA0\x80x",
            "混合 text 🧑‍🤝‍🧑 done".as_bytes(),
        ];
        for bytes in cases {
            let expected = String::from_utf8_lossy(bytes).into_owned();
            for a in 0..=bytes.len() {
                for b in a..=bytes.len() {
                    assert_eq!(feed(&[&bytes[..a], &bytes[a..b], &bytes[b..]]), expected, "split {a} {b} of {bytes:?}");
                }
            }
        }
    }

    #[test]
    fn utf16_length_counts_surrogate_pairs() {
        assert_eq!(utf16_len("a你💖"), 4);
    }
}
