/**
 * Nothing lost (issue 46): every character a model writes reaches the client, in a field of the answer or in
 * a diagnostic's text. A gateway that repairs malformed output may move text (a header without `<|message|>`
 * becomes content, text after `<|end|>` becomes the answer), but text that vanishes is a bug the user cannot
 * even see. Checked on the malformed outputs of `fixtures/malformed-outputs.json` as they are, on fuzzed
 * variants of them (special tokens dropped, doubled, swapped or inserted; text inserted anywhere, white space
 * and multi-byte characters included; the output cut anywhere) and on random sequences of special tokens and
 * text, each answered by `chatCompletion` and by `ChatCompletionsStream` at random batch splits, on both
 * backends. The property, for every run of ordinary text between two special tokens (`<|constrain|>`
 * included; a stripped output is read as the marker form `StrippedRewriter` gives the parser):
 *
 * 1. it is a substring of the answer's content, reasoning, a tool call's name or arguments, or a diagnostic's
 *    text (the `stray-tokens` diagnostics of one stretch cut at MAX_STRAY_BYTES taken together); else
 * 2. where the parser read all of it into a header, that header's text is made of its message's parts (role,
 *    name, channel, recipient with or without `to=`, content type, as the parser reports them; white space
 *    aside, which separates them; each `<|channel|>` and its value taken out first, as the header rules do):
 *    the parts are what the adapter routes on (the recipient is the call's name);
 * 3. where a header ran over `maxHeaderTokens` inside it (`header-too-long`), its header part is in a
 *    diagnostic's text and the rest (from the character the cut fell in) in a field;
 * 4. where it is text after `<|end|>` the parser read as an answer without a header (`stranded-text`), the
 *    answer holds it without its leading ASCII white space, which the `stranded-text` diagnostic keeps;
 * 5. where calls were recovered from it (tool calls written as text, on by default where tools are declared),
 *    each call's text is in its `text-tool-call` diagnostic and the rest, white space around the JSON aside,
 *    as 1 to 4 say.
 *
 * What the parser read as a header, an answer or a stray is taken from a second parser of the same options
 * fed the same ids one at a time (its state after each). Also: the answer is the same whole and streamed, and
 * on both backends; a stripped output's marker form holds every character of it (only markers, and a space
 * before `to=`, added). No loss is tolerated; the losses it found, mended since, are kept as regressions
 * (`MENDED_LOSSES`). `PROPERTY_RUNS` scales the runs (default 400, as property.test.mts);
 * `PROPERTY_SEED` replays a seed fast-check printed.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { isDeepStrictEqual } from 'node:util'

import test from 'ava'
import fc from 'fast-check'
import { encode } from 'gpt-tokenizer/encoding/o200k_base'
import {
  type AdapterDiagnostic,
  type ChatCompletion,
  ChatCompletionsStream,
  chatCompletion,
  DEFAULT_MAX_HEADER_BYTES,
  type HarmonyMessage,
  HarmonyStreamParser,
  type Implementation,
  type ParserState,
} from 'harmony-stream'

import { StrippedRewriter } from '../../src/api/text/stripped.ts'
import { IMPLEMENTATIONS, SPECIAL } from '../helpers/harmony.mjs'
import { byteTokens, decodeTokens, tokenBytes } from '../helpers/token-bytes.mjs'

const RUNS = Number(process.env.PROPERTY_RUNS ?? 400)
/**
 * The bound of a `stray-tokens` diagnostic's text (MAX_STRAY_BYTES of src/backend/js/stream-parser.ts). Not
 * imported: that export is tagged @mirrored (its twin is Rust's), and knip says the tag is unused once a test
 * imports it. The parser's bound is checked below ('a stray stretch is cut every …').
 */
const MAX_STRAY_BYTES = 4096
const SEED = process.env.PROPERTY_SEED === undefined ? {} : { seed: Number(process.env.PROPERTY_SEED) }

