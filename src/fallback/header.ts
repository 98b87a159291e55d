/**
 * Parsing a message header. Mirrors crate/core/src/header.rs, step by step; see the comments there for
 * how it follows the reference parser and where it deliberately differs.
 *
 * Rust's notions of whitespace are reproduced exactly, because JavaScript's differ: `trim()` here is
 * Unicode White_Space (JS `trim` also strips U+FEFF and keeps U+0085), words are split on ASCII
 * whitespace only (space, \t, \n, \f, \r; not \v).
 */

export const ROLES: readonly string[] = ['user', 'assistant', 'system', 'developer', 'tool']

const CHANNEL_MARKER = '<|channel|>'
const CONSTRAIN_MARKER = '<|constrain|>'

/** Rust `char::is_whitespace` (Unicode White_Space). */
const WHITE_SPACE = '\\t\\n\\v\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000'
const LEADING_WHITE_SPACE = new RegExp(`^[${WHITE_SPACE}]+`)
const TRAILING_WHITE_SPACE = new RegExp(`[${WHITE_SPACE}]+$`)
const CHANNEL_VALUE_END = new RegExp(`[${WHITE_SPACE}<]`)
/** Rust `u8::is_ascii_whitespace`. */
const ASCII_WHITE_SPACE = /[ \t\n\f\r]+/
const ASCII_WHITE_SPACE_CHAR = /[ \t\n\f\r]/

function trimStart(text: string): string {
  return text.replace(LEADING_WHITE_SPACE, '')
}

function trim(text: string): string {
  return trimStart(text).replace(TRAILING_WHITE_SPACE, '')
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

/** Stable code, shared by diagnostics and errors. */
export function problemCode(problem: HeaderProblem): string {
  return problem.kind
}

/** The reference parser's error text for this problem, verbatim, so users can search for it. */
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
  }
}

// Characters Rust's `{:?}` prints as \u{…}: not printable (controls, format characters, separators other
// than the space, private use, unassigned) or grapheme extenders. Rust's tables follow its own Unicode
// version, so characters assigned since Node's ICU version can differ (documented in the README).
const RUST_DEBUG_ESCAPED = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Grapheme_Extend}]|(?! )\p{Zs}/u

/** Rust's `format!("{:?}", s)` for a string: quoted, with Rust's escapes. */
export function rustDebugString(text: string): string {
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
  return out + '"'
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

/** Splits into words, keeping `<|constrain|>` attached to the type after it, spaced or not. */
function splitWords(text: string): string[] {
  let trimmed = trim(text)
  if (trimmed.includes(CONSTRAIN_MARKER)) trimmed = trim(trimmed.replaceAll(CONSTRAIN_MARKER, ' <|constrain|>'))
  const words: string[] = []
  let glueNext = false
  for (const word of trimmed.split(ASCII_WHITE_SPACE)) {
    if (word === '') continue
    if (glueNext) words[words.length - 1] += word
    else words.push(word)
    glueNext = word === CONSTRAIN_MARKER
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

/** Parses a complete header (at `<|message|>`); `givenRole` applies to a parser's first message only. */
export function parseHeader(text: string, givenRole: string | null): ParsedHeader {
  const problems: HeaderProblem[] = []
  const { channel, rest, problem } = extractChannel(text)
  if (problem) problems.push(problem)
  const words = splitWords(rest)

  const header: Header = { role: '', name: null, channel, recipient: null, contentType: null }
  if (givenRole !== null) header.role = givenRole
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
  if (words.length > 0) problems.push({ kind: 'extra-header-words', words: words.join(' ') })
  return { header, problems }
}

export interface RecoveredHeader {
  header: Header
  content: string
}

/**
 * A header that ended without `<|message|>`: the channel is kept, a leading role word is taken as the
 * role, and the rest of the text, trimmed but otherwise untouched, becomes the message content.
 */
export function recoverHeader(text: string, givenRole: string | null): RecoveredHeader {
  const extracted = extractChannel(text)
  const rest = trim(extracted.rest)
  const found = rest.search(ASCII_WHITE_SPACE_CHAR)
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
