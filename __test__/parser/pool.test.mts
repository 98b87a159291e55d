/**
 * The fast path and the pool: `pushCompact` and `HarmonyStreamPool` give, per stream, exactly what
 * `HarmonyStreamParser#push` gives (segments, completed messages, diagnostics, strict errors) for the same
 * batches, on random streams at random splits and random interleavings of streams; native and js write
 * identical compact output; bad arguments throw typed errors before anything is consumed.
 */
import test from 'ava'
import fc from 'fast-check'

import {
  COMPACT_DIAGNOSTICS,
  COMPACT_STATUS,
  COMPACT_STATUS_OK,
  COMPACT_STATUS_PARSE_ERROR,
  compactCapacity,
  HarmonyParseError,
  HarmonyStateError,
  HarmonyStreamParser,
  type HarmonyStreamParserOptions,
  HarmonyStreamPool,
  type Implementation,
  NAME_NOT_INTERNED,
  RECORD_FIELDS,
} from 'harmony-stream'

import { StreamDecoder, singleRange, streamRanges } from '../helpers/compact-decoder.mjs'
import { harmony, IMPLEMENTATIONS, nativeTest, SPECIAL } from '../helpers/harmony.mjs'

const RUNS = Number(process.env.PROPERTY_RUNS ?? 200)
const ALL_SPECIALS = [...Object.values(SPECIAL), 199998, 200018, 201088]
const HEADER_WORDS = harmony('assistant analysis final commentary to=functions.lookup json code user =')
const anyToken = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...ALL_SPECIALS) },
  { weight: 3, arbitrary: fc.constantFrom(...HEADER_WORDS) },
  { weight: 1, arbitrary: fc.constantFrom(31446, 244, 9552, 43120, 226) }, // pieces of multi-byte characters
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 201_088 }) },
)
const streamCase = fc.record({
  tokens: fc.array(anyToken, { maxLength: 120 }),
  cuts: fc.array(fc.nat(), { maxLength: 12 }),
  options: fc.record({
    role: fc.constantFrom('assistant' as const, null),
    strict: fc.boolean(),
    maxHeaderTokens: fc.integer({ min: 1, max: 40 }),
  }),
})

function cut(tokens: number[], at: number[]): number[][] {
  const points = [...new Set(at.map((a) => a % (tokens.length + 1)))].sort((a, b) => a - b)
  const chunks: number[][] = []
  let from = 0
  for (const p of [...points, tokens.length]) {
    chunks.push(tokens.slice(from, p))
    from = p
  }
  return chunks
}

type Entry = unknown

/** The same driver in terms of positions: returns, for a strict error at `tokenOffset`, where to resume. */
function resumeAfter(tokenOffset: number, streamStart: number): number {
  return tokenOffset + 1 - streamStart
}

interface Driven {
  chunks: number[][]
  options: HarmonyStreamParserOptions
}

/**
 * The pool's log per stream: the streams' chunks are served in random interleaving, several streams per
 * step; after a strict error, the rest of that stream's chunk is served again in a later step.
 */
function poolLogs(cases: Driven[], implementation: Implementation, order: number[], raw?: unknown[]): Entry[][] {
  const pool = new HarmonyStreamPool({ implementation })
  const ids = cases.map((c) => pool.open(c.options))
  const decoders = cases.map(() => new StreamDecoder())
  const logs: Entry[][] = cases.map(() => [])
  const pending = cases.map((c) => c.chunks.map((chunk) => chunk.slice()))
  const position = cases.map(() => 0) // tokens consumed per stream
  let turn = 0
  while (pending.some((p) => p.length > 0)) {
    // Each step serves a random non-empty subset of the streams with work left.
    const ready = pending.map((p, i) => (p.length > 0 ? i : -1)).filter((i) => i >= 0)
    const chosen = ready.filter((_, k) => (order[turn++ % Math.max(order.length, 1)] ?? 1) % 2 === 1 || k === 0)
    const batches = chosen.map((i) => pending[i].shift()!)
    const tokens = Uint32Array.from(batches.flat())
    const offsets = Uint32Array.from([0, ...batches.map((_, k) => batches.slice(0, k + 1).reduce((n, b) => n + b.length, 0))])
    const out = new Uint32Array(compactCapacity(tokens.length, chosen.length))
    const text = pool.step(Uint32Array.from(chosen.map((i) => ids[i])), offsets, tokens, out)
    raw?.push(text, Array.from(out.subarray(0, 8 + 4 * out[0])))
    for (const [k, result] of streamRanges(out).entries()) {
      const i = chosen[k]
      const id = ids[i]
      if (result.id !== id) throw new Error(`STREAM record ${k} names stream ${result.id}, not ${id}`)
      const batch = decoders[i].decode(
        text,
        out,
        result.from,
        result.to,
        (n) => pool.nameOf(n),
        () => pool.takeHeaders(id),
      )
      if (result.diagnostics > 0) batch.diagnostics = pool.takeDiagnostics(id)
      if (result.status === COMPACT_STATUS_PARSE_ERROR) {
        const error = pool.takeError(id) as HarmonyParseError
        const { code, message, tokenOffset, header } = error
        logs[i].push({ error: { code, message, tokenOffset, header }, partial: batch })
        const used = resumeAfter(tokenOffset, position[i])
        const rest = batches[k].slice(used)
        position[i] += used
        if (rest.length > 0) pending[i].unshift(rest)
      } else {
        position[i] += batches[k].length
        logs[i].push(batch)
      }
    }
  }
  const out = new Uint32Array(compactCapacity(0, cases.length))
  const text = pool.finish(Uint32Array.from(ids), out)
  raw?.push(text, Array.from(out.subarray(0, 8 + 4 * out[0])))
  for (const [k, result] of streamRanges(out).entries()) {
    const batch = decoders[k].decode(
      text,
      out,
      result.from,
      result.to,
      (n) => pool.nameOf(n),
      () => [],
    )
    if (result.diagnostics > 0) batch.diagnostics = pool.takeDiagnostics(ids[k])
    if (result.status !== COMPACT_STATUS_OK) logs[k].push({ status: result.status })
    logs[k].push(batch, decoders[k].messages)
  }
  if (pool.size !== cases.length) throw new Error('finished streams stay until the next call')
  pool.open()
  if (pool.size !== 1) throw new Error('the next call closes finished streams')
  return logs
}

