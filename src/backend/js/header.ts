/**
 * Parsing a message header. Mirrors crate/core/src/header.rs, step by step; see the comments there for
 * how it follows the reference parser and where it deliberately differs.
 *
 * Rust's notions of whitespace are reproduced exactly, because JavaScript's differ: `trim()` here is
 * Unicode White_Space (JS `trim` also strips U+FEFF and keeps U+0085), words are split on ASCII
 * whitespace only (space, \t, \n, \f, \r; not \v).
 */

import { ROLES as PUBLIC_ROLES } from '../../base/types'

/** The roles (base/types.ts; compared with ROLES in crate/core/src/header.rs), as strings to look words up in. */
const ROLES: readonly string[] = PUBLIC_ROLES
/** These three mirror crate/core/src/header.rs (__test__/parser/constants.test.mts compares them). @mirrored */
export const CHANNELS: readonly string[] = ['analysis', 'commentary', 'final']
/** Compared with its Rust twin by __test__/parser/constants.test.mts. @mirrored */
export const CHANNEL_MARKER = '<|channel|>'
/** Compared with its Rust twin by __test__/parser/constants.test.mts. @mirrored */
export const CONSTRAIN_MARKER = '<|constrain|>'
/**
 * The namespace of the request's function tools in recipients (`functions.get_weather`). Compared with its Rust
 * twin by __test__/parser/constants.test.mts. @mirrored
 */
export const FUNCTIONS = 'functions.'

/** Rust `char::is_whitespace` (Unicode White_Space). */
const WHITE_SPACE = '\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000'
const CHANNEL_VALUE_END = new RegExp(`[${WHITE_SPACE}<]`)
/** Rust `u8::is_ascii_whitespace`. */
const ASCII_WHITE_SPACE = /[ \t\n\f\r]+/
const WHITE_SPACE_CHAR = new RegExp(`[${WHITE_SPACE}]`)

/** The same set as WHITE_SPACE, by code unit (all of it is in the BMP). */
function isWhiteSpace(code: number): boolean {
  return (
    (code >= 0x09 && code <= 0x0d) ||
    code === 0x20 ||
    code === 0x85 ||
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000
  )
}

// Loops, not regular expressions: `/\s+$/`-style patterns retry at every position of a long inner run of
// whitespace, which makes a header of many spaces quadratic.
function trimStart(text: string): string {
  let start = 0
  while (start < text.length && isWhiteSpace(text.charCodeAt(start))) start++
  return text.slice(start)
}

function trimEnd(text: string): string {
  let end = text.length
  while (end > 0 && isWhiteSpace(text.charCodeAt(end - 1))) end--
  return text.slice(0, end)
}

function trim(text: string): string {
  return trimEnd(trimStart(text))
}

export interface Header {
  role: string
  /** The author of a tool message, e.g. `functions.get_weather`. */
  name: string | null
  channel: string | null
  recipient: string | null
  contentType: string | null
}

export type HeaderProblem =
  | { kind: 'empty-channel' }
  | { kind: 'missing-role' }
  | { kind: 'unknown-role'; word: string }
  | { kind: 'extra-header-words'; words: string }
  // Repairs, made in lenient mode only:
  | { kind: 'spaced-constrain'; words: string }
  | { kind: 'repeated-channel'; words: string }
  | { kind: 'glued-role'; words: string }
  | { kind: 'missing-channel-marker'; words: string }
  | { kind: 'leaked-marker'; words: string }
  | { kind: 'duplicate-recipient'; words: string }
  | { kind: 'glued-content-type'; words: string }
  | { kind: 'spaced-recipient'; words: string }
  | { kind: 'bare-recipient'; words: string }

/** Stable code, shared by diagnostics and errors. */
export function problemCode(problem: HeaderProblem): string {
  return problem.kind
}

/**
 * The reference parser's error text for this problem, verbatim, so users can search for it;
 * for repairs, what was repaired.
 */
