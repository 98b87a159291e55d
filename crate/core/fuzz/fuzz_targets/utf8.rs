//! `Utf8Assembler` fed arbitrary bytes cut at fuzzer-chosen points must produce exactly
//! `String::from_utf8_lossy` of the whole, and `TextSink` must keep its UTF-16 length in step.
//!
//! Input layout: byte 0 = number of cuts (mod 8), then 2 bytes (u16 LE) per cut, then the payload.
//! Cut positions are taken modulo `payload.len() + 1` and sorted, so empty pieces occur too.

#![no_main]

use harmony_stream_core::utf8::{decode_lossy, utf16_len, TextSink, Utf8Assembler};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&count, rest)) = data.split_first() else { return };
    let count = usize::from(count % 8);
    if rest.len() < 2 * count {
        return;
    }
    let (cut_bytes, payload) = rest.split_at(2 * count);
    let mut cuts: Vec<usize> =
        cut_bytes.chunks_exact(2).map(|c| usize::from(u16::from_le_bytes([c[0], c[1]])) % (payload.len() + 1)).collect();
    cuts.sort_unstable();

    let expected = String::from_utf8_lossy(payload).into_owned();
    assert_eq!(decode_lossy(payload), expected);
    assert_eq!(utf16_len(&expected), expected.encode_utf16().count());

    let mut assembler = Utf8Assembler::default();
    let mut out = TextSink::default();
    let mut start = 0;
    for end in cuts.into_iter().chain([payload.len()]) {
        assembler.push(&payload[start..end], &mut out);
        start = end;
        // Whatever has been emitted is final: a prefix of the lossy decoding of the whole input,
        // and what is held back is at most one incomplete sequence, which the lossy decoding of the
        // bytes so far shows as a single U+FFFD.
        assert!(expected.starts_with(&out.text), "emitted text {:?} is not a prefix of {:?}", out.text, expected);
        assert_eq!(out.utf16_len, out.text.encode_utf16().count());
        let so_far = String::from_utf8_lossy(&payload[..end]);
        if assembler.is_empty() {
            assert_eq!(out.text, so_far, "nothing pending after {end} bytes");
        } else {
            assert_eq!(format!("{}\u{FFFD}", out.text), so_far, "one incomplete sequence pending after {end} bytes");
        }
    }
    assembler.flush(&mut out);
    assert!(assembler.is_empty());
    assert_eq!(out.text, expected);
    assert_eq!(out.utf16_len, expected.encode_utf16().count());
    // A second flush adds nothing.
    assembler.flush(&mut out);
    assert_eq!(out.text, expected);
});