interface Case {
  id: string
  shape: string
  output: string
  tools?: { name: string }[]
}

// Read at test time: the corpus grows, and this test holds for whatever it holds.
const { cases } = JSON.parse(readFileSync(join(import.meta.dirname, 'fixtures', 'malformed-outputs.json'), 'utf8')) as { cases: Case[] }

/** The seven special tokens as text, split out with the capture (as `harmony` does). */
const MARKER = /(<\|(?:return|constrain|channel|start|end|message|call)\|>)/
// Own keys only: fast-check writes `toString` and `constructor`, which `in` finds on every object.
const isMarker = (part: string) => Object.hasOwn(SPECIAL, part)
/** The markers the text form's scanner reads as markers: `<|constrain|>` is text there (api/text/marker-scanner.ts). */
const STEERING = /<\|(?:return|channel|start|end|message|call)\|>/g

/** An output as the test answers it. */
interface Output {
  text: string
  /** Plain text whose special tokens the server stripped: read with `input: 'stripped'`. */
  stripped: boolean
  toolNames: string[]
  /** A small header limit makes `header-too-long` common; undefined for the default. */
  maxHeaderTokens: number | undefined
  /**
   * The streamed answers, one per split: where its batches end, in ids (code points of a stripped output), each
   * modulo the length.
   */
  splits: number[][]
}

/** A run of ordinary text, and the ids the parser reads it as: `ids[from, to)`. */
interface Run {
  text: string
  from: number
  to: number
}

/** The ids the parser reads, its runs of text, and a second parser's reading of them (`read`). */
interface Reading {
  ids: number[]
  runs: Run[]
  /** `states[i]`: the parser's state before id `i` (after id `i - 1`); one more than the ids. */
  states: ParserState[]
  /** `opened[i]`: messages opened before id `i`: the index of the message a header at `i` belongs to. */
  opened: number[]
  messages: HarmonyMessage[]
}

/**
 * What the parser reads: ids of the output (ordinary text through the o200k BPE, as `harmony` makes them; not
 * `harmony` itself, whose `part in SPECIAL` takes a text part `toString` for a marker), or of a stripped
 * output's marker form as the adapters' text input gives them (text as single-byte tokens, the six steering
 * markers as their ids).
 */
function idsOf(output: Output): { ids: number[]; runs: Run[] } {
  const text = output.stripped ? markerForm(output.text) : output.text
  const ids: number[] = []
  const runs: Run[] = []
  for (const part of text.split(MARKER)) {
    if (part === '') continue
    const from = ids.length
    if (isMarker(part)) ids.push(...(output.stripped && part === '<|constrain|>' ? byteTokens(part) : [SPECIAL[part]!]))
    else {
      ids.push(...(output.stripped ? byteTokens(part) : encode(part, { disallowedSpecial: new Set() })))
      runs.push({ text: part, from, to: ids.length })
    }
  }
  return { ids, runs }
}

/** A stripped output as the parser reads it (the adapters rewrite it so before their scanner). */
function markerForm(text: string): string {
  const rewriter = new StrippedRewriter()
  return rewriter.push(text) + rewriter.finish()
}

const parserOptions = (output: Output, implementation: Implementation) => ({
  implementation,
  toolNames: output.toolNames,
  ...(output.maxHeaderTokens === undefined ? {} : { maxHeaderTokens: output.maxHeaderTokens }),
})

function read(output: Output, implementation: Implementation): Reading {
  const { ids, runs } = idsOf(output)
  // Text input counts the header limit in bytes (MessageStream), unless the options say otherwise.
  const parser = new HarmonyStreamParser({
    ...(output.stripped ? { maxHeaderTokens: DEFAULT_MAX_HEADER_BYTES } : {}),
    ...parserOptions(output, implementation),
  })
  const states: ParserState[] = [parser.state]
  const opened = [0]
  for (const id of ids) {
    opened.push(opened.at(-1)! + parser.push([id]).opened.length)
    states.push(parser.state)
  }
  parser.finish()
  return { ids, runs, states, opened, messages: parser.messages }
}

