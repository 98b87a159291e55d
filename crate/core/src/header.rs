//! Parsing a message header: the text between `<|start|>` (or the parser start) and `<|message|>`.
//!
//! Follows the reference parser step by step (channel first, then role, then recipient and content type;
//! see docs/SEMANTICS.md "Header rules"), with three deliberate changes, all documented there:
//! - a content type `<|constrain|>json` or ` json` is reported as `json` (and in lenient mode `<|constrain|> json`);
//! - a lone `<|constrain|>json` after the channel is a content type, not a recipient (openai/harmony PR #144);
//! - instead of stopping at the first problem, every problem is collected and a best-effort header is
//!   still produced, so lenient mode can recover; strict mode turns the first problem into the
//!   reference's error.
//!
//! Lenient mode also repairs what models are seen to emit (docs/SEMANTICS.md "Malformed model output (A–H)"): repeated
//! `<|channel|>` markers, a role glued to a channel (`assistantfinal`), a channel word without its marker,
//! markers leaked into the recipient, a duplicated `to=`, and (given the request's tool names) a content
//! type glued to the recipient (`to=functions.shelljson`). Each repair is reported as a problem too.

/// These four are mirrored in src/backend/js/header.ts (`__test__/parser/constants.test.mts` compares them).
pub const ROLES: [&str; 5] = ["user", "assistant", "system", "developer", "tool"];
pub const CHANNELS: [&str; 3] = ["analysis", "commentary", "final"];

const CHANNEL_MARKER: &str = "<|channel|>";
const CONSTRAIN_MARKER: &str = "<|constrain|>";
/// The namespace of the request's function tools in recipients (`functions.get_weather`).
const FUNCTIONS: &str = "functions.";

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Header {
    pub role: String,
    /// The author of a tool message, e.g. `functions.get_weather`.
    pub name: Option<String>,
    pub channel: Option<String>,
    pub recipient: Option<String>,
    pub content_type: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeaderProblem {
    /// `<|channel|>` followed by nothing usable.
    EmptyChannel,
    /// No role given and no words in the header.
    MissingRole,
    /// A single word that is not a role (several words would make a tool author).
    UnknownRole(String),
    /// Words left after role, recipient and content type.
    ExtraWords(String),
    // Repairs, made in lenient mode only:
    /// `<|constrain|>` followed by a space (`<|constrain|> json`), or doubled; joined to the type after it.
    SpacedConstrain(String),
    /// More than one `<|channel|>` marker; the extra ones (listed) were removed.
    RepeatedChannel(String),
    /// A role glued to a channel or role word, e.g. `assistantfinal`.
    GluedRole(String),
    /// A channel name without `<|channel|>` in front of it.
    MissingChannelMarker(String),
    /// A recipient with a leaked `<|…|>` marker, cut before it.
    LeakedMarker(String),
    /// `to=` repeated with the same recipient.
    DuplicateRecipient(String),
    /// A content type glued to a known tool name, e.g. `functions.shelljson`.
    GluedContentType(String),
    /// A declared tool whose name holds spaces, split into words in the header and joined back.
    SpacedRecipient(String),
    BareRecipient(String),
    EmptyRecipient(String),
}

impl HeaderProblem {
    /// Stable code, shared by diagnostics and errors.
    pub fn code(&self) -> &'static str {
        match self {
            HeaderProblem::EmptyChannel => "empty-channel",
            HeaderProblem::MissingRole => "missing-role",
            HeaderProblem::UnknownRole(_) => "unknown-role",
            HeaderProblem::ExtraWords(_) => "extra-header-words",
            HeaderProblem::SpacedConstrain(_) => "spaced-constrain",
            HeaderProblem::RepeatedChannel(_) => "repeated-channel",
            HeaderProblem::GluedRole(_) => "glued-role",
            HeaderProblem::MissingChannelMarker(_) => "missing-channel-marker",
            HeaderProblem::LeakedMarker(_) => "leaked-marker",
            HeaderProblem::DuplicateRecipient(_) => "duplicate-recipient",
            HeaderProblem::GluedContentType(_) => "glued-content-type",
            HeaderProblem::SpacedRecipient(_) => "spaced-recipient",
            HeaderProblem::BareRecipient(_) => "bare-recipient",
            HeaderProblem::EmptyRecipient(_) => "empty-recipient",
        }
    }

    /// Whether strict mode (the reference) fails on this problem; repairs are lenient-only.
    pub fn is_reference_error(&self) -> bool {
        matches!(
            self,
            HeaderProblem::EmptyChannel | HeaderProblem::MissingRole | HeaderProblem::UnknownRole(_) | HeaderProblem::ExtraWords(_)
        )
    }

    /// The reference parser's error text for this problem, verbatim, so users can search for it;
    /// for repairs, what was repaired.
    pub fn message(&self) -> String {
        match self {
            HeaderProblem::EmptyChannel => "channel marker present but no channel value found in header".to_owned(),
            HeaderProblem::MissingRole => "message header did not contain a role".to_owned(),
            HeaderProblem::UnknownRole(word) => format!("Unknown role: {word}"),
            HeaderProblem::ExtraWords(words) => {
                format!("unexpected tokens remaining in message header: {:?}", Some(words))
            }
            HeaderProblem::SpacedConstrain(word) => format!("<|constrain|> joined to the type after it: {word}"),
            HeaderProblem::RepeatedChannel(extra) => format!("repeated <|channel|> markers; removed: {extra}"),
            HeaderProblem::GluedRole(word) => format!("role glued to the next word: {word}"),
            HeaderProblem::MissingChannelMarker(word) => format!("channel without <|channel|>: {word}"),
            HeaderProblem::LeakedMarker(recipient) => format!("special token text in the recipient, cut: {recipient}"),
            HeaderProblem::DuplicateRecipient(word) => format!("repeated recipient removed: {word}"),
            HeaderProblem::GluedContentType(recipient) => format!("content type glued to the recipient, split: {recipient}"),
            HeaderProblem::SpacedRecipient(name) => format!("a declared tool whose name holds spaces, read as one recipient: {name}"),
            HeaderProblem::BareRecipient(name) => format!("a declared tool named without its namespace, read as that tool: {name}"),
            HeaderProblem::EmptyRecipient(words) => format!("{words} with no recipient after it; read as no recipient"),
        }
    }
}

