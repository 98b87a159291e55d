/**
 * The malformed gpt-oss outputs users posted in public threads (issue 46), from `fixtures/malformed-outputs.json`:
 * each case holds its source (repository and issue), the output as posted, the tools its client declared, what
 * its user expected and what the engine did. Each is answered as a gateway answers it (`chatCompletion` and
 * `responseObject`, the tools as its client declared them, default options; an output whose special tokens the engine
 * stripped as text with `input: 'stripped'`, as a gateway over such an engine reads it), on both backends, whole
 * and streamed at several batch sizes:
 *
 * - nothing throws, and the answer is the same on both backends and at every batch size, whole or streamed;
 * - where the case says this parser gives what its user expected (`recovered: true`), both faces' answers hold
 *   each concrete part of that expectation (final text, reasoning, calls with their arguments) and say what was
 *   repaired (a diagnostic); where it says it does not, they do not, so the fixture and the table in
 *   docs/SEMANTICS.md change with the parser. A case whose expectation is not in the posted output at all (the
 *   thread shows a fragment, or an engine's reading of the output, or the model wrote no answer) says why in
 *   `out_of_reach`.
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'
import { ChatCompletionsStream, chatCompletion, type Implementation, ResponsesStream, responseObject } from 'harmony-stream'

import { batches, harmony, IMPLEMENTATIONS } from '../helpers/harmony.mjs'

interface Case {
  id: string
  source: { repo: string; issue: number }
  shape: string
  output: string
  tools?: { name: string; parameters?: Record<string, unknown> }[]
  expected: { final?: string; reasoning?: string; calls?: { name: string; arguments: unknown }[]; error?: boolean }
  recovered: boolean
  /** Why the posted output cannot give what its user expected. */
  out_of_reach?: string
  /** Valid Harmony that an engine misread: nothing here to repair, so no diagnostic. */
  well_formed?: boolean
}

const { cases } = JSON.parse(readFileSync(join(import.meta.dirname, 'fixtures', 'malformed-outputs.json'), 'utf8')) as { cases: Case[] }

interface Answer {
  final: string
  reasoning: string
  calls: { name: string; arguments: string }[]
  diagnostics: string[]
}

function answerOf(message: Record<string, unknown>, diagnostics: { code: string }[]): Answer {
  const calls = (message.tool_calls as { function: { name: string; arguments: string } }[] | undefined) ?? []
  return {
    final: (message.content as string | null) ?? '',
    reasoning: (message.reasoning_content as string | undefined) ?? '',
    calls: calls.map((call) => ({ name: call.function.name, arguments: call.function.arguments })),
    diagnostics: diagnostics.map((d) => d.code),
  }
}

interface Item {
  type: string
  name?: string
  arguments?: string
  content?: { type: string; text: string }[]
}

/** A Response's output read as the same parts: its messages' text, its reasoning's text, its function calls. */
function answerOfItems(output: readonly Item[], diagnostics: { code: string }[]): Answer {
  const text = (type: string) =>
    output
      .filter((item) => item.type === type)
      .flatMap((item) => item.content ?? [])
      .map((part) => part.text)
      .join('')
  return {
    final: text('message'),
    reasoning: text('reasoning'),
    calls: output.filter((item) => item.type === 'function_call').map((item) => ({ name: item.name!, arguments: item.arguments! })),
    diagnostics: diagnostics.map((d) => d.code),
  }
}

const stripped = (c: Case) => c.shape === 'stripped'

const optionsOf = (c: Case, implementation: Implementation) => ({
  model: 'gpt-oss',
  ...(stripped(c) ? { input: 'stripped' as const } : {}),
  // The tools as its client declared them (names and schemas), as a gateway passes a request's `tools`.
  tools: (c.tools ?? []).map((tool) => ({ type: 'function', function: tool })),
  parser: { implementation },
})

type Face = 'chat' | 'responses'

function whole(c: Case, implementation: Implementation, face: Face): Answer {
  const input = stripped(c) ? c.output : Uint32Array.from(harmony(c.output))
  if (face === 'responses') {
    const response = responseObject(input, optionsOf(c, implementation))
    return answerOfItems(response.output as unknown as Item[], response.diagnostics)
  }
  const completion = chatCompletion(input, optionsOf(c, implementation))
  return answerOf(completion.choices[0]!.message as unknown as Record<string, unknown>, completion.diagnostics)
}

/** The output in pieces of `size`: ids, or characters of a stripped output's text. */
function pieces(c: Case, size: number): (Uint32Array | string)[] {
  if (!stripped(c)) return batches(harmony(c.output), size).map((batch) => Uint32Array.from(batch))
  const characters = [...c.output]
  return batches(characters, size).map((batch) => batch.join(''))
}

function streamed(c: Case, implementation: Implementation, face: Face, size: number): Answer {
  if (face === 'responses') {
    const stream = new ResponsesStream(optionsOf(c, implementation))
    for (const piece of pieces(c, size)) stream.push(piece)
    stream.finish()
    return answerOfItems(stream.response().output as unknown as Item[], stream.diagnostics)
  }
  const stream = new ChatCompletionsStream(optionsOf(c, implementation))
  for (const piece of pieces(c, size)) stream.push(piece)
  stream.finish()
  const completion = stream.completion()
  return answerOf(completion.choices[0]!.message as unknown as Record<string, unknown>, stream.diagnostics)
}

/** A part of an expectation that is no text to compare: a placeholder. */
const placeholder = (value: string) => value.startsWith('(')

/** Where the thread cut a text (`…`), or `-1`. */
const elided = (value: string) => value.indexOf('…')