/** What the client gets. */
interface Answer {
  content: string | null
  reasoning: string | null
  calls: { name: string; arguments: string }[]
  finish: string
  diagnostics: AdapterDiagnostic[]
}

function adapterOptions(output: Output, implementation: Implementation) {
  return {
    model: 'gpt-oss',
    // A fixed id, so that the call ids in diagnostics compare between answers.
    id: 'chatcmpl-nothinglost',
    ...(output.stripped ? { input: 'stripped' as const } : {}),
    parser: parserOptions(output, implementation),
  }
}

function answerOf(completion: ChatCompletion, diagnostics: AdapterDiagnostic[]): Answer {
  const { message, finish_reason } = completion.choices[0]!
  return {
    content: message.content,
    reasoning: message.reasoning_content ?? null,
    calls: (message.tool_calls ?? []).map((call) => ({ name: call.function.name, arguments: call.function.arguments })),
    finish: finish_reason,
    diagnostics,
  }
}

function whole(output: Output, implementation: Implementation): Answer {
  const input = output.stripped ? output.text : Uint32Array.from(idsOf(output).ids)
  const completion = chatCompletion(input, adapterOptions(output, implementation))
  return answerOf(completion, completion.diagnostics)
}

/** `items` cut at `cuts` (each modulo one more than the length; repeats are empty batches, which a stream may get too). */
function pieces<T>(items: readonly T[], cuts: readonly number[]): T[][] {
  const points = cuts.map((cut) => cut % (items.length + 1)).sort((a, b) => a - b)
  return [...points, items.length].map((point, i) => items.slice(i === 0 ? 0 : points[i - 1], point))
}

function streamed(output: Output, implementation: Implementation, cuts: readonly number[]): Answer {
  const stream = new ChatCompletionsStream(adapterOptions(output, implementation))
  if (output.stripped) for (const piece of pieces([...output.text], cuts)) stream.push(piece.join(''))
  else for (const piece of pieces(idsOf(output).ids, cuts)) stream.push(Uint32Array.from(piece))
  stream.finish()
  return answerOf(stream.completion(), stream.diagnostics)
}

/**
 * The text the client can read: the answer's fields and every diagnostic's text. `stray-tokens` diagnostics
 * cut a long stretch every MAX_STRAY_BYTES bytes: a diagnostic that long is joined with the next stray one.
 */
function fieldsOf(answer: Answer): string[] {
  const fields = [answer.content ?? '', answer.reasoning ?? '', ...answer.calls.flatMap((call) => [call.name, call.arguments])]
  let stretch: string | null = null
  for (const { code, text } of answer.diagnostics) {
    if (text === undefined) continue
    fields.push(text)
    if (code !== 'stray-tokens') {
      stretch = null
      continue
    }
    if (stretch !== null) fields.push((stretch += text))
    // Cut at the bound, or up to 3 bytes before it, where a character the bound would split starts.
    stretch = Buffer.byteLength(text) >= MAX_STRAY_BYTES - 3 ? (stretch ?? text) : null
  }
  return fields
}