#[derive(Debug)]
pub struct ParsedHeader {
    pub header: Header,
    pub problems: Vec<HeaderProblem>,
}

/// Takes the first `<|channel|>` marker and its value out of `text`.
/// The value runs to the first whitespace or `<`; returns (channel, rest of text, problem).
fn extract_channel(text: &str) -> (Option<String>, String, Option<HeaderProblem>) {
    let Some(at) = text.find(CHANNEL_MARKER) else {
        return (None, text.to_owned(), None);
    };
    let after = &text[at + CHANNEL_MARKER.len()..];
    let end = after.find(|c: char| c.is_whitespace() || c == '<').unwrap_or(after.len());
    let rest = format!("{}{}", &text[..at], &after[end..]);
    if end == 0 {
        return (None, rest, Some(HeaderProblem::EmptyChannel));
    }
    (Some(after[..end].to_owned()), rest, None)
}

/// Splits the header into words as the reference does. With `repair` (lenient), a `<|constrain|>` followed
/// by a space is joined to the type after it (`<|constrain|> json`), and a doubled marker counts once.
fn split_words(text: &str, repair: bool, problems: &mut Vec<HeaderProblem>) -> Vec<String> {
    let text = text.trim();
    let spaced;
    let text = if text.contains(CONSTRAIN_MARKER) {
        spaced = text.replace(CONSTRAIN_MARKER, " <|constrain|>");
        spaced.trim()
    } else {
        text
    };
    let mut words: Vec<String> = Vec::new();
    let mut glue_next = false;
    for word in text.split_ascii_whitespace() {
        if glue_next {
            let marker = words.last_mut().expect("glue follows a word");
            if word.starts_with(CONSTRAIN_MARKER) {
                marker.clear();
            }
            marker.push_str(word);
            problems.push(HeaderProblem::SpacedConstrain(marker.clone()));
        } else {
            words.push(word.to_owned());
        }
        glue_next = repair && word == CONSTRAIN_MARKER;
    }
    words
}