/** Reasoning messages are joined with nothing between them: compare reasoning without its white space. */
const unspaced = (text: string) => text.replace(/\s+/g, '')

/**
 * Whether `answer` holds every concrete part of what the user expected (and the expectation has one). A text the
 * thread cut (`…`) must begin as it does up to the cut; a placeholder (`(…)`) is not compared.
 */
function meets(answer: Answer, expected: Case['expected']): boolean {
  let checked = 0
  if (expected.final !== undefined && !placeholder(expected.final)) {
    checked++
    const cut = elided(expected.final)
    const wanted = cut < 0 ? expected.final.trim() : expected.final.slice(0, cut).trim()
    if (cut < 0 ? answer.final.trim() !== wanted : !answer.final.trim().startsWith(wanted)) return false
  }
  if (expected.reasoning !== undefined && !placeholder(expected.reasoning)) {
    checked++
    const cut = elided(expected.reasoning)
    const wanted = unspaced(cut < 0 ? expected.reasoning : expected.reasoning.slice(0, cut))
    if (!unspaced(answer.reasoning).includes(wanted)) return false
  }
  for (const [i, call] of (expected.calls ?? []).entries()) {
    checked++
    const got = answer.calls[i]
    if (got === undefined) return false
    if (!placeholder(call.name) && got.name !== call.name) return false
    if (typeof call.arguments === 'object' && JSON.stringify(parsed(got.arguments)) !== JSON.stringify(call.arguments)) return false
  }
  if (expected.error === true) {
    checked++
    if (answer.diagnostics.length === 0) return false
  }
  return checked > 0
}

function parsed(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

test('the corpus: at least 40 outputs from at least 6 projects, each with its thread', (t) => {
  t.true(cases.length >= 40, `${cases.length} cases`)
  t.true(new Set(cases.map((c) => c.source.repo)).size >= 6)
  for (const c of cases) t.true(Number.isInteger(c.source.issue) && typeof c.recovered === 'boolean', c.id)
  t.is(new Set(cases.map((c) => c.id)).size, cases.length, 'ids are unique')
})

for (const c of cases) {
  const title = c.recovered
    ? 'what its user expected'
    : c.out_of_reach !== undefined
      ? `out of reach: ${c.out_of_reach}`
      : 'not yet recovered'
  test(`${c.id} (${c.shape}, ${c.source.repo}#${c.source.issue}): ${title}`, (t) => {
    if (c.out_of_reach !== undefined) t.false(c.recovered, 'a case out of reach is not recovered')
    for (const face of ['chat', 'responses'] as const) {
      const reference = whole(c, 'js', face)
      for (const implementation of IMPLEMENTATIONS) {
        t.deepEqual(whole(c, implementation, face), reference, `${face}, ${implementation}, whole`)
        for (const size of [1, 3, 64])
          t.deepEqual(streamed(c, implementation, face, size), reference, `${face}, ${implementation}, streamed, batches of ${size}`)
      }
      t.is(meets(reference, c.expected), c.recovered, `${face}: ${JSON.stringify(reference).slice(0, 400)}`)
      // A malformed output repaired says how; a well-formed one an engine misread needs no word.
      if (c.recovered) t.is(reference.diagnostics.length > 0, c.well_formed !== true, `${face}: ${reference.diagnostics}`)
    }
  })
}

/** What the answer holds, in a few words: reasoning, an answer, the calls by name (or nothing but diagnostics). */
function gives(answer: Answer): string {
  const parts = [
    ...(answer.reasoning === '' ? [] : ['reasoning']),
    ...(answer.final === '' ? [] : ['answer']),
    ...answer.calls.map((call) => `call \`${call.name}\``),
  ]
  return parts.length === 0 ? 'nothing' : parts.join(' + ')
}

/** The table of docs/SEMANTICS.md "Outputs users posted", made from the fixture and what this parser gives. */
function corpusTable(): string {
  const rows = [...cases]
    .sort((a, b) => (a.shape < b.shape ? -1 : a.shape > b.shape ? 1 : 0))
    .map((c) => {
      const answer = whole(c, 'js', 'chat')
      const diagnostics =
        answer.diagnostics.length === 0 ? 'none' : [...new Set(answer.diagnostics)].map((code) => `\`${code}\``).join(', ')
      const verdict = c.recovered ? 'yes' : c.out_of_reach !== undefined ? `out of reach: ${c.out_of_reach}` : 'not yet'
      return `| ${c.shape} | ${c.source.repo}#${c.source.issue} | ${gives(answer)} | ${diagnostics} | ${verdict} |`
    })
  return ['| shape | thread | what this parser gives | diagnostics | as its user expected |', '|---|---|---|---|---|', ...rows].join('\n')
}

// `WRITE_CORPUS_TABLE=1 npx ava __test__/wire/corpus.test.mts` writes the table after a change to the parser or the fixture.
test('docs/SEMANTICS.md holds the corpus table as this parser answers it', (t) => {
  const path = join(import.meta.dirname, '..', '..', 'docs', 'SEMANTICS.md')
  const docs = readFileSync(path, 'utf8')
  const start = docs.indexOf('| shape | thread | what this parser gives |')
  const end = docs.indexOf('\n\n', start)
  t.true(start >= 0 && end > start, 'the table is in docs/SEMANTICS.md')
  const table = corpusTable()
  if (process.env.WRITE_CORPUS_TABLE === '1') writeFileSync(path, docs.slice(0, start) + table + docs.slice(end))
  else t.is(docs.slice(start, end), table, 'run with WRITE_CORPUS_TABLE=1 to write it')
})