/** Unicode White_Space, as the header rules trim it (Rust's `char::is_whitespace`; JavaScript's `\s` differs). */
const WHITE_SPACE = /[\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/g
const noWhiteSpace = (text: string) => text.replace(WHITE_SPACE, '')
/** What the parser trims off the front of a stranded answer (ASCII white space, stream-parser.ts `strand`). */
const trimAsciiStart = (text: string) => text.replace(/^[ \t\n\f\r]+/, '')
/** A diagnostic's text without the U+FFFD of a character cut at its end (the rest of it is in the next field). */
const uncut = (text: string) => text.replace(/\uFFFD+$/, '')

const CONSTRAIN = '<|constrain|>'
const CHANNEL = '<|channel|>'
/** Where a channel's value ends (header.ts CHANNEL_VALUE_END): white space or `<`. */
const CHANNEL_VALUE_END = /[\t\n\v\f\r <\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/

/** The header parts of `message` its header's text can be made of: white space and `<|constrain|>` (a special token) aside. */
function partsOf(message: HarmonyMessage): string[] {
  const parts = [message.role, message.name, message.channel, message.recipient, message.contentType]
  return parts.flatMap((part) => {
    const bare = part === undefined ? '' : noWhiteSpace(part.replaceAll(CONSTRAIN, ''))
    return bare === '' ? [] : [bare, `to=${bare}`]
  })
}

/** Whether `text`, white space aside, is a sequence of `parts`. */
function madeOf(text: string, parts: readonly string[]): boolean {
  const target = noWhiteSpace(text)
  const reached = [true]
  for (let at = 0; at < target.length; at++) {
    if (!reached[at]) continue
    for (const part of parts) if (part !== '' && target.startsWith(part, at)) reached[at + part.length] = true
  }
  return reached[target.length] === true
}

/**
 * The ids read into the header that id `at` was read into (the parser in state `header` after it; `<|start|>`
 * begins a new one), as `[from, to)`.
 */
function headerAround(reading: Reading, at: number): [number, number] {
  const inHeader = (i: number) => reading.states[i + 1] === 'header' && reading.ids[i] !== SPECIAL['<|start|>']
  let from = at
  while (from > 0 && inHeader(from - 1)) from--
  let to = at + 1
  while (to < reading.ids.length && inHeader(to)) to++
  return [from, to]
}

/**
 * Whether a header's text is made of `message`'s parts, `extra` words aside: each `<|channel|>` with its value
 * (up to white space or `<`, which must be a part) taken out first, as the header rules do, which may glue the
 * words on either side of it into one part (`to=functions.f<|channel|>commentary\u3000x` has the recipient
 * `functions.f\u3000x`).
 */
function headerOf(text: string, message: HarmonyMessage, extra: readonly string[] = []): boolean {
  const parts = [...partsOf(message), ...extra]
  let rest = text.replaceAll(CONSTRAIN, ' ')
  for (let at = rest.indexOf(CHANNEL); at >= 0; at = rest.indexOf(CHANNEL)) {
    const after = rest.slice(at + CHANNEL.length)
    const end = after.search(CHANNEL_VALUE_END)
    const value = end < 0 ? after : after.slice(0, end)
    if (!parts.includes(noWhiteSpace(value))) return false
    rest = rest.slice(0, at) + after.slice(value.length)
  }
  return madeOf(rest, parts)
}

/** `text` cut after `bytes` UTF-8 bytes: the characters wholly before, and the rest (the character cut included). */
function cutAtByte(text: string, bytes: number): [string, string] {
  let at = 0
  let seen = 0
  for (const char of text) {
    const next = seen + Buffer.byteLength(char)
    if (next > bytes) break
    seen = next
    at += char.length
  }
  return [text.slice(0, at), text.slice(at)]
}

/** An output answered whole, without tools, at the default header limit. */
const plain = (text: string, stripped = false): Output => ({ text, stripped, toolNames: [], maxHeaderTokens: undefined, splits: [] })

/**
 * Losses this test found, mended since (each on both backends): their smallest inputs, kept as regressions.
 * - `to=` with nothing after it was read as no recipient without a word: an `empty-recipient` diagnostic now
 *   holds the header (repairRecipient in src/backend/js/header.ts, crate/core/src/header.rs).
 * - Stray text cut at MAX_STRAY_BYTES split a character whose bytes the cut fell between (both halves U+FFFD):
 *   the cut now falls before such a character (addStray in src/backend/js/stream-parser.ts, add_stray in
 *   crate/core/src/stream_parser.rs). Text input (one id a byte) cut any multi-byte character there.
 */
const MENDED_LOSSES: Record<string, Output> = {
  'empty-recipient': plain('<|channel|>commentary to=<|message|>Hi<|end|>'),
  'empty-recipient before a content type': plain('<|channel|>commentary to= <|constrain|>json<|message|>{}<|call|>'),
  'stray-cut-character': plain(`<|channel|>final<|message|>Hi<|return|>${'a'.repeat(MAX_STRAY_BYTES - 1)}é`, true),
  'stray-cut-character, token input': plain(`<|channel|>final<|message|>Hi<|return|>${'a'.repeat(MAX_STRAY_BYTES - 2)}日本語`),
}

/**
 * How the runs were found (which part of the property), with a count of each: the test's log, which shows that
 * the inputs reach every part.
 */
type Tally = Record<string, number>

/** Why `run` is not in `answer`, or null when it is; counted in `tally` (when there is one). */
function lossOf(run: Run, reading: Reading, answer: Answer, tally: Tally | null): string | null {
  const fields = fieldsOf(answer)
  const found = (text: string) => text === '' || fields.some((field) => field.includes(text))
  const explained = (how: string) => {
    if (tally !== null) tally[how] = (tally[how] ?? 0) + 1
    return null
  }
  if (found(run.text)) return explained('in a field or diagnostic')
  if (aroundCalls(run.text, answer, found)) return explained('around calls recovered from text')
  // The states the parser went through: before the run's first id, then after each of its ids.
  const states = reading.states.slice(run.from, run.to + 1)
  const [before, ...after] = states
  const diagnosticTexts = answer.diagnostics.flatMap((d) => (d.text === undefined ? [] : [d.text]))
  if (before === 'header' && after.every((state) => state === 'header')) {
    const message = reading.messages[reading.opened[run.from]!]
    const header = decodeTokens(reading.ids.slice(...headerAround(reading, run.from)))
    if (message !== undefined && headerOf(header, message)) return explained('header parts')
    return `header text, in no field or diagnostic, and its header ${show(header)} not made of the parts of ${show(message)}`
  }
  const headerIds = after.findIndex((state) => state !== 'header')
  if (before === 'header' && headerIds >= 0 && after.slice(headerIds).every((state) => state === 'content')) {
    // header-too-long: the header so far went to the diagnostic, the id that overflowed and the rest to the content.
    const bytes = reading.ids.slice(run.from, run.from + headerIds).reduce((n, id) => n + tokenBytes(id).length, 0)
    const [header, rest] = cutAtByte(run.text, bytes)
    if (diagnosticTexts.some((text) => text.includes(header)) && found(rest)) return explained('header-too-long')
    return `a header cut by its limit after ${show(header)}: not both in a diagnostic and ${show(rest)} in a field`
  }
  const strayIds = after.findIndex((state) => state !== 'expect-start')
  if (before === 'expect-start' && strayIds >= 0 && after.slice(strayIds).every((state) => state === 'content')) {
    // stranded-text: the diagnostic holds the stray text up to the id that opened the answer (so the white space
    // before it), the answer all of it but that white space.
    const answerText = trimAsciiStart(run.text)
    const whiteSpace = run.text.length - answerText.length
    const stranded = answer.diagnostics.filter((d) => d.code === 'stranded-text').map((d) => uncut(d.text ?? ''))
    if (
      (found(answerText) || aroundCalls(answerText, answer, found)) &&
      stranded.some((text) => text.length >= whiteSpace && run.text.startsWith(text))
    )
      return explained('stranded-text')
    return 'text read as a stranded answer: not in the answer without its leading white space, or that white space in no stranded-text diagnostic'
  }
  return `text read through states ${states.join(' ')}, in no field or diagnostic`
}

/**
 * Whether `text` is in the fields once the texts that calls were recovered from (`text-tool-call` diagnostics,
 * which hold them) are taken out of it: what is left between them is each in a field, or white space, which
 * goes with the JSON it surrounds (src/wire/text-tool-calls.ts).
 */
function aroundCalls(text: string, answer: Answer, found: (text: string) => boolean): boolean {
  const sources = answer.diagnostics.flatMap((d) => (d.code === 'text-tool-call' && d.text ? [d.text] : []))
  let pieces = [text]
  for (const source of sources) pieces = pieces.flatMap((piece) => piece.split(source))
  return pieces.length > 1 && pieces.every((piece) => piece.trim() === '' || found(piece))
}

/** Whether `marked` is `text` with markers, and spaces, added: what the stripped form's rewriter may add. */
function onlyAdds(text: string, marked: string): boolean {
  const plain = [...text.replace(STEERING, '')]
  let at = 0
  for (const char of marked.replace(STEERING, '')) {
    if (at < plain.length && char === plain[at]) at++
    else if (char !== ' ') return false
  }
  return at === plain.length
}

/**
 * An answer without its diagnostics' offsets: the adapter's own diagnostics (`dropped-message`,
 * `invalid-tool-arguments`) take the tokens read when the batch that closed their message was read, so
 * streamed they differ from whole; the parser's offsets do not depend on the split (parser/property.test.mts).
 */
function withoutOffsets(answer: Answer): object {
  return { ...answer, diagnostics: answer.diagnostics.map(({ tokenOffset: _, ...diagnostic }) => diagnostic) }
}

/** JSON with every character outside printable ASCII escaped: invisible white space shows in a failure. */
function show(value: unknown): string {
  return JSON.stringify(value).replace(/[^\x20-\x7e]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

/**
 * Checks `output` on every backend, whole and streamed: null when nothing is lost and the answers agree,
 * else what went wrong. Runs are counted in `tally` by how they were found (see lossOf).
 */
function problemOf(output: Output, tally: Tally | null): string | null {
  if (output.stripped && !onlyAdds(output.text, markerForm(output.text)))
    return `the stripped form's rewriter changed the text: ${show(markerForm(output.text))}`
  let first: { implementation: Implementation; answer: Answer } | null = null
  for (const implementation of IMPLEMENTATIONS) {
    const answer = whole(output, implementation)
    for (const cuts of output.splits) {
      const inPieces = streamed(output, implementation, cuts)
      if (!isDeepStrictEqual(withoutOffsets(inPieces), withoutOffsets(answer)))
        return `${implementation}: streamed at ${show(cuts)}, the answer differs: ${show(inPieces)} ≠ whole ${show(answer)}`
    }
    if (first !== null && !isDeepStrictEqual(answer, first.answer))
      return `${implementation} ≠ ${first.implementation}: ${show(answer)} ≠ ${show(first.answer)}`
    first ??= { implementation, answer }
    const reading = read(output, implementation)
    for (const run of reading.runs) {
      const loss = lossOf(run, reading, answer, tally)
      if (loss !== null) return `${implementation}: lost ${show(run.text)}: ${loss}; the answer: ${show(answer)}`
    }
  }
  return null
}

// ---- Inputs ----

const SPECIALS = Object.keys(SPECIAL)
/** Header words, separators of the stripped form, pieces of markers, JSON: what malformed outputs are made of. */
const WORDS = [
  'assistant',
  'user',
  'tool',
  'analysis',
  'commentary',
  'final',
  'to=functions.get_weather',
  'to=',
  'functions.',
  ' to=functions.Web Search',
  'json',
  '<|constrain|>json',
  'assistantfinal',
  'assistantanalysis',
  'assistantcommentary to=functions.get_weather json',
  '<|',
  '|>',
  '<|channel',
  '<|endoftext|>',
  '<|reserved_200018|>',
  '{"city":"Paris"}',
  '...',
]
const SPACES = [' ', '  ', '\n', '\n\n', '\t', '\r\n', '\f', '\v', '\u00a0', '\u2009', '\u3000', '\u0085', '\u200b', '\ufeff']
/** Multi-byte characters, some of which o200k cuts into several ids (a character split across tokens). */
const MULTIBYTE = ['é', 'ß', '€', '天天中彩票', '𝄞', '😀', '👋🏽', 'ﷺ', '\u0301', 'Ω≈ç√']
/** Whole headers, so that random sequences hold well-formed messages too; ends followed by white space (stranded text). */
const HEADERS = [
  '<|end|>\n\n',
  '<|end|> ',
  '<|start|>assistant',
  '<|channel|>analysis<|message|>',
  '<|channel|>final<|message|>',
  '<|channel|>commentary<|message|>',
  '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>',
  '<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>',
  '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>',
  '<|start|>assistant<|channel|>commentary to=browser.search<|message|>',
]
const TOOL_NAMES = ['functions.get_weather', 'functions.Web Search', 'functions.lookup']

/** Ordinary text: header words, white space, multi-byte characters, any code points, ASCII. */
const textPiece = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...WORDS) },
  { weight: 3, arbitrary: fc.constantFrom(...SPACES) },
  { weight: 2, arbitrary: fc.constantFrom(...MULTIBYTE) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 8 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 16 }) },
)
const special = fc.constantFrom(...SPECIALS)
const fragment = fc.oneof(
  { weight: 3, arbitrary: textPiece },
  { weight: 2, arbitrary: special },
  { weight: 1, arbitrary: fc.constantFrom(...HEADERS) },
)
/** A header limit: the default mostly, else small enough to cut headers (ids, or bytes of a stripped output). */
const maxHeaderTokens = fc.oneof(
  { weight: 3, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 24 }) },
)
/** One random split of the stream. */
const splits = fc.array(fc.nat(), { maxLength: 8 }).map((cuts) => [cuts])

