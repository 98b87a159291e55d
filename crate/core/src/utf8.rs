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

    #[inline]
    pub fn push_char(&mut self, c: char) {
        self.text.push(c);
        self.utf16_len += c.len_utf16();
    }

    pub fn push_str(&mut self, s: &str) {
        self.push(s, utf16_len(s));
    }

    pub fn clear(&mut self) {
        self.text.clear();
        self.utf16_len = 0;
    }
}

#[derive(Default, Debug)]
pub struct Utf8Assembler {
    /// The bytes of an incomplete character, valid so far: `pending[..len]`, at most 3 bytes.
    pending: [u8; 4],
    len: usize,
}

impl Utf8Assembler {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Decodes `bytes` after whatever is pending, appending complete text to `out` and keeping an
    /// incomplete trailing sequence for the next call.
    pub fn push(&mut self, bytes: &[u8], out: &mut TextSink) {
        let rest = self.complete_pending(bytes, out);
        if self.len > 0 {
            return; // `bytes` ended before the pending character did
        }
        if let Some(tail) = decode_into(rest, out) {
            self.pending[..tail.len()].copy_from_slice(tail);
            self.len = tail.len();
        }
    }

    /// Feeds the pending character the bytes it still needs, one at a time against the table of what may
    /// follow (no joined buffer, no full decode): when it completes it is appended; when a byte cannot
    /// continue it, the pending bytes are one maximal invalid subpart, so one U+FFFD, and that byte starts
    /// afresh. Returns the bytes after the ones consumed. What `decode_into` gives for pending + `bytes`.
    fn complete_pending<'a>(&mut self, mut bytes: &'a [u8], out: &mut TextSink) -> &'a [u8] {
        if self.len == 0 {
            return bytes;
        }
        let lead = self.pending[0];
        let total = sequence_len(lead);
        while let Some((&byte, rest)) = bytes.split_first() {
            if !continues(lead, self.len, byte) {
                self.len = 0;
                out.push_char(char::REPLACEMENT_CHARACTER);
                return bytes;
            }
            self.pending[self.len] = byte;
            self.len += 1;
            bytes = rest;
            if self.len == total {
                self.len = 0;
                out.push_char(decode_char(&self.pending[..total]));
                return bytes;
            }
        }
        bytes
    }

    /// Ends the stream: an incomplete sequence becomes one U+FFFD.
    pub fn flush(&mut self, out: &mut TextSink) {
        if self.len > 0 {
            self.len = 0;
            out.push_char(char::REPLACEMENT_CHARACTER);
        }
    }
}

/// Length of the sequence `lead` starts: 1 for ASCII, 0 for a byte no sequence starts with.
fn sequence_len(lead: u8) -> usize {
    match lead {
        0x00..=0x7F => 1,
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => 0,
    }
}

/// Whether `byte` may be byte number `at` (1, 2 or 3) of a sequence led by `lead` (Unicode Table 3-7:
/// the second byte's range excludes overlong forms, surrogates and code points past U+10FFFF).
fn continues(lead: u8, at: usize, byte: u8) -> bool {
    let range = match (lead, at) {
        (0xE0, 1) => 0xA0..=0xBF,
        (0xED, 1) => 0x80..=0x9F,
        (0xF0, 1) => 0x90..=0xBF,
        (0xF4, 1) => 0x80..=0x8F,
        _ => 0x80..=0xBF,
    };
    range.contains(&byte)
}

/// Appends the lossy decoding of `bytes` to `out`, except a trailing incomplete sequence, which is returned.
/// Character by character against `continues`: what reaches the assembler is short (the pieces of split
/// characters, a recovered header), where this beats `str::from_utf8` plus a separate UTF-16 count.
fn decode_into<'a>(bytes: &'a [u8], out: &mut TextSink) -> Option<&'a [u8]> {
    let mut at = 0;
    while let Some(&lead) = bytes.get(at) {
        let total = sequence_len(lead);
        if total <= 1 {
            // ASCII, or a byte no sequence starts with (one U+FFFD each).
            out.push_char(if total == 1 { char::from(lead) } else { char::REPLACEMENT_CHARACTER });
            at += 1;
            continue;
        }
        let mut len = 1;
        while len < total && at + len < bytes.len() && continues(lead, len, bytes[at + len]) {
            len += 1;
        }
        if len == total {
            out.push_char(decode_char(&bytes[at..at + len]));
        } else if at + len == bytes.len() {
            return Some(&bytes[at..]);
        } else {
            // A maximal subpart of a sequence that cannot complete: one U+FFFD.
            out.push_char(char::REPLACEMENT_CHARACTER);
        }
        at += len;
    }
    None
}

/// The character of a complete sequence that `continues` accepted.
fn decode_char(sequence: &[u8]) -> char {
    let payload = |byte: u8| u32::from(byte & 0x3F);
    let code = match *sequence {
        [a, b] => u32::from(a & 0x1F) << 6 | payload(b),
        [a, b, c] => u32::from(a & 0x0F) << 12 | payload(b) << 6 | payload(c),
        [a, b, c, d] => u32::from(a & 0x07) << 18 | payload(b) << 12 | payload(c) << 6 | payload(d),
        _ => unreachable!("sequences are 2 to 4 bytes"),
    };
    char::from_u32(code).expect("`continues` admits only scalar values")
}

/// Lossy decoding of a complete byte string (nothing held back).
pub fn decode_lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(chunks: &[&[u8]]) -> String {
        // Chunks one byte at a time as well: every path through `complete_pending`.
        if chunks.len() > 1 {
            let joined = chunks.concat();
            let bytes: Vec<&[u8]> = joined.chunks(1).collect();
            assert_eq!(feed_each(&bytes), feed_each(chunks), "byte by byte vs {chunks:?}");
        }
        feed_each(chunks)
    }

    fn feed_each(chunks: &[&[u8]]) -> String {
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
    fn every_short_sequence_of_boundary_bytes_decodes_as_lossy_decoding_does() {
        // Bytes at the edges of Unicode Table 3-7's ranges: every lead, continuation and invalid kind.
        const BYTES: [u8; 19] =
            [0x41, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF];
        let mut bytes = Vec::new();
        for n in 1..=4u32 {
            for index in 0..BYTES.len().pow(n) {
                bytes.clear();
                let mut rest = index;
                for _ in 0..n {
                    bytes.push(BYTES[rest % BYTES.len()]);
                    rest /= BYTES.len();
                }
                let expected = String::from_utf8_lossy(&bytes);
                let split: Vec<&[u8]> = bytes.chunks(1).collect();
                assert_eq!(feed_each(&split), expected, "{bytes:x?}");
                // Whole, then before a trailing ASCII byte in another token.
                assert_eq!(feed_each(&[&bytes, b"z"]), format!("{expected}z"), "{bytes:x?} z");
            }
        }
    }

    #[test]
    fn utf16_length_counts_surrogate_pairs() {
        assert_eq!(utf16_len("a你💖"), 4);
    }
}