/// The content type as reported to users: `<|constrain|>` prefix removed, empty means none.
fn normalize_content_type(raw: String) -> Option<String> {
    let value = raw.strip_prefix(CONSTRAIN_MARKER).unwrap_or(&raw);
    (!value.is_empty()).then(|| value.to_owned())
}

fn strip_to(word: String) -> String {
    match word.strip_prefix("to=") {
        Some(rest) => rest.to_owned(),
        None => word,
    }
}

/// How to parse a header: `repair` (lenient mode) enables the repairs listed in the module comment;
/// `tool_names` are the tools the request offered, used to split a content type glued to a recipient.
#[derive(Clone, Copy, Debug, Default)]
pub struct HeaderRules<'a> {
    pub repair: bool,
    pub tool_names: &'a [String],
}

fn is_channel(word: &str) -> bool {
    CHANNELS.contains(&word)
}

/// `assistantfinal` → (`assistant`, `final`): a role glued to a channel or role word.
fn split_glued_role(word: &str) -> Option<(&'static str, &str)> {
    ROLES.iter().find_map(|&role| {
        let tail = word.strip_prefix(role)?;
        (is_channel(tail) || ROLES.contains(&tail)).then_some((role, tail))
    })
}

/// Removes every further `<|channel|>` marker from `rest`; the channel is the first known channel name
/// among all the values, else the first value. Returns the extra values removed.
fn repair_repeated_channels(channel: &mut Option<String>, rest: &mut String) -> Option<HeaderProblem> {
    if !rest.contains(CHANNEL_MARKER) {
        return None;
    }
    let mut values: Vec<String> = channel.take().into_iter().collect();
    while rest.contains(CHANNEL_MARKER) {
        let (value, remaining, _) = extract_channel(rest);
        *rest = remaining;
        values.extend(value);
    }
    let chosen = values.iter().position(|v| is_channel(v)).unwrap_or(0);
    if chosen < values.len() {
        *channel = Some(values.remove(chosen));
    }
    Some(HeaderProblem::RepeatedChannel(values.join(" ")))
}

/// Parses a complete header (at `<|message|>`). `given_role` is the role the parser was started with,
/// used for its first message only, as in the reference.
pub fn parse_header(text: &str, given_role: Option<&str>, rules: HeaderRules) -> ParsedHeader {
    let mut problems = Vec::new();
    let (mut channel, mut rest, channel_problem) = extract_channel(text);
    problems.extend(channel_problem);
    if rules.repair {
        problems.extend(repair_repeated_channels(&mut channel, &mut rest));
    }
    let mut words = split_words(&rest, rules.repair, &mut problems);

    let mut role = given_role.map(str::to_owned);
    if rules.repair {
        if let Some((glued_role, tail)) = words.first().and_then(|w| split_glued_role(w)) {
            problems.push(HeaderProblem::GluedRole(words[0].clone()));
            if is_channel(tail) && channel.is_none() {
                channel = Some(tail.to_owned());
            }
            words[0] = glued_role.to_owned();
        }
        if channel.is_none() {
            if let Some(at) = words.iter().position(|w| is_channel(w)) {
                let word = words.remove(at);
                problems.push(HeaderProblem::MissingChannelMarker(word.clone()));
                channel = Some(word);
                if at == 0 && role.is_none() {
                    // The channel stood where the role belongs (`<|start|>final<|message|>`).
                    role = Some("assistant".to_owned());
                }
            }
        }
    }

    let mut header = Header { channel, ..Header::default() };
    match role {
        Some(role) => header.role = role,
        None => match words.first() {
            None => {
                problems.push(HeaderProblem::MissingRole);
                header.role = "assistant".to_owned();
            }
            Some(first) if ROLES.contains(&first.as_str()) => {
                header.role = first.clone();
                if first == "tool" {
                    header.name = Some(first.clone());
                }
            }
            Some(first) if words.len() > 1 || first.starts_with("to=") => {
                header.role = "tool".to_owned();
                header.name = Some(words.remove(0));
            }
            Some(first) => {
                problems.push(HeaderProblem::UnknownRole(first.clone()));
                header.role = words.remove(0);
            }
        },
    }
    if words.first() == Some(&header.role) {
        words.remove(0);
    }
    if rules.repair {
        join_spaced_recipient(&mut words, rules.tool_names, &mut problems);
    }

    if let Some(last) = words.pop() {
        if let Some(recipient) = last.strip_prefix("to=") {
            header.recipient = Some(recipient.to_owned());
        } else if words.is_empty() && !last.starts_with(CONSTRAIN_MARKER) {
            header.recipient = Some(last);
        } else {
            header.content_type = normalize_content_type(last);
            header.recipient = words.pop().map(strip_to);
        }
    }
    if rules.repair {
        repair_recipient(&mut header, &mut words, rules.tool_names, &mut problems);
    }
    if !words.is_empty() {
        problems.push(HeaderProblem::ExtraWords(words.join(" ")));
    }
    ParsedHeader { header, problems }
}

