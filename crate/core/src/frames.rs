//! Wire frames written straight from a stream's text: the fast lane of many streams per engine step.
//!
//! A gateway turns each text delta into an SSE frame whose bytes, apart from the text (and, for the
//! Responses API, a sequence number), are the same for every delta of a message: the adapters know them
//! when the message opens. They hand them over as a `FrameTemplate`; while the stream stays inside that
//! message and its tokens are ordinary text, the pool writes each step's frame here without going back to
//! JavaScript (`StreamPool::step_frames`). Everything else (headers, closes, diagnostics, errors) takes the
//! slow lane: the adapter itself, on the same parser. The TypeScript mirror is `src/backend/js/lane.ts`.

use std::sync::Arc;

/// What goes between two literal pieces of a template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameSlot {
    /// The step's text as a JSON string (quoted and escaped exactly as `JSON.stringify` writes it).
    Text,
    /// The lane's counter in decimal (the Responses API's `sequence_number`); it advances by one per frame
    /// the lane writes.
    Counter,
}

/// The bytes of one frame around its variable parts: `literals[0] slot[0] literals[1] … literals[n]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameTemplate {
    literals: Vec<Box<str>>,
    slots: Vec<FrameSlot>,
}

impl FrameTemplate {
    /// None unless there is exactly one literal more than there are slots.
    pub fn new(literals: Vec<Box<str>>, slots: Vec<FrameSlot>) -> Option<FrameTemplate> {
        (literals.len() == slots.len() + 1).then_some(FrameTemplate { literals, slots })
    }

    /// A template without slots stands for text that is sent nowhere (a message the adapter drops): the
    /// lane writes no frame for it, and its counter stays.
    pub fn is_silent(&self) -> bool {
        self.slots.is_empty()
    }

    /// Appends the frame for `text` to `out`, with `counter` in its counter slots.
    pub fn write(&self, text: &str, counter: u32, out: &mut Vec<u8>) {
        out.extend_from_slice(self.literals[0].as_bytes());
        for (slot, literal) in self.slots.iter().zip(&self.literals[1..]) {
            match slot {
                FrameSlot::Text => write_json_string(text, out),
                FrameSlot::Counter => write_decimal(counter, out),
            }
            out.extend_from_slice(literal.as_bytes());
        }
    }
}

/// A stream's fast lane: the template of the open message's frames if the adapter gave one, and what the
/// lane did since the adapter last looked (`StreamPool::take_lane`), which the adapter adds to its own
/// bookkeeping before it goes on. Without a template the lane still takes tokens that produce nothing.
#[derive(Debug, Default)]
pub struct Lane {
    /// Shared: a binding keeps each template once, for every lane that uses it.
    pub template: Option<Arc<FrameTemplate>>,
    pub counter: u32,
    /// The text written since the adapter last looked: the open message's content goes on from it.
    pub text: String,
    /// Tokens consumed since the adapter last looked.
    pub tokens: u64,
}

/// What `take_lane` hands back to the adapter.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LaneProgress {
    pub text: String,
    pub tokens: u64,
    pub counter: u32,
}

/// `text` as a JSON string literal, byte for byte as `JSON.stringify` writes a well-formed string: `"` and
/// `\` escaped, `\b \f \n \r \t` by name, other controls below 0x20 as `\u00xx` (lowercase hex), and
/// everything else (DEL, U+2028, non-ASCII) as it is.
pub fn write_json_string(text: &str, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(text.len() + 2);
    out.push(b'"');
    let bytes = text.as_bytes();
    let mut clean = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => &[b'\\', b'u', b'0', b'0', HEX[(byte >> 4) as usize], HEX[(byte & 0xf) as usize]],
            _ => continue,
        };
        out.extend_from_slice(&bytes[clean..i]);
        out.extend_from_slice(escape);
        clean = i + 1;
    }
    out.extend_from_slice(&bytes[clean..]);
    out.push(b'"');
}

fn write_decimal(mut value: u32, out: &mut Vec<u8>) {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> String {
        let mut out = Vec::new();
        write_json_string(text, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn strings_are_escaped_as_json_stringify_does() {
        assert_eq!(json(""), r#""""#);
        assert_eq!(json("plain text"), r#""plain text""#);
        assert_eq!(json("a\"b\\c/d"), r#""a\"b\\c/d""#);
        assert_eq!(json("\n\r\t\u{8}\u{c}"), r#""\n\r\t\b\f""#);
        assert_eq!(json("\u{0}\u{1f}\u{7f}"), "\"\\u0000\\u001f\u{7f}\"");
        assert_eq!(json("é 漢 😀 \u{2028}"), "\"é 漢 😀 \u{2028}\"");
    }

    #[test]
    fn a_template_writes_its_literals_around_the_text_and_the_counter() {
        let template = FrameTemplate::new(
            vec!["event: d\ndata: {\"n\":".into(), ",\"delta\":".into(), ",\"again\":".into(), "}\n\n".into()],
            vec![FrameSlot::Counter, FrameSlot::Text, FrameSlot::Text],
        )
        .unwrap();
        let mut out = Vec::new();
        template.write("hi\n", 9, &mut out);
        template.write("", 10, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "event: d\ndata: {\"n\":9,\"delta\":\"hi\\n\",\"again\":\"hi\\n\"}\n\nevent: d\ndata: {\"n\":10,\"delta\":\"\",\"again\":\"\"}\n\n"
        );
        assert!(FrameTemplate::new(vec!["a".into()], vec![FrameSlot::Text]).is_none());
    }
}