/** An output as atoms: each special token one, each code point of text one (edits never cut a marker). */
const atomsOf = (output: string) => output.split(MARKER).flatMap((part) => (isMarker(part) ? [part] : [...part]))

type Edit =
  | { kind: 'drop' | 'double'; at: number }
  | { kind: 'swap'; at: number; with: number }
  | { kind: 'insert'; at: number; atoms: string }
  | { kind: 'cut'; at: number }

const edit: fc.Arbitrary<Edit> = fc.oneof(
  fc.record({ kind: fc.constantFrom('drop' as const, 'double' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('swap' as const), at: fc.nat(), with: fc.nat() }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), atoms: fragment }),
  fc.record({ kind: fc.constant('cut' as const), at: fc.nat() }),
)

/** `output` with `edits` made in order; edits of special tokens do nothing to an output without one. */
function edited(output: string, edits: readonly Edit[]): string {
  let atoms = atomsOf(output)
  for (const change of edits) {
    const markers = atoms.flatMap((atom, i) => (isMarker(atom) ? [i] : []))
    const marker = (n: number) => markers[n % markers.length]!
    switch (change.kind) {
      case 'insert':
        // Split again: an inserted header is several atoms, which later edits may take apart.
        atoms.splice(change.at % (atoms.length + 1), 0, change.atoms)
        atoms = atomsOf(atoms.join(''))
        break
      case 'cut':
        atoms.length = change.at % (atoms.length + 1)
        break
      case 'drop':
        if (markers.length > 0) atoms.splice(marker(change.at), 1)
        break
      case 'double':
        if (markers.length > 0) atoms.splice(marker(change.at), 0, atoms[marker(change.at)]!)
        break
      case 'swap':
        if (markers.length > 0) {
          const [a, b] = [marker(change.at), marker(change.with)]
          ;[atoms[a], atoms[b]] = [atoms[b]!, atoms[a]!]
        }
    }
  }
  return atoms.join('')
}