/// Lenient: a recipient that is a declared tool whose name holds spaces (`to=functions.Web Search`, a
/// client's tool named "Web Search"), split into words here, joined back into one word. The words after
/// `to=` are joined with one space each; a declared name matches with its own runs of white space read as
/// one space. The longest declared name wins (as src/backend/js/header.ts `joinSpacedRecipient`).
fn join_spaced_recipient(words: &mut Vec<String>, tool_names: &[String], problems: &mut Vec<HeaderProblem>) {
    if !tool_names.iter().any(|name| name.bytes().any(|b| b.is_ascii_whitespace())) {
        return;
    }
    let Some(at) = words.iter().position(|word| word.starts_with("to=")) else { return };
    for end in (at + 2..=words.len()).rev() {
        let joined = words[at..end].join(" ");
        let wanted = &joined[3..];
        let Some(name) = tool_names.iter().find(|name| name.split_ascii_whitespace().collect::<Vec<_>>().join(" ") == wanted) else {
            continue;
        };
        problems.push(HeaderProblem::SpacedRecipient(name.clone()));
        words.splice(at..end, [format!("to={name}")]);
        return;
    }
}

/// Lenient repairs of the recipient and content type: leaked markers cut, repeats dropped, a glued
/// content type split off.
fn repair_recipient(header: &mut Header, words: &mut Vec<String>, tool_names: &[String], problems: &mut Vec<HeaderProblem>) {
    if let Some(content_type) = header.content_type.as_mut() {
        if let Some(at) = content_type.find("<|") {
            problems.push(HeaderProblem::LeakedMarker(content_type.clone()));
            content_type.truncate(at);
            if content_type.is_empty() {
                header.content_type = None;
            }
        }
    }
    let Some(recipient) = header.recipient.clone() else { return };
    let mut recipient = recipient;
    let leaked = recipient.find("<|");
    if let Some(at) = leaked {
        problems.push(HeaderProblem::LeakedMarker(recipient.clone()));
        recipient.truncate(at);
    }
    let leaked = leaked.is_some();
    if recipient.is_empty() {
        // `to=` and nothing: no recipient, said (unless a leaked marker was all it held, said above).
        if !leaked {
            problems.push(HeaderProblem::EmptyRecipient("to=".to_owned()));
        }
        header.recipient = None;
        return;
    }
    let before = words.len();
    words.retain(|w| w.strip_prefix("to=").unwrap_or(w) != recipient);
    if words.len() < before {
        problems.push(HeaderProblem::DuplicateRecipient(format!("to={recipient}")));
    }
    let namespaced = format!("{FUNCTIONS}{recipient}");
    if !tool_names.contains(&recipient) && tool_names.contains(&namespaced) {
        // `to=read_file` for the declared `functions.read_file` (Roo Code #6739, Kilo Code #1775 over LM Studio).
        problems.push(HeaderProblem::BareRecipient(recipient));
        recipient = namespaced;
    } else if header.content_type.is_none() && !tool_names.contains(&recipient) {
        let tool = tool_names
            .iter()
            .filter(|t| !t.is_empty() && recipient.len() > t.len() && recipient.starts_with(t.as_str()))
            .max_by_key(|t| t.len());
        if let Some(tool) = tool {
            problems.push(HeaderProblem::GluedContentType(recipient.clone()));
            header.content_type = normalize_content_type(recipient[tool.len()..].to_owned());
            recipient.truncate(tool.len());
        }
    }
    header.recipient = (!recipient.is_empty()).then_some(recipient);
}

