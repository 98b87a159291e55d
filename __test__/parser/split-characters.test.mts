/**
 * Characters split across tokens, one token per call. The native backend answers the pieces of a character it has
 * seen before without a crossing: it holds them, returns the text of the whole characters before a pending one at
 * once, and Rust, given the held pieces later, writes that text again (cut off there). Each call must give what the
 * js backend's gives, in a first pass and once the pieces are known, with state reads between calls or without,
 * and an id outside the vocabulary between two pieces must leave what is held as it was. The fast path
 * (`pushCompact`), which answers such calls without its backend's parse too, must give what the object API gives.
 */
import test from 'ava'

import {
  COMPACT_DIAGNOSTICS,
  COMPACT_FIRST_RECORD,
  COMPACT_RECORDS,
  COMPACT_STATE,
  compactCapacity,
  HarmonyParseError,
  HarmonyStreamParser,
  type HarmonyStreamParserOptions,
  type Implementation,
  RECORD_CLOSE,
  RECORD_OPEN,
  RECORD_TEXT,
} from 'harmony-stream'

import { harmony, NATIVE, nativeTest, random, SPECIAL } from '../helpers/harmony.mjs'
import { byteTokens, tokenBytes } from '../helpers/token-bytes.mjs'

/**
 * Tokens whose bytes are whole characters followed by the lead byte of a character of 2 or 3 bytes that any
 * continuation byte completes (C2–DF, E1–EC, EE–EF): from plain content they give text and leave a character
 * pending. The first few of the vocabulary, by id.
 */
function textThenLead(count: number): number[] {
  const found: number[] = []
  for (let id = 0; id < 199_998 && found.length < count; id++) {
    const bytes = tokenBytes(id)
    const lead = bytes[bytes.length - 1]!
    const twoOrThree = (lead >= 0xc2 && lead <= 0xdf) || (lead >= 0xe1 && lead <= 0xec) || lead === 0xee || lead === 0xef
    if (bytes.length < 2 || !twoOrThree) continue
    const before = bytes.subarray(0, bytes.length - 1)
    if (Buffer.from(before.toString('utf8'), 'utf8').equals(before) && !before.includes(0xef)) found.push(id)
  }
  return found
}

const CONTINUATION = byteTokens('\u0400')[1]! // the byte 0x80
const LEADS = textThenLead(12)

/** Pieces a stream is made of (token ids), inside a final answer unless a stop token or a header comes first. */
function pieces(next: () => number): number[] {
  const roll = next()
  if (roll < 0.2) return byteTokens(['深い', 'мир', '🧑‍🤝‍🧑', 'é', '✅'][Math.floor(next() * 5)]!)
  if (roll < 0.4) {
    const lead = LEADS[Math.floor(next() * LEADS.length)]!
    const needs = tokenBytes(lead).at(-1)! >= 0xe0 ? 2 : 1
    // Completed, or cut short by whatever comes next.
    return [lead, ...Array(next() < 0.8 ? needs : needs - 1).fill(CONTINUATION)]
  }
  if (roll < 0.5) return byteTokens('深').slice(0, 1 + Math.floor(next() * 2)) // a character never completed
  if (roll < 0.55) return [CONTINUATION] // a lone continuation byte
  if (roll < 0.75) return harmony([' plain', ' words', ' and', ' more'][Math.floor(next() * 4)]!)
  if (roll < 0.85) return [[SPECIAL['<|end|>'], SPECIAL['<|return|>'], SPECIAL['<|call|>']][Math.floor(next() * 3)]!]
  if (roll < 0.95) return harmony('<|start|>assistant<|channel|>final<|message|>')
  return harmony('<|channel|>analysis<|message|>')
}

function stream(next: () => number): number[] {
  const tokens = harmony('<|channel|>final<|message|>')
  const length = 20 + Math.floor(next() * 60)
  while (tokens.length < length) tokens.push(...pieces(next))
  return tokens
}

/** What a call returned, or the strict-mode error it threw. */
function outcome(call: () => unknown): unknown {
  try {
    return call()
  } catch (error) {
    if (!(error instanceof HarmonyParseError)) throw error
    const { code, message, tokenOffset, header, partial } = error
    return { error: { code, message, tokenOffset, header, partial } }
  }
}