const toolNamesOf = (c: Case) => (c.tools ?? []).map((tool) => `functions.${tool.name}`)

/** A corpus output, edited. */
const editedCase: fc.Arbitrary<Output> = fc
  .record({ c: fc.constantFrom(...cases), edits: fc.array(edit, { minLength: 1, maxLength: 5 }), maxHeaderTokens, splits })
  .map(({ c, edits, maxHeaderTokens, splits }) => ({
    text: edited(c.output, edits),
    stripped: c.shape === 'stripped',
    toolNames: toolNamesOf(c),
    maxHeaderTokens,
    splits,
  }))

/** Special tokens and text at random; or, as a stripped output, text that may start with a channel name. */
const randomOutput: fc.Arbitrary<Output> = fc.oneof(
  fc.record({
    text: fc.array(fragment, { minLength: 1, maxLength: 24 }).map((parts) => parts.join('')),
    stripped: fc.constant(false),
    toolNames: fc.subarray(TOOL_NAMES),
    maxHeaderTokens,
    splits,
  }),
  fc.record({
    text: fc
      .tuple(
        fc.constantFrom('analysis', 'commentary', 'commentary to=functions.get_weather', 'final', ''),
        fc.array(textPiece, { maxLength: 16 }),
      )
      .map(([channel, parts]) => channel + parts.join('')),
    stripped: fc.constant(true),
    toolNames: fc.subarray(TOOL_NAMES),
    maxHeaderTokens,
    splits,
  }),
)

