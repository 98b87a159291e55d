/**
 * Property tests (fast-check): on random token streams mixing every special token, header words,
 * ordinary ids and split UTF-8, at random batch splits:
 * - lenient mode never throws, and its results do not depend on the batch split;
 * - native and js give deep-equal transcripts, strict and lenient;
 * - nothing is lost: each message's content is exactly the lossy decoding of its content tokens (checked
 *   against an independent decoder), its segments add up to it, and text between messages is in a
 *   diagnostic;
 * - finish() is idempotent; rejected input leaves the parser as it was.
 */
import test from 'ava'
import fc from 'fast-check'

import { HarmonyStreamParser } from 'harmony-stream'

import { harmony, IMPLEMENTATIONS, nativeTest, replay, SPECIAL } from '../helpers/harmony.mjs'
import { decodeTokens } from '../helpers/token-bytes.mjs'
import { transcript } from '../helpers/transcript.mjs'

const RUNS = Number(process.env.PROPERTY_RUNS ?? 400)
const STOPS = [SPECIAL['<|end|>'], SPECIAL['<|return|>'], SPECIAL['<|call|>']]
const ALL_SPECIALS = [...Object.values(SPECIAL), 199998, 199999, 200000, 200018, 200013, 201088]
const HEADER_WORDS = harmony('assistant analysis final commentary to=functions.lookup json code user tool =')

const anyToken = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...ALL_SPECIALS) },
  { weight: 3, arbitrary: fc.constantFrom(...HEADER_WORDS) },
  { weight: 1, arbitrary: fc.constantFrom(31446, 244, 9552, 43120, 226) }, // pieces of multi-byte characters
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 201_088 }) },
)
const stream = fc.array(anyToken, { maxLength: 150 })

/** ASCII white space as the parser reads it between messages. */
const isWhiteSpace = (id: number) => id < 199_998 && /^[ \t\n\f\r]+$/.test(decodeTokens([id]))

/**
 * What the lenient parser gives for well-formed messages each followed by `filler` (docs/SEMANTICS.md): filler
 * is stray tokens (one `stray-tokens` diagnostic each run) unless it follows `<|end|>` and holds text before any
 * special token, where it opens a final message (`stranded-text`, the held text in the diagnostic, the
 * message's content without its leading white space) that a stop token closes, or the next `<|start|>`
 * (`missing-end`), or the end of the stream.
 */
function expectedOutcome(messages: { content: number[]; stop: number; filler: number[] }[]) {
  const contents: string[] = []
  const diagnostics: [string, string | undefined][] = []
  for (const [n, m] of messages.entries()) {
    contents.push(decodeTokens(m.content))
    let strandable = m.stop === SPECIAL['<|end|>']
    let stray: number[] = []
    let stranded: number[] | null = null
    for (const id of m.filler) {
      if (stranded !== null) {
        if (!STOPS.includes(id)) {
          stranded.push(id)
          continue
        }
        contents.push(decodeTokens(stranded).replace(/^[ \t\n\f\r]+/, ''))
        stranded = null
        strandable = id === SPECIAL['<|end|>']
        continue
      }
      stray.push(id)
      if (id >= 199_998) strandable = false
      else if (strandable && !isWhiteSpace(id)) {
        diagnostics.push(['stranded-text', decodeTokens(stray)])
        stranded = stray
        stray = []
        strandable = false
      }
    }
    if (stranded !== null) {
      contents.push(decodeTokens(stranded).replace(/^[ \t\n\f\r]+/, ''))
      if (n < messages.length - 1) diagnostics.push(['missing-end', undefined])
    } else if (stray.length > 0) diagnostics.push(['stray-tokens', decodeTokens(stray)])
  }
  return { contents, diagnostics }
}

/** Cut points → batches. */
function split(tokens: number[], cuts: number[]): number[][] {
  const points = [...new Set(cuts.map((c) => c % (tokens.length + 1)))].sort((a, b) => a - b)
  const out: number[][] = []
  let from = 0
  for (const point of [...points, tokens.length]) {
    out.push(tokens.slice(from, point))
    from = point
  }
  return out
}

const cuts = fc.array(fc.nat(), { maxLength: 20 })
const options = fc.record({
  role: fc.constantFrom('assistant' as const, null),
  strict: fc.boolean(),
  maxHeaderTokens: fc.integer({ min: 1, max: 40 }),
})