/// A header that ended without `<|message|>` (closed by a stop token, cut by end of stream, or too long):
/// the channel is kept, a leading role word is taken as the role, and the rest of the text, trimmed but
/// otherwise untouched, becomes the message content.
#[derive(Debug)]
pub struct RecoveredHeader {
    pub header: Header,
    pub content: String,
}

/// With `continues`, the message's content goes on after this text (a header cut by `maxHeaderTokens`), so
/// trailing whitespace is content and is kept.
pub fn recover_header(text: &str, given_role: Option<&str>, continues: bool) -> RecoveredHeader {
    let (channel, rest, _) = extract_channel(text);
    let rest = if continues { rest.trim_start() } else { rest.trim() };
    // The role word ends at any whitespace, the same set `trim` uses, so trimming cannot change the split.
    let first_word_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let first_word = &rest[..first_word_end];
    let (role, content) = match given_role {
        Some(role) if first_word == role => (role, &rest[first_word_end..]),
        Some(role) => (role, rest),
        None if ROLES.contains(&first_word) => (first_word, &rest[first_word_end..]),
        None => ("assistant", rest),
    };
    RecoveredHeader { header: Header { role: role.to_owned(), channel, ..Header::default() }, content: content.trim_start().to_owned() }
}

/// What the stream parser reads at `<|message|>`: the header's text (lossily decoded), whether its bytes
/// were invalid UTF-8, and its parse under the parser's rules.
#[derive(Debug)]
pub(crate) struct ReadHeader {
    pub text: String,
    pub invalid_utf8: bool,
    pub parsed: ParsedHeader,
}

/// A bounded per-thread cache of `ReadHeader`s. A model writes the same few headers over and over
/// (`<|channel|>analysis`, `<|start|>assistant<|channel|>final`, a tool call's header), and decoding plus
/// parsing one cost more than all the content tokens of a short message. A `ReadHeader` is a pure
/// function of the key (the vocabulary, the header's token ids, the role given to the parser, strict or
/// lenient rules and the tool names), so a hit gives exactly what parsing would.
///
/// Direct-mapped: each key has one slot, a newer key evicts an older one. Per thread so that it needs no
/// lock (a parser may move between threads; it only ever sees results equal to its own parse).
pub(crate) mod cache {
    use std::cell::RefCell;
    use std::hash::{Hash, Hasher};
    use std::rc::Rc;
    use std::sync::Arc;

    use super::ReadHeader;

    const SLOTS: usize = 256;
    /// Longer headers (rare, often malformed) are parsed every time, which bounds the cache's memory.
    pub(crate) const MAX_TOKENS: usize = 32;
    const MAX_TEXT_BYTES: usize = 1024;