/** One token per call, an id outside the vocabulary pushed before some of them; everything observable. */
function replay(
  tokens: number[],
  badBefore: Set<number>,
  options: HarmonyStreamParserOptions,
  implementation: Implementation,
  states: boolean,
): unknown[] {
  const parser = new HarmonyStreamParser({ ...options, implementation })
  const log: unknown[] = []
  tokens.forEach((token, i) => {
    if (badBefore.has(i)) {
      const error = (() => {
        try {
          parser.push(Uint32Array.of(999_999))
        } catch (caught) {
          return caught
        }
        return null
      })()
      log.push(error instanceof RangeError ? `RangeError: ${error.message}` : `no RangeError: ${String(error)}`)
    }
    log.push(outcome(() => parser.push(Uint32Array.of(token))))
    if (states) log.push(parser.state)
  })
  log.push(
    outcome(() => parser.finish()),
    parser.messages,
    parser.state,
  )
  return log
}

const OPTIONS: HarmonyStreamParserOptions[] = [{}, { strict: true }, { role: null }]

nativeTest(test)('split characters one token per call: native gives what js gives, first and once the pieces are known', (t) => {
  t.true(LEADS.length === 12, 'the vocabulary has tokens that end with the lead byte of a character')
  let compared = 0
  for (const pass of [1, 2]) {
    const next = random(20261128)
    for (let i = 0; i < 150; i++) {
      const tokens = stream(next)
      const badBefore = new Set(tokens.map((_, k) => k).filter(() => next() < 0.05))
      for (const options of OPTIONS) {
        for (const states of [false, true]) {
          const native = replay(tokens, badBefore, options, 'native', states)
          const js = replay(tokens, badBefore, options, 'js', states)
          t.deepEqual(native, js, `pass ${pass}, stream ${i}, ${JSON.stringify(options)}, states ${states}: ${JSON.stringify(tokens)}`)
          compared++
        }
      }
    }
  }
  t.log(`${compared} replays compared`)
})

/** What one call of the fast path gave, in the terms the object API gives it: text per message, opened and closed counts. */
function compactReplay(tokens: number[], options: HarmonyStreamParserOptions, implementation: Implementation): unknown[] {
  const parser = new HarmonyStreamParser({ ...options, implementation })
  const out = new Uint32Array(compactCapacity(1))
  const log: unknown[] = []
  const read = (text: string) => {
    const texts: [number, string][] = []
    let opened = 0
    let closed = 0
    for (let i = 0; i < out[COMPACT_RECORDS]; i++) {
      const at = COMPACT_FIRST_RECORD + 4 * i
      if (out[at] === RECORD_TEXT) texts.push([out[at + 1], text.slice(out[at + 2], out[at + 3])])
      else if (out[at] === RECORD_OPEN) opened++
      else if (out[at] === RECORD_CLOSE) closed++
    }
    const diagnostics = out[COMPACT_DIAGNOSTICS] > 0 ? parser.takeDiagnostics().map((d) => d.code) : []
    log.push({ text, texts, opened, closed, diagnostics, state: out[COMPACT_STATE] })
  }
  for (const token of tokens) read(parser.pushCompact(Uint32Array.of(token), out))
  read(parser.finishCompact(out))
  return log
}

function objectReplay(tokens: number[], options: HarmonyStreamParserOptions, implementation: Implementation): unknown[] {
  const parser = new HarmonyStreamParser({ ...options, implementation })
  const states = { 'expect-start': 0, header: 1, content: 2 }
  const log: unknown[] = []
  const read = (batch: ReturnType<HarmonyStreamParser['push']>) =>
    log.push({
      text: batch.segments.map((s) => s.text).join(''),
      texts: batch.segments.map((s) => [s.messageIndex, s.text]),
      opened: batch.opened.length,
      closed: batch.completed.length,
      diagnostics: batch.diagnostics.map((d) => d.code),
      state: states[parser.state],
    })
  for (const token of tokens) read(parser.push(Uint32Array.of(token)))
  read(parser.finish())
  return log
}

test('split characters one token per call: the fast path gives what the object API gives, on both implementations', (t) => {
  const implementations: Implementation[] = NATIVE ? ['native', 'js'] : ['js']
  let compared = 0
  for (const pass of [1, 2]) {
    const next = random(20261129)
    for (let i = 0; i < 150; i++) {
      const tokens = stream(next)
      for (const options of [{}, { role: null }] as HarmonyStreamParserOptions[]) {
        for (const implementation of implementations) {
          const compact = compactReplay(tokens, options, implementation)
          const objects = objectReplay(tokens, options, implementation)
          t.deepEqual(
            compact,
            objects,
            `pass ${pass}, stream ${i}, ${implementation}, ${JSON.stringify(options)}: ${JSON.stringify(tokens)}`,
          )
          compared++
        }
      }
    }
  }
  t.log(`${compared} replays compared`)
})