nativeTest(test)('native ≡ js on random streams, strict and lenient, at random splits', (t) => {
  fc.assert(
    fc.property(stream, cuts, options, (tokens, at, opts) => {
      const chunks = split(tokens, at)
      t.deepEqual(transcript(chunks, opts, 'native'), transcript(chunks, opts, 'js'))
    }),
    { numRuns: RUNS * 2 },
  )
})

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: lenient mode never throws and is independent of the batch split`, (t) => {
    fc.assert(
      fc.property(stream, cuts, fc.constantFrom('assistant' as const, null), (tokens, at, role) => {
        const whole = replay([tokens], { implementation, role })
        const parts = replay(split(tokens, at), { implementation, role })
        t.deepEqual(parts.messages, whole.messages)
        t.deepEqual(parts.textByMessage, whole.textByMessage)
        t.deepEqual(
          parts.batches.flatMap((b) => b.diagnostics),
          whole.batches.flatMap((b) => b.diagnostics),
        )
        whole.messages.forEach((m, i) => {
          t.is(whole.textByMessage[i] ?? '', m.content, 'segments add up to the content')
        })
        // Every message is opened once, in order, with its header, no later than its first text and its end.
        const opened = parts.batches.flatMap((b) => b.opened)
        t.deepEqual(
          opened.map(({ messageIndex, ...header }) => [messageIndex, header]),
          parts.messages.map(({ content: _, terminator: __, ...header }, i) => [i, header]),
        )
        parts.batches.forEach((batch, b) => {
          const seen = new Set(parts.batches.slice(0, b + 1).flatMap((x) => x.opened.map((o) => o.messageIndex)))
          t.true(
            batch.segments.every((s) => seen.has(s.messageIndex)),
            'text only of opened messages',
          )
        })
      }),
      { numRuns: RUNS },
    )
  })

  test(`${implementation}: nothing is lost between well-formed headers`, (t) => {
    // Messages with well-formed headers, content of any tokens that cannot end a message, and filler
    // between messages that cannot start one. Filler after `<|end|>` that holds text before any special
    // token is an answer without its header (`stranded-text`): a final message of its own.
    const content = fc.array(
      anyToken.filter((id) => !STOPS.includes(id) && id !== SPECIAL['<|start|>'] && id !== SPECIAL['<|channel|>']),
      { maxLength: 40 },
    )
    const filler = fc.array(
      anyToken.filter((id) => id !== SPECIAL['<|start|>'] && id !== SPECIAL['<|channel|>']),
      { maxLength: 6 },
    )
    const headers = [
      '<|start|>assistant<|channel|>analysis<|message|>',
      '<|start|>assistant<|channel|>commentary to=functions.f json<|message|>',
      '<|start|>assistant<|channel|>final<|message|>',
    ].map(harmony)
    const message = fc.record({ header: fc.constantFrom(...headers), content, stop: fc.constantFrom(...STOPS), filler })
    fc.assert(
      fc.property(fc.array(message, { minLength: 1, maxLength: 5 }), cuts, (messages, at) => {
        const tokens = messages.flatMap((m) => [...m.header, ...m.content, m.stop, ...m.filler])
        const result = replay(split(tokens, at), { implementation, role: null })
        const expected = expectedOutcome(messages)
        t.deepEqual(
          result.messages.map((m) => m.content),
          expected.contents,
        )
        const diagnostics = result.batches.flatMap((b) => b.diagnostics)
        t.deepEqual(
          diagnostics.map((d) => [d.code, d.text]),
          expected.diagnostics,
          'each run of filler is reported whole, or read as the answer it is',
        )
      }),
      { numRuns: RUNS },
    )
  })

  test(`${implementation}: finish() is idempotent and push() after it throws`, (t) => {
    fc.assert(
      fc.property(stream, (tokens) => {
        const parser = new HarmonyStreamParser({ implementation })
        parser.push(tokens)
        const first = parser.finish()
        const messages = parser.messages
        t.deepEqual(parser.finish(), { opened: [], segments: [], completed: [], diagnostics: [] })
        t.deepEqual(parser.messages, messages)
        t.true(first.completed.every((m) => messages.includes(m)))
        t.throws(() => parser.push([1]), { code: 'parser-finished' } as never)
      }),
      { numRuns: RUNS },
    )
  })

  test(`${implementation}: rejected input leaves the parser as it was`, (t) => {
    const bad = fc.oneof(
      fc.constantFrom(-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 201_089, 2 ** 32, '7', null, undefined, {}),
      fc.integer({ min: 201_089 }),
      fc.integer({ max: -1 }),
    )
    fc.assert(
      fc.property(stream, stream, bad, fc.nat(), (before, after, value, position) => {
        const clean = replay([before, after], { implementation })
        const parser = new HarmonyStreamParser({ implementation })
        const batches = [parser.push(before)]
        const poisoned = [...after]
        poisoned.splice(position % (after.length + 1), 0, value as number)
        t.throws(() => parser.push(poisoned))
        batches.push(parser.push(after), parser.finish())
        t.deepEqual(batches, clean.batches)
      }),
      { numRuns: RUNS },
    )
  })
}