/** The object API's log, re-pushing after strict errors exactly as `poolLogs` does. */
function parserLogs(cases: Driven[], implementation: Implementation): Entry[][] {
  return cases.map(({ chunks, options }) => {
    const parser = new HarmonyStreamParser({ ...options, implementation })
    const log: Entry[] = []
    let position = 0
    const pending = chunks.map((c) => c.slice())
    while (pending.length > 0) {
      const chunk = pending.shift()!
      try {
        log.push(parser.push(chunk))
        position += chunk.length
      } catch (error) {
        if (!(error instanceof HarmonyParseError)) throw error
        const { code, message, tokenOffset, header, partial } = error
        log.push({ error: { code, message, tokenOffset, header }, partial })
        const used = resumeAfter(tokenOffset, position)
        position += used
        if (used < chunk.length) pending.unshift(chunk.slice(used))
      }
    }
    let last: Entry
    try {
      last = parser.finish()
    } catch (error) {
      if (!(error instanceof HarmonyParseError)) throw error
      // The pool reports a finish error as the stream's status, with the records before it.
      log.push({ status: COMPACT_STATUS_PARSE_ERROR })
      last = error.partial
    }
    log.push(last, parser.messages)
    return log
  })
}

/** pushCompact's log for one stream, decoded. */
function compactLog({ chunks, options }: Driven, implementation: Implementation): Entry[] {
  const parser = new HarmonyStreamParser({ ...options, implementation })
  const decoder = new StreamDecoder()
  const log: Entry[] = []
  let position = 0
  const pending = chunks.map((c) => c.slice())
  const read = (text: string, out: Uint32Array) => {
    const batch = decoder.decode(
      text,
      out,
      ...singleRange(out),
      (n) => parser.nameOf(n),
      () => parser.takeHeaders(),
    )
    if (out[COMPACT_DIAGNOSTICS] > 0) batch.diagnostics = parser.takeDiagnostics()
    return batch
  }
  while (pending.length > 0) {
    const chunk = pending.shift()!
    const out = new Uint32Array(compactCapacity(chunk.length))
    const text = parser.pushCompact(chunk, out)
    const batch = read(text, out)
    if (out[COMPACT_STATUS] === COMPACT_STATUS_PARSE_ERROR) {
      const { code, message, tokenOffset, header } = parser.takeError()!
      log.push({ error: { code, message, tokenOffset, header }, partial: batch })
      const used = resumeAfter(tokenOffset, position)
      position += used
      if (used < chunk.length) pending.unshift(chunk.slice(used))
    } else {
      log.push(batch)
      position += chunk.length
    }
  }
  const out = new Uint32Array(compactCapacity(0))
  const text = parser.finishCompact(out)
  if (out[COMPACT_STATUS] === COMPACT_STATUS_PARSE_ERROR) log.push({ status: COMPACT_STATUS_PARSE_ERROR })
  log.push(read(text, out))
  log.push(decoder.messages)
  return log
}

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: the pool gives each stream what HarmonyStreamParser gives, at random interleavings`, (t) => {
    fc.assert(
      fc.property(fc.array(streamCase, { minLength: 1, maxLength: 5 }), fc.array(fc.nat(), { maxLength: 30 }), (streams, order) => {
        const cases = streams.map((s) => ({ chunks: cut(s.tokens, s.cuts), options: s.options }))
        t.deepEqual(poolLogs(cases, implementation, order), parserLogs(cases, implementation))
      }),
      { numRuns: RUNS },
    )
  })

  test(`${implementation}: pushCompact gives what push gives`, (t) => {
    fc.assert(
      fc.property(streamCase, (s) => {
        const driven = { chunks: cut(s.tokens, s.cuts), options: s.options }
        t.deepEqual(compactLog(driven, implementation), parserLogs([driven], implementation)[0])
      }),
      { numRuns: RUNS },
    )
  })
}

nativeTest(test)('native and js pools write identical compact output', (t) => {
  fc.assert(
    fc.property(fc.array(streamCase, { minLength: 1, maxLength: 5 }), fc.array(fc.nat(), { maxLength: 30 }), (streams, order) => {
      const cases = streams.map((s) => ({ chunks: cut(s.tokens, s.cuts), options: s.options }))
      const native: unknown[] = []
      const js: unknown[] = []
      poolLogs(cases, 'native', order, native)
      poolLogs(cases, 'js', order, js)
      t.deepEqual(native, js)
    }),
    { numRuns: RUNS },
  )
})

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: pool arguments are checked before anything is consumed`, (t) => {
    const pool = new HarmonyStreamPool({ implementation })
    const a = pool.open()
    const b = pool.open({ strict: true })
    const tokens = Uint32Array.from(harmony('<|channel|>final<|message|>hi'))
    const out = new Uint32Array(compactCapacity(tokens.length, 2))
    const streams = Uint32Array.of(a, b)
    const offsets = Uint32Array.of(0, 2, tokens.length)
    t.throws(() => pool.step(Uint32Array.of(a, 12345), offsets, tokens, out), {
      instanceOf: RangeError,
      message: /stream id 12345 at index 1 is not open/,
    })
    t.throws(() => pool.step(streams, Uint32Array.of(0, 3, 2), tokens, out), { instanceOf: RangeError, message: /offsets/ })
    t.throws(() => pool.step(streams, Uint32Array.of(0, 2), tokens, out), { instanceOf: RangeError, message: /offsets/ })
    t.throws(() => pool.step(streams, Uint32Array.of(0, 2, tokens.length + 1), tokens, new Uint32Array(200)), {
      instanceOf: RangeError,
      message: /offsets/,
    })
    t.throws(() => pool.step(streams, offsets, Uint32Array.of(...tokens.subarray(0, 3), 300_000), out), {
      instanceOf: RangeError,
      message: /token id 300000 at index 3/,
    })
    t.throws(() => pool.step(streams, offsets, [1, 2] as unknown as Uint32Array, out), { instanceOf: TypeError })
    t.throws(() => pool.step(streams, offsets, tokens, new Uint32Array(8)), { instanceOf: RangeError, message: /compactCapacity/ })
    // Nothing was consumed: both streams still parse the whole batch as if it were the first.
    const text = pool.step(
      streams,
      Uint32Array.of(0, tokens.length, 2 * tokens.length),
      Uint32Array.from([...tokens, ...tokens]),
      new Uint32Array(compactCapacity(2 * tokens.length, 2)),
    )
    t.is(text, 'hihi')
    t.throws(() => pool.finish(Uint32Array.of(a, a), out), { instanceOf: RangeError, message: /repeated/ })
    t.is(pool.size, 2)
    pool.finish(Uint32Array.of(a), out)
    t.is(pool.size, 2, 'a finished stream stays until the next call')
    t.throws(() => pool.step(Uint32Array.of(a), Uint32Array.of(0, 0), tokens, out), { instanceOf: RangeError, message: /not open/ })
    t.is(pool.size, 1)
    t.false(pool.close(a))
    t.true(pool.close(b))
    t.is(pool.size, 0)
    const shared = new Uint32Array(compactCapacity(tokens.length, 1) + tokens.length)
    shared.set(tokens, shared.length - tokens.length)
    const aliased = () =>
      pool.step(Uint32Array.of(b), Uint32Array.of(0, tokens.length), shared.subarray(shared.length - tokens.length), shared)
    t.throws(aliased, { instanceOf: TypeError, message: /share memory/ })
    t.throws(() => pool.takeDiagnostics('x' as never), { instanceOf: TypeError })
    t.throws(() => pool.open({ implementation } as never), { instanceOf: TypeError })
    t.throws(() => pool.open({ role: 'robot' } as never), { instanceOf: TypeError })
  })

  test(`${implementation}: the compact path refuses misuse with typed errors`, (t) => {
    const tokens = harmony('<|channel|>final<|message|>hi')
    // Rejected arguments leave the parser untouched, even which API it is fed through.
    const untouched = new HarmonyStreamParser({ implementation })
    t.throws(() => untouched.pushCompact(tokens, new Uint32Array(4)), { instanceOf: RangeError })
    t.is(untouched.push(tokens).segments[0]?.text, 'hi')
    const parser = new HarmonyStreamParser({ implementation })
    t.throws(() => parser.pushCompact(tokens, new Uint32Array(4)), { instanceOf: RangeError, message: /compactCapacity/ })
    t.throws(() => parser.pushCompact(tokens, [] as unknown as Uint32Array), { instanceOf: TypeError })
    const out = new Uint32Array(compactCapacity(tokens.length))
    t.is(parser.pushCompact(tokens, out), 'hi')
    t.throws(() => parser.push(tokens), { instanceOf: HarmonyStateError, message: /not both/ })
    parser.finishCompact(out)
    t.is(parser.finishCompact(out), '', 'finishCompact again does nothing')
    t.throws(() => parser.pushCompact(tokens, out), { instanceOf: HarmonyStateError })
    // Strict errors are data on the fast path.
    const strict = new HarmonyStreamParser({ implementation, strict: true })
    const bad = harmony('<|channel|>final<|message|>ok<|end|>oops')
    const strictOut = new Uint32Array(compactCapacity(bad.length))
    t.is(strict.pushCompact(bad, strictOut), 'ok')
    t.is(strictOut[COMPACT_STATUS], COMPACT_STATUS_PARSE_ERROR)
    t.is(strict.takeError()?.code, 'unexpected-token')
    t.is(strict.takeError(), null)
  })

  test(`${implementation}: a header field too long to intern comes from takeHeaders`, (t) => {
    const recipient = `functions.${'x'.repeat(300)}`
    const tokens = harmony(`<|channel|>commentary to=${recipient}<|constrain|>json<|message|>{}<|call|>`)
    const parser = new HarmonyStreamParser({ implementation, maxHeaderTokens: 4096 })
    const out = new Uint32Array(compactCapacity(tokens.length))
    const text = parser.pushCompact(tokens, out)
    t.is(out[8 + 4], RECORD_FIELDS)
    t.is(out[8 + 4 + 2], NAME_NOT_INTERNED)
    t.is(parser.nameOf(out[8 + 4 + 1]), 'commentary')
    t.deepEqual(parser.takeHeaders(), [{ role: 'assistant', channel: 'commentary', recipient, contentType: 'json' }])
    t.is(text, '{}')
    // The object API reads it the same way.
    t.is(new HarmonyStreamParser({ implementation, maxHeaderTokens: 4096 }).push(tokens).completed[0]?.recipient, recipient)
  })
}

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: close() releases a parser early; finish() does it already`, (t) => {
    const tokens = harmony('<|channel|>final<|message|>hi')
    const parser = new HarmonyStreamParser({ implementation })
    const out = new Uint32Array(compactCapacity(tokens.length))
    parser.pushCompact(tokens, out)
    parser.close()
    t.is(parser.state, 'content', 'the state at close is kept')
    t.true(parser.finished)
    t.throws(() => parser.takeDiagnostics(), { instanceOf: HarmonyStateError, message: /closed/ })
    t.throws(() => parser.pushCompact(tokens, out), { instanceOf: HarmonyStateError })
    parser.close()
    const finished = new HarmonyStreamParser({ implementation })
    finished.push(tokens)
    finished.finish()
    t.is(finished.state, 'expect-start')
    t.deepEqual(
      finished.messages.map((m) => m.content),
      ['hi'],
    )
    if (implementation === 'native') {
      // The Rust stream is gone: its id no longer answers.
      const backend = (finished as unknown as { backend: { channel: { binding: { parserState(id: number): number } }; id: number } })
        .backend
      t.is(backend.channel.binding.parserState(backend.id), 0xffff_ffff)
    }
  })
}

test('the TypeScript name table is bounded like the Rust one', async (t) => {
  const { NameTable } = (await import('../../src/backend/compact.ts')) as {
    NameTable: new () => { intern(name: string | null): number; nameOf(id: number): string | null }
  }
  const names = new NameTable()
  t.is(names.intern(null), 0)
  t.is(names.intern('analysis'), 1)
  t.is(names.intern('analysis'), 1)
  t.is(names.intern('x'.repeat(257)), NAME_NOT_INTERNED)
  t.is(names.intern('é'.repeat(129)), NAME_NOT_INTERNED, 'the limit counts UTF-8 bytes, as in Rust')
  for (let i = 0; names.intern(`to=${i}`) !== NAME_NOT_INTERNED; i++);
  t.is(names.intern('analysis'), 1, 'known names keep their ids when the table is full')
  t.is(names.nameOf(65_536)?.startsWith('to='), true)
})