// ---- Tests ----

/** Runs `fc.assert` over `outputs`, how each run of text was found logged. */
function assertNothingLost(
  t: { log: (...values: unknown[]) => void; pass: () => void },
  outputs: fc.Arbitrary<Output>,
  runs: number,
): void {
  const tally: Tally = {}
  fc.assert(
    fc.property(outputs, (output) => {
      const problem = problemOf(output, tally)
      if (problem !== null) throw new Error(`${problem}\noutput: ${show(output)}`)
    }),
    { numRuns: runs, includeErrorInReport: true, ...SEED },
  )
  t.log('runs of text found:', tally)
  t.pass()
}

test('the corpus as it is: nothing lost, whole and streamed (batches of 1, 5 and 64 ids or characters), on both backends', (t) => {
  const tally: Tally = {}
  for (const c of cases) {
    const stripped = c.shape === 'stripped'
    const length = stripped
      ? [...c.output].length
      : idsOf({ text: c.output, stripped, toolNames: [], maxHeaderTokens: undefined, splits: [] }).ids.length
    const splits = [1, 5, 64].map((size) => Array.from({ length: Math.floor(length / size) }, (_, i) => size * (i + 1)))
    t.is(problemOf({ text: c.output, stripped, toolNames: toolNamesOf(c), maxHeaderTokens: undefined, splits }, tally), null, c.id)
  }
  t.log('runs of text found:', tally)
})

test('corpus outputs with special tokens dropped, doubled, swapped or inserted, text inserted, cut anywhere: nothing lost', (t) => {
  assertNothingLost(t, editedCase, RUNS)
})

test('random sequences of special tokens and text, and random stripped outputs: nothing lost', (t) => {
  assertNothingLost(t, randomOutput, RUNS)
})

test(`a stray stretch is cut every ${MAX_STRAY_BYTES} bytes, as fieldsOf joins it`, (t) => {
  for (const implementation of IMPLEMENTATIONS) {
    const answer = whole(plain(`<|return|>${'a'.repeat(2 * MAX_STRAY_BYTES + 1)}`, true), implementation)
    t.deepEqual(
      answer.diagnostics.filter((d) => d.code === 'stray-tokens').map((d) => d.text?.length),
      [MAX_STRAY_BYTES, MAX_STRAY_BYTES, 1],
      implementation,
    )
  }
})

for (const [loss, smallest] of Object.entries(MENDED_LOSSES)) {
  test(`once lost, now kept: ${loss}`, (t) => {
    t.is(problemOf(smallest, null), null)
  })
}