export function problemMessage(problem: HeaderProblem): string {
  switch (problem.kind) {
    case 'empty-channel':
      return 'channel marker present but no channel value found in header'
    case 'missing-role':
      return 'message header did not contain a role'
    case 'unknown-role':
      return `Unknown role: ${problem.word}`
    case 'extra-header-words':
      return `unexpected tokens remaining in message header: Some(${rustDebugString(problem.words)})`
    case 'spaced-constrain':
      return `<|constrain|> joined to the type after it: ${problem.words}`
    case 'repeated-channel':
      return `repeated <|channel|> markers; removed: ${problem.words}`
    case 'glued-role':
      return `role glued to the next word: ${problem.words}`
    case 'missing-channel-marker':
      return `channel without <|channel|>: ${problem.words}`
    case 'leaked-marker':
      return `special token text in the recipient, cut: ${problem.words}`
    case 'duplicate-recipient':
      return `repeated recipient removed: ${problem.words}`
    case 'glued-content-type':
      return `content type glued to the recipient, split: ${problem.words}`
    case 'spaced-recipient':
      return `a declared tool whose name holds spaces, read as one recipient: ${problem.words}`
    case 'bare-recipient':
      return `a declared tool named without its namespace, read as that tool: ${problem.words}`
  }
}

// Characters Rust's `{:?}` prints as \u{…}: not printable (controls, format characters, separators other
// than the space, private use, unassigned) or grapheme extenders. Rust's tables follow its own Unicode
// version, so characters assigned since Node's ICU version can differ (documented in docs/SEMANTICS.md "Strict error texts").
const RUST_DEBUG_ESCAPED = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Grapheme_Extend}]|(?! )\p{Zs}/u

/** Rust's `format!("{:?}", s)` for a string: quoted, with Rust's escapes. */
function rustDebugString(text: string): string {
  let out = '"'
  for (const char of text) {
    switch (char) {
      case '\0':
        out += '\\0'
        break
      case '\t':
        out += '\\t'
        break
      case '\r':
        out += '\\r'
        break
      case '\n':
        out += '\\n'
        break
      case '\\':
        out += '\\\\'
        break
      case '"':
        out += '\\"'
        break
      default:
        out += RUST_DEBUG_ESCAPED.test(char) ? `\\u{${char.codePointAt(0)!.toString(16)}}` : char
    }
  }
  return `${out}"`
}

export interface ParsedHeader {
  header: Header
  problems: HeaderProblem[]
}

/** Takes the first `<|channel|>` marker and its value (up to whitespace or `<`) out of `text`. */
function extractChannel(text: string): { channel: string | null; rest: string; problem: HeaderProblem | null } {
  const at = text.indexOf(CHANNEL_MARKER)
  if (at < 0) return { channel: null, rest: text, problem: null }
  const after = text.slice(at + CHANNEL_MARKER.length)
  const found = after.search(CHANNEL_VALUE_END)
  const end = found < 0 ? after.length : found
  const rest = text.slice(0, at) + after.slice(end)
  if (end === 0) return { channel: null, rest, problem: { kind: 'empty-channel' } }
  return { channel: after.slice(0, end), rest, problem: null }
}

/**
 * Splits into words as the reference does. With `repair` (lenient), a `<|constrain|>` followed by a space
 * is joined to the type after it (`<|constrain|> json`), and a doubled marker counts once.
 */
function splitWords(text: string, repair: boolean, problems: HeaderProblem[]): string[] {
  let trimmed = trim(text)
  if (trimmed.includes(CONSTRAIN_MARKER)) trimmed = trim(trimmed.replaceAll(CONSTRAIN_MARKER, ' <|constrain|>'))
  const words: string[] = []
  let glueNext = false
  for (const word of trimmed.split(ASCII_WHITE_SPACE)) {
    if (word === '') continue
    if (glueNext) {
      words[words.length - 1] = word.startsWith(CONSTRAIN_MARKER) ? word : words[words.length - 1] + word
      problems.push({ kind: 'spaced-constrain', words: words[words.length - 1] })
    } else words.push(word)
    glueNext = repair && word === CONSTRAIN_MARKER
  }
  return words
}

/** The content type as reported: `<|constrain|>` prefix removed, empty means none. */
function normalizeContentType(raw: string): string | null {
  const value = raw.startsWith(CONSTRAIN_MARKER) ? raw.slice(CONSTRAIN_MARKER.length) : raw
  return value === '' ? null : value
}

function stripTo(word: string): string {
  return word.startsWith('to=') ? word.slice(3) : word
}