    /// What a header's reading depends on. The tool names (a request may offer hundreds) are hashed
    /// once per parser, and compared by pointer before their contents.
    #[derive(Clone, Copy)]
    pub(crate) struct Key<'a> {
        pub vocabulary: u64,
        pub tokens: &'a [u32],
        pub role: Option<&'a str>,
        pub strict: bool,
        pub tool_names: &'a Arc<[String]>,
        /// `hash_tool_names(tool_names)`.
        pub tool_names_hash: u64,
    }

    impl Key<'_> {
        fn slot(&self) -> usize {
            let mut hasher = rustc_hash::FxHasher::default();
            (self.vocabulary, self.tokens, self.role, self.strict, self.tool_names_hash).hash(&mut hasher);
            hasher.finish() as usize % SLOTS
        }

        fn is(&self, other: &Key<'_>) -> bool {
            self.vocabulary == other.vocabulary
                && self.tokens == other.tokens
                && self.role == other.role
                && self.strict == other.strict
                && self.tool_names_hash == other.tool_names_hash
                && (Arc::ptr_eq(self.tool_names, other.tool_names) || self.tool_names[..] == other.tool_names[..])
        }
    }

    pub(crate) fn hash_tool_names(tool_names: &[String]) -> u64 {
        let mut hasher = rustc_hash::FxHasher::default();
        tool_names.hash(&mut hasher);
        hasher.finish()
    }

    struct Entry {
        vocabulary: u64,
        tokens: Box<[u32]>,
        role: Option<Box<str>>,
        strict: bool,
        tool_names: Arc<[String]>,
        tool_names_hash: u64,
        header: Rc<ReadHeader>,
    }

    impl Entry {
        fn key(&self) -> Key<'_> {
            Key {
                vocabulary: self.vocabulary,
                tokens: &self.tokens,
                role: self.role.as_deref(),
                strict: self.strict,
                tool_names: &self.tool_names,
                tool_names_hash: self.tool_names_hash,
            }
        }
    }

    thread_local! {
        static SLOTS_OF_THREAD: RefCell<Vec<Option<Entry>>> = const { RefCell::new(Vec::new()) };
    }

    /// The reading of the header `key` names: from the cache, or from `read` (then cached if small enough).
    pub(crate) fn get_or_read(key: Key<'_>, read: impl FnOnce() -> ReadHeader) -> Rc<ReadHeader> {
        if key.tokens.len() > MAX_TOKENS {
            return Rc::new(read());
        }
        let slot = key.slot();
        let hit = SLOTS_OF_THREAD.with_borrow(|slots| {
            let entry = slots.get(slot)?.as_ref()?;
            entry.key().is(&key).then(|| entry.header.clone())
        });
        if let Some(header) = hit {
            return header;
        }
        let header = Rc::new(read());
        if header.text.len() <= MAX_TEXT_BYTES {
            let entry = Entry {
                vocabulary: key.vocabulary,
                tokens: key.tokens.into(),
                role: key.role.map(Into::into),
                strict: key.strict,
                tool_names: key.tool_names.clone(),
                tool_names_hash: key.tool_names_hash,
                header: header.clone(),
            };
            SLOTS_OF_THREAD.with_borrow_mut(|slots| {
                if slots.is_empty() {
                    slots.resize_with(SLOTS, || None);
                }
                slots[slot] = Some(entry);
            });
        }
        header
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, role: Option<&str>) -> (Header, Vec<HeaderProblem>) {
        let parsed = parse_header(text, role, HeaderRules::default());
        (parsed.header, parsed.problems)
    }

    fn header(role: &str, name: Option<&str>, channel: Option<&str>, recipient: Option<&str>, content_type: Option<&str>) -> Header {
        let own = |s: Option<&str>| s.map(str::to_owned);
        Header { role: role.into(), name: own(name), channel: own(channel), recipient: own(recipient), content_type: own(content_type) }
    }

    #[test]
    fn reference_header_examples() {
        let tool_call = header("assistant", None, Some("commentary"), Some("functions.get_weather"), Some("json"));
        for text in [
            "assistant to=functions.get_weather<|channel|>commentary <|constrain|>json",
            "assistant to=functions.get_weather<|channel|>commentary<|constrain|>json",
            "assistant<|channel|>commentary to=functions.get_weather<|constrain|>json",
            "assistant to=functions.get_weather<|channel|>commentary json",
        ] {
            assert_eq!(parse(text, None), (tool_call.clone(), vec![]), "{text}");
        }
        assert_eq!(parse("<|channel|>analysis", Some("assistant")).0, header("assistant", None, Some("analysis"), None, None));
        assert_eq!(
            parse("browser.search to=assistant<|channel|>commentary", None).0,
            header("tool", Some("browser.search"), Some("commentary"), Some("assistant"), None)
        );
        assert_eq!(
            parse("assistant to=lookup_weather<|channel|>analysis code", None).0,
            header("assistant", None, Some("analysis"), Some("lookup_weather"), Some("code"))
        );
        assert_eq!(parse("final", Some("assistant")).0, header("assistant", None, None, Some("final"), None));
        assert_eq!(
            parse("<|channel|>final <|constrain|>json", Some("assistant")).0,
            header("assistant", None, Some("final"), None, Some("json"))
        );
    }

    #[test]
    fn problems_carry_reference_texts() {
        let (_, problems) = parse("<|channel|>commentary to=functions.x to=functions.x", Some("assistant"));
        assert_eq!(problems[0].message(), r#"unexpected tokens remaining in message header: Some("to=functions.x")"#);
        let (header, problems) = parse("final", None);
        assert_eq!((header.role.as_str(), problems[0].message()), ("final", "Unknown role: final".to_owned()));
        assert_eq!(parse("<|channel|>", Some("assistant")).1, vec![HeaderProblem::EmptyChannel]);
        assert_eq!(parse("<|channel|>final", None).1, vec![HeaderProblem::MissingRole]);
        assert_eq!(parse("<|start|>assistant", None).1[0].message(), "Unknown role: <|start|>assistant");
    }

    fn repaired(text: &str, role: Option<&str>, tools: &[&str]) -> (Header, Vec<&'static str>) {
        let tools: Vec<String> = tools.iter().map(|t| t.to_string()).collect();
        let parsed = parse_header(text, role, HeaderRules { repair: true, tool_names: &tools });
        (parsed.header, parsed.problems.iter().map(HeaderProblem::code).collect())
    }

    #[test]
    fn lenient_repairs() {
        // The reference fails on a space after <|constrain|>; lenient mode joins it, and a doubled marker counts once.
        let spaced = header("assistant", None, Some("commentary"), Some("functions.f"), Some("json"));
        assert_eq!(
            parse("assistant to=functions.f<|channel|>commentary <|constrain|> json", None).1,
            vec![HeaderProblem::ExtraWords("to=functions.f".into())]
        );
        assert_eq!(
            repaired("assistant to=functions.f<|channel|>commentary <|constrain|> json", None, &[]),
            (spaced.clone(), vec!["spaced-constrain"])
        );
        assert_eq!(
            repaired("assistant to=functions.f<|channel|>commentary <|constrain|><|constrain|>json", None, &[]),
            (spaced, vec!["spaced-constrain"])
        );
        let call = header("assistant", None, Some("commentary"), Some("functions.bash"), None);
        assert_eq!(
            repaired("<|channel|>commentary to=functions.bash<|channel|>commentary", Some("assistant"), &[]),
            (call.clone(), vec!["repeated-channel"])
        );
        assert_eq!(
            repaired("assistant<|channel|>bash<|channel|>commentary to=functions.bash", None, &[]),
            (call.clone(), vec!["repeated-channel"])
        );
        assert_eq!(
            repaired("<|channel|>commentary to=functions.bash to=functions.bash", Some("assistant"), &[]),
            (call.clone(), vec!["duplicate-recipient"])
        );
        let glued = header("assistant", None, Some("commentary"), Some("functions.shell"), Some("json"));
        assert_eq!(
            repaired("<|channel|>commentary to=functions.shelljson", Some("assistant"), &["functions.shell"]),
            (glued, vec!["glued-content-type"])
        );
        let final_ = header("assistant", None, Some("final"), None, None);
        assert_eq!(repaired("assistantfinal", None, &[]), (final_.clone(), vec!["glued-role"]));
        assert_eq!(repaired("final", None, &[]), (final_.clone(), vec!["missing-channel-marker"]));
        assert_eq!(repaired("final", Some("assistant"), &[]), (final_.clone(), vec!["missing-channel-marker"]));
        assert_eq!(repaired("assistantassistant<|channel|>final", None, &[]), (final_, vec!["glued-role"]));
        assert_eq!(
            repaired("assistant to=functions.f<|channel|>commentary<|constrain|>json<|end|><|start|>assistant", None, &[])
                .0
                .recipient
                .as_deref(),
            Some("functions.f")
        );
        let leaked = repaired("assistant to=functions.f<|channel|>commentary<|constrain|>json<|endoftext|>", None, &[]);
        assert_eq!((leaked.0.content_type.as_deref(), leaked.1), (Some("json"), vec!["leaked-marker"]));
    }

    #[test]
    fn recovered_headers_keep_text() {
        let recovered = recover_header("<|channel|>analysis I must\n refuse", Some("assistant"), false);
        assert_eq!((recovered.header.channel.as_deref(), recovered.content.as_str()), (Some("analysis"), "I must\n refuse"));
        let recovered = recover_header("assistant<|channel|>final Hello", None, false);
        assert_eq!((recovered.header.role.as_str(), recovered.content.as_str()), ("assistant", "Hello"));
    }
}
