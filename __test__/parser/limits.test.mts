/**
 * Bad input and limits: a panic in native code, a 10^6-token message, headers that never end, and memory
 * over 10^5 parsers. Nothing here is timed: a quadratic rescan would show as a timeout, not a failed ratio.
 */
import { createRequire } from 'node:module'
import { join } from 'node:path'

import test from 'ava'

import {
  COMPACT_FIRST_RECORD,
  COMPACT_STATUS_INTERNAL_ERROR,
  compactCapacity,
  HarmonyError,
  HarmonyParseError,
  HarmonyStreamParser,
  HarmonyStreamPool,
  RECORD_STREAM,
} from 'harmony-stream'

import { harmony, IMPLEMENTATIONS, nativeTest, SPECIAL } from '../helpers/harmony.mjs'
import { describeGrowth, growthWindows } from '../helpers/memory-growth.mjs'

const root = join(import.meta.dirname, '..', '..')

interface DebugBinding {
  parserDebugPanic(id: number): number
  parserTakeError(id: number): { message: string } | null
}

const streamId = (parser: HarmonyStreamParser) => (parser as unknown as { backend: { id: number } }).backend.id

nativeTest(test)('a Rust panic reaches JavaScript as an error, only its parser is broken, and the process lives on', (t) => {
  const require = createRequire(import.meta.url)
  // The same module instance the package loaded (same file), so the same pool of parsers.
  const native = require(join(root, 'native.cjs')) as DebugBinding
  const broken = new HarmonyStreamParser({ implementation: 'native' })
  const healthy = new HarmonyStreamParser({ implementation: 'native' })
  // Through the wrapper, as a panic inside one of its calls would be: the wrapper then stops answering for the
  // stream itself (a panic happens only inside a call the wrapper makes, whose reply says so).
  t.is((broken as unknown as { backend: { debugPanic(): number } }).backend.debugPanic(), COMPACT_STATUS_INTERNAL_ERROR)
  t.regex(native.parserTakeError(streamId(broken))?.message ?? '', /internal error in the native parser \(a Rust panic: deliberate panic/)
  const error = t.throws(() => broken.push(harmony('<|channel|>final')), { instanceOf: HarmonyError })
  t.is(error?.code, 'internal-error')
  t.regex(error?.message ?? '', /failed earlier with an internal error/, 'a parser that panicked is not used again')
  t.is(healthy.push(harmony('<|channel|>final<|message|>ok')).segments[0]?.text, 'ok', 'other parsers are unaffected')
})

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: a failing pool stream reports internal-error and the step goes on for the others`, (t) => {
    const pool = new HarmonyStreamPool({ implementation })
    const [a, b] = [pool.open(), pool.open()]
    const backend = (pool as unknown as { backend: { debugPanic(id: number): number } }).backend
    t.is(backend.debugPanic(a), COMPACT_STATUS_INTERNAL_ERROR)
    t.is(pool.takeError(a)?.code, 'internal-error')
    const tokens = Uint32Array.from([...harmony('<|channel|>final<|message|>x'), ...harmony('<|channel|>final<|message|>y')])
    const half = tokens.length / 2
    const out = new Uint32Array(compactCapacity(tokens.length, 2))
    const text = pool.step(Uint32Array.of(a, b), Uint32Array.of(0, half, tokens.length), tokens, out)
    t.is(text, 'y')
    t.deepEqual(
      [out[COMPACT_FIRST_RECORD], out[COMPACT_FIRST_RECORD + 1], out[COMPACT_FIRST_RECORD + 2]],
      [RECORD_STREAM, a, COMPACT_STATUS_INTERNAL_ERROR],
    )
    t.is(pool.takeError(a)?.code, 'internal-error')
  })
}

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: a 10^6-token message is parsed in linear time and memory`, (t) => {
    const parser = new HarmonyStreamParser({ implementation })
    parser.push(harmony('<|channel|>final<|message|>'))
    const word = harmony(' word')
    t.is(word.length, 1)
    const chunk = new Uint32Array(1000).fill(word[0])
    let text = 0
    for (let i = 0; i < 1000; i++) text += parser.push(chunk).segments.reduce((n, s) => n + s.text.length, 0)
    const [message] = parser.finish().completed
    t.is(text, 5_000_000)
    t.is(message.content.length, 5_000_000)
    t.true(message.content.startsWith(' word word'))
  })

  test(`${implementation}: a header that never ends stays bounded`, (t) => {
    const token = harmony(' blah')[0]
    const chunk = new Uint32Array(10_000).fill(token)
    const lenient = new HarmonyStreamParser({ implementation })
    const first = lenient.push(chunk)
    t.deepEqual(
      first.diagnostics.map((d) => [d.code, d.tokenOffset]),
      [['header-too-long', 256]],
    )
    t.is(lenient.state, 'content', 'the header became content')
    for (let i = 0; i < 99; i++) lenient.push(chunk)
    t.is(lenient.finish().completed[0].content.length, 5 * 1_000_000 - 1, 'all of it kept as content, trimmed once')
    const strict = new HarmonyStreamParser({ implementation, strict: true })
    const error = t.throws(() => strict.push(chunk), { instanceOf: HarmonyParseError })
    t.is(error?.code, 'header-too-long')
    t.is(error?.tokenOffset, 256)
  })

  test(`${implementation}: 10^5 parsers created and finished leave no growth (--expose-gc)`, (t) => {
    const windows = growthWindows(`
      const { HarmonyStreamParser } = require('harmony-stream')
      const tokens = Uint32Array.from(${JSON.stringify(harmony('<|channel|>final<|message|>Hello there, friend.<|return|>'))})
      const round = (n) => { for (let i = 0; i < n; i++) { const p = new HarmonyStreamParser({ implementation: '${implementation}' }); p.push(tokens); p.finish() } }`)
    t.log(describeGrowth(windows))
    // A leaked stream (a Rust StreamParser with its buffers is over 400 bytes) would be 20 MB in each window,
    // and a leaked JS parser object over 2 MB of heap.
    t.true(Math.min(...windows.map((w) => w.heap)) < 2e6, `heap grew ${windows.map((w) => w.heap)} bytes`)
    t.true(Math.min(...windows.map((w) => w.rss)) < 10e6, `rss grew ${windows.map((w) => w.rss)} bytes`)
  })
}

test('backend failures surface as HarmonyError internal-error, never as a crash', (t) => {
  // Only a bug can make a backend call fail; simulate one through the public class by breaking its backend stream.
  const parser = new HarmonyStreamParser({ implementation: 'js' })
  const boom = () => {
    throw new Error('boom')
  }
  // `read` is the object API's backend call, `push` the fast path's; `takeText` and `takeSilently` the
  // streaming hot paths' (a header token is offered to takeSilently first, then read).
  const passes = { takeText: () => null, takeSilently: () => false }
  Object.defineProperty(parser, 'backend', { value: { ...passes, push: boom, read: boom, finish: () => '' } })
  const error = t.throws(() => parser.push([SPECIAL['<|start|>']]), { instanceOf: HarmonyError })
  t.is(error?.code, 'internal-error')
  t.true(error?.message.includes('boom'))
  const sounding = new HarmonyStreamParser({ implementation: 'js' })
  Object.defineProperty(sounding, 'backend', { value: { takeText: boom, takeSilently: boom, read: boom } })
  const silent = t.throws(() => sounding.push([SPECIAL['<|start|>']]), { instanceOf: HarmonyError })
  t.is(silent?.code, 'internal-error')
})
