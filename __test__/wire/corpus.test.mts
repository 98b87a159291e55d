/**
 * The malformed gpt-oss outputs users posted in public threads (issue 46), from `fixtures/malformed-outputs.json`:
 * each case holds its source (repository and issue), the output as posted, the tools its client declared, what
 * its user expected and what the engine did. Each is answered as a gateway answers it (`chatCompletion`, the
 * declared tools as `toolNames`, default options; an output whose special tokens the engine stripped as text with
 * `input: 'stripped'`, as a gateway over such an engine reads it), on both backends, whole and streamed at
 * several batch sizes:
 *
 * - nothing throws, and the answer is the same on both backends and at every batch size, whole or streamed;
 * - where the case says this parser gives what its user expected (`recovered: true`), the answer holds each
 *   concrete part of that expectation (final text, reasoning, calls with their arguments), and says what it
 *   repaired (a diagnostic); where it says it does not (`recovered: false`, the shapes still open: outputs whose
 *   special tokens were stripped, reasoning written without a header), the answer does not, so the fixture and
 *   the table in docs/SEMANTICS.md change with the parser.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'
import { ChatCompletionsStream, chatCompletion, type Implementation } from 'harmony-stream'

import { batches, harmony, IMPLEMENTATIONS } from '../helpers/harmony.mjs'

interface Case {
  id: string
  source: { repo: string; issue: number }
  shape: string
  output: string
  tools?: { name: string }[]
  expected: { final?: string; reasoning?: string; calls?: { name: string; arguments: unknown }[]; error?: boolean }
  recovered: boolean
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

const stripped = (c: Case) => c.shape === 'stripped'

const optionsOf = (c: Case, implementation: Implementation) => ({
  model: 'gpt-oss',
  ...(stripped(c) ? { input: 'stripped' as const } : {}),
  parser: { implementation, toolNames: (c.tools ?? []).map((tool) => `functions.${tool.name}`) },
})

function whole(c: Case, implementation: Implementation): Answer {
  const input = stripped(c) ? c.output : Uint32Array.from(harmony(c.output))
  const completion = chatCompletion(input, optionsOf(c, implementation))
  return answerOf(completion.choices[0]!.message as unknown as Record<string, unknown>, completion.diagnostics)
}

/** The output in pieces of `size`: ids, or characters of a stripped output's text. */
function pieces(c: Case, size: number): (Uint32Array | string)[] {
  if (!stripped(c)) return batches(harmony(c.output), size).map((batch) => Uint32Array.from(batch))
  const characters = [...c.output]
  return batches(characters, size).map((batch) => batch.join(''))
}

function streamed(c: Case, implementation: Implementation, size: number): Answer {
  const stream = new ChatCompletionsStream(optionsOf(c, implementation))
  for (const piece of pieces(c, size)) stream.push(piece)
  stream.finish()
  const completion = stream.completion()
  return answerOf(completion.choices[0]!.message as unknown as Record<string, unknown>, stream.diagnostics)
}

/** A part of an expectation that is no text to compare: a placeholder, or text the thread cut. */
const concrete = (value: unknown) => typeof value !== 'string' || !(value.startsWith('(') || value.includes('…') || value === '...')

/** Whether `answer` holds every concrete part of what the user expected (and the expectation has one). */
function meets(answer: Answer, expected: Case['expected']): boolean {
  let checked = 0
  if (expected.final !== undefined && concrete(expected.final)) {
    checked++
    if (answer.final.trim() !== expected.final.trim()) return false
  }
  if (expected.reasoning !== undefined && concrete(expected.reasoning)) {
    checked++
    if (!answer.reasoning.includes(expected.reasoning.trim())) return false
  }
  for (const [i, call] of (expected.calls ?? []).entries()) {
    checked++
    const got = answer.calls[i]
    if (got === undefined) return false
    if (concrete(call.name) && got.name !== call.name) return false
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
  test(`${c.id} (${c.shape}, ${c.source.repo}#${c.source.issue}): ${c.recovered ? 'what its user expected' : 'not yet recovered'}`, (t) => {
    const reference = whole(c, 'js')
    for (const implementation of IMPLEMENTATIONS) {
      t.deepEqual(whole(c, implementation), reference, `${implementation}, whole`)
      for (const size of [1, 3, 64])
        t.deepEqual(streamed(c, implementation, size), reference, `${implementation}, streamed, batches of ${size}`)
    }
    t.is(meets(reference, c.expected), c.recovered, JSON.stringify(reference).slice(0, 400))
  })
}