/** How to parse: `repair` (lenient mode) enables the repairs; `toolNames` are the request's tools. */
export interface HeaderRules {
  repair: boolean
  toolNames: readonly string[]
}

function isChannel(word: string): boolean {
  return CHANNELS.includes(word)
}

/** `assistantfinal` → [`assistant`, `final`]: a role glued to a channel or role word. */
function splitGluedRole(word: string): [string, string] | null {
  for (const role of ROLES) {
    if (!word.startsWith(role)) continue
    const tail = word.slice(role.length)
    if (isChannel(tail) || ROLES.includes(tail)) return [role, tail]
  }
  return null
}

/**
 * Removes every further `<|channel|>` marker; the channel is the first known channel name among all the
 * values, else the first value.
 */
function repairRepeatedChannels(
  channel: string | null,
  rest: string,
): { channel: string | null; rest: string; problem: HeaderProblem | null } {
  if (!rest.includes(CHANNEL_MARKER)) return { channel, rest, problem: null }
  const values: string[] = channel === null ? [] : [channel]
  while (rest.includes(CHANNEL_MARKER)) {
    const extracted = extractChannel(rest)
    rest = extracted.rest
    if (extracted.channel !== null) values.push(extracted.channel)
  }
  let chosen = values.findIndex(isChannel)
  if (chosen < 0) chosen = 0
  if (chosen < values.length) channel = values.splice(chosen, 1)[0]
  return { channel, rest, problem: { kind: 'repeated-channel', words: values.join(' ') } }
}

/** Parses a complete header (at `<|message|>`); `givenRole` applies to a parser's first message only. */
export function parseHeader(text: string, givenRole: string | null, rules: HeaderRules): ParsedHeader {
  const problems: HeaderProblem[] = []
  const extracted = extractChannel(text)
  let { channel, rest } = extracted
  if (extracted.problem) problems.push(extracted.problem)
  if (rules.repair) {
    const repaired = repairRepeatedChannels(channel, rest)
    ;({ channel, rest } = repaired)
    if (repaired.problem) problems.push(repaired.problem)
  }
  const words = splitWords(rest, rules.repair, problems)

  let role = givenRole
  if (rules.repair) {
    const glued = words.length > 0 ? splitGluedRole(words[0]) : null
    if (glued) {
      problems.push({ kind: 'glued-role', words: words[0] })
      if (isChannel(glued[1]) && channel === null) channel = glued[1]
      words[0] = glued[0]
    }
    if (channel === null) {
      const at = words.findIndex(isChannel)
      if (at >= 0) {
        const [word] = words.splice(at, 1)
        problems.push({ kind: 'missing-channel-marker', words: word })
        channel = word
        // The channel stood where the role belongs (`<|start|>final<|message|>`).
        if (at === 0 && role === null) role = 'assistant'
      }
    }
  }

  const header: Header = { role: '', name: null, channel, recipient: null, contentType: null }
  if (role !== null) header.role = role
  else if (words.length === 0) {
    problems.push({ kind: 'missing-role' })
    header.role = 'assistant'
  } else if (ROLES.includes(words[0])) {
    header.role = words[0]
    if (words[0] === 'tool') header.name = words[0]
  } else if (words.length > 1 || words[0].startsWith('to=')) {
    header.role = 'tool'
    header.name = words.shift()!
  } else {
    problems.push({ kind: 'unknown-role', word: words[0] })
    header.role = words.shift()!
  }
  if (words[0] === header.role) words.shift()
  if (rules.repair) joinSpacedRecipient(words, rules.toolNames, problems)

  const last = words.pop()
  if (last !== undefined) {
    if (last.startsWith('to=')) header.recipient = last.slice(3)
    else if (words.length === 0 && !last.startsWith(CONSTRAIN_MARKER)) header.recipient = last
    else {
      header.contentType = normalizeContentType(last)
      const recipient = words.pop()
      header.recipient = recipient === undefined ? null : stripTo(recipient)
    }
  }
  if (rules.repair) repairRecipient(header, words, rules.toolNames, problems)
  if (words.length > 0) problems.push({ kind: 'extra-header-words', words: words.join(' ') })
  return { header, problems }
}

/**
 * Lenient: a recipient that is a declared tool whose name holds spaces (`to=functions.Web Search`, a client's
 * tool named "Web Search"), split into words here, joined back into one word. The words after `to=` are
 * joined with one space each; a declared name matches with its own runs of white space read as one space.
 * The longest declared name wins.
 */
