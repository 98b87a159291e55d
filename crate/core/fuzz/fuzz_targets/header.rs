//! Header parsing on arbitrary text: `parse_header` (strict and lenient rules) and `recover_header`.
//!
//! Input layout: byte 0 picks the given role (none, `assistant`, `tool`, or the text's first word);
//! the rest, decoded lossily, is the header text. Tool names for the lenient rules are derived from the
//! text: each `to=` word's recipient and a prefix of it (so `to=functions.shelljson` yields a tool
//! `functions.shel` that the recipient is glued to).

#![no_main]

use harmony_stream_core::header::{parse_header, recover_header, Header, HeaderProblem, HeaderRules, ROLES};
use libfuzzer_sys::fuzz_target;

fn tool_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    for word in text.split_whitespace().filter_map(|w| w.strip_prefix("to=")) {
        if names.len() >= 4 || word.is_empty() {
            break;
        }
        names.push(word.to_owned());
        let mut cut = word.len() * 2 / 3;
        while !word.is_char_boundary(cut) {
            cut -= 1;
        }
        if cut > 0 {
            names.push(word[..cut].to_owned());
        }
    }
    names
}

fn check_channel(channel: &Option<String>, what: &str) {
    if let Some(channel) = channel {
        assert!(!channel.is_empty(), "{what}: empty channel");
        assert!(!channel.contains(|c: char| c.is_whitespace() || c == '<'), "{what}: channel {channel:?} runs past its end");
    }
}

fn is_repair(problem: &HeaderProblem) -> bool {
    !problem.is_reference_error()
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let first_word = text.split_whitespace().next().map(str::to_owned);
    let given_role: Option<&str> = match selector % 4 {
        0 => None,
        1 => Some("assistant"),
        2 => Some("tool"),
        _ => first_word.as_deref(),
    };
    let tools = tool_names(&text);

    // Strict (reference) rules: only the reference's four errors are ever reported.
    let strict = parse_header(&text, given_role, HeaderRules { repair: false, tool_names: &tools });
    for problem in &strict.problems {
        assert!(problem.is_reference_error(), "strict rules reported a repair: {problem:?}");
        assert!(!problem.message().is_empty());
    }
    check_channel(&strict.header.channel, "strict");
    if let Some(role) = given_role {
        assert_eq!(strict.header.role, role, "strict: the given role is kept");
    }

    // Lenient rules: no leaked `<|…|>` marker survives in the recipient or content type.
    let lenient = parse_header(&text, given_role, HeaderRules { repair: true, tool_names: &tools });
    let Header { recipient, content_type, .. } = &lenient.header;
    for (what, value) in [("recipient", recipient), ("content type", content_type)] {
        if let Some(value) = value {
            assert!(!value.contains("<|"), "lenient {what} {value:?} keeps a marker (header {text:?})");
            assert!(!value.is_empty(), "lenient {what} is Some(\"\")");
        }
    }
    check_channel(&lenient.header.channel, "lenient");
    if let Some(role) = given_role {
        assert_eq!(lenient.header.role, role, "lenient: the given role is kept");
    }
    // Every repair is reported: when none was reported, the lenient result is the strict one
    // (apart from an empty recipient, `to=`, which lenient rules drop).
    if !lenient.problems.iter().any(is_repair) {
        let mut expected = strict.header.clone();
        if expected.recipient.as_deref() == Some("") {
            expected.recipient = None;
        }
        assert_eq!(lenient.header, expected, "an unreported repair changed the header of {text:?}");
        assert_eq!(lenient.problems, strict.problems, "an unreported repair changed the problems of {text:?}");
    }

    // Recovery of a header that never reached `<|message|>`.
    // A header cut by maxHeaderTokens keeps trailing whitespace (its content goes on).
    let continuing = recover_header(&text, given_role, true);
    assert_eq!(continuing.content.trim_start(), continuing.content, "continuing content is trimmed at the start only");
    let recovered = recover_header(&text, given_role, false);
    assert_eq!(continuing.content.trim_end(), recovered.content, "the two recoveries differ only in trailing whitespace");
    check_channel(&recovered.header.channel, "recovered");
    match given_role {
        Some(role) => assert_eq!(recovered.header.role, role),
        None => assert!(ROLES.contains(&recovered.header.role.as_str())),
    }
    assert_eq!(recovered.content.trim(), recovered.content, "recovered content is trimmed");
    assert!(recovered.content.len() <= text.len());
    assert!(recovered.header.recipient.is_none() && recovered.header.content_type.is_none());
});