function joinSpacedRecipient(words: string[], toolNames: readonly string[], problems: HeaderProblem[]): void {
  if (!toolNames.some((name) => ASCII_WHITE_SPACE.test(name))) return
  const at = words.findIndex((word) => word.startsWith('to='))
  if (at < 0) return
  for (let end = words.length; end > at + 1; end--) {
    const wanted = words.slice(at, end).join(' ').slice(3)
    // The first declared name that matches (as header.rs).
    const name = toolNames.find((tool) => spacedOnce(tool) === wanted)
    if (name === undefined) continue
    problems.push({ kind: 'spaced-recipient', words: name })
    words.splice(at, end - at, `to=${name}`)
    return
  }
}

/** `text` with its runs of ASCII white space as one space, none at either end. */
function spacedOnce(text: string): string {
  return text
    .split(ASCII_WHITE_SPACE)
    .filter((word) => word !== '')
    .join(' ')
}

/** Lenient repairs of recipient and content type: leaked markers cut, repeats dropped, a glued type split off. */
function repairRecipient(header: Header, words: string[], toolNames: readonly string[], problems: HeaderProblem[]): void {
  if (header.contentType !== null) {
    const at = header.contentType.indexOf('<|')
    if (at >= 0) {
      problems.push({ kind: 'leaked-marker', words: header.contentType })
      header.contentType = at === 0 ? null : header.contentType.slice(0, at)
    }
  }
  if (header.recipient === null) return
  let recipient = header.recipient
  const at = recipient.indexOf('<|')
  if (at >= 0) {
    problems.push({ kind: 'leaked-marker', words: recipient })
    recipient = recipient.slice(0, at)
  }
  const before = words.length
  for (let i = words.length - 1; i >= 0; i--) if (stripTo(words[i]) === recipient) words.splice(i, 1)
  if (words.length < before) problems.push({ kind: 'duplicate-recipient', words: `to=${recipient}` })
  if (!toolNames.includes(recipient) && toolNames.includes(`${FUNCTIONS}${recipient}`)) {
    // `to=read_file` for the declared `functions.read_file` (Roo Code #6739, Kilo Code #1775 over LM Studio).
    problems.push({ kind: 'bare-recipient', words: recipient })
    recipient = `${FUNCTIONS}${recipient}`
  } else if (header.contentType === null && !toolNames.includes(recipient)) {
    let tool: string | null = null
    for (const name of toolNames) {
      if (name !== '' && recipient.length > name.length && recipient.startsWith(name) && (tool === null || name.length > tool.length))
        tool = name
    }
    if (tool !== null) {
      problems.push({ kind: 'glued-content-type', words: recipient })
      header.contentType = normalizeContentType(recipient.slice(tool.length))
      recipient = tool
    }
  }
  header.recipient = recipient === '' ? null : recipient
}

export interface RecoveredHeader {
  header: Header
  content: string
}

/**
 * A header that ended without `<|message|>`: the channel is kept, a leading role word is taken as the
 * role, and the rest of the text, trimmed but otherwise untouched, becomes the message content.
 */
/**
 * With `continues`, the message's content goes on after this text (a header cut by `maxHeaderTokens`), so
 * trailing whitespace is content and is kept.
 */
export function recoverHeader(text: string, givenRole: string | null, continues: boolean): RecoveredHeader {
  const extracted = extractChannel(text)
  const rest = continues ? trimStart(extracted.rest) : trim(extracted.rest)
  // The role word ends at any whitespace, the same set `trim` uses, so trimming cannot change the split.
  const found = rest.search(WHITE_SPACE_CHAR)
  const firstWordEnd = found < 0 ? rest.length : found
  const firstWord = rest.slice(0, firstWordEnd)
  let role: string
  let content: string
  if (givenRole !== null) {
    role = givenRole
    content = firstWord === givenRole ? rest.slice(firstWordEnd) : rest
  } else if (ROLES.includes(firstWord)) {
    role = firstWord
    content = rest.slice(firstWordEnd)
  } else {
    role = 'assistant'
    content = rest
  }
  return { header: { role, name: null, channel: extracted.channel, recipient: null, contentType: null }, content: trimStart(content) }
}
