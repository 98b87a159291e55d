/**
 * SsePool: many adapters stepped in one call per engine step write, per stream and per step, exactly the
 * bytes each adapter's own `pushSse` writes for the same tokens (and `finish`, its `finishSse`), on
 * generated completions interleaved at random batchings, every option that changes the wire, both
 * implementations; the two implementations agree; bad arguments are refused before anything is consumed.
 */
import { spawnSync } from 'node:child_process'

import test from 'ava'

import {
  AnthropicMessagesStream,
  ChatCompletionsStream,
  HarmonyParseError,
  type Implementation,
  ResponsesStream,
  SsePool,
} from 'harmony-stream'

import { generator } from '../helpers/generator.mjs'
import { harmony, IMPLEMENTATIONS, NATIVE, nativeTest, random } from '../helpers/harmony.mjs'
import { messagesVariant, responsesVariant, WIRE_VARIANTS } from '../helpers/wire-variants.mjs'

const STREAMS = Array.from({ length: 160 }, generator(47)).filter((s) => s.role === 'assistant')
const CHAT_VARIANTS = WIRE_VARIANTS
const RESPONSES_VARIANTS = WIRE_VARIANTS.map(responsesVariant)

type Adapter = ChatCompletionsStream | ResponsesStream | AnthropicMessagesStream

/** Stream n's adapter: Chat, Responses or Messages by n, with a variant of the options. */
function adapterFor(n: number, implementation: Implementation): Adapter {
  const parser = { implementation }
  if (n % 6 === 1)
    return new AnthropicMessagesStream({
      model: 'gpt-oss',
      id: `msg_${n}`,
      inputTokens: 7,
      parser,
      ...messagesVariant(CHAT_VARIANTS[n % CHAT_VARIANTS.length]!),
    })
  if (n % 3 === 2)
    return new ResponsesStream({
      model: 'gpt-oss',
      id: `resp_${n}`,
      createdAt: 1_700_000_000,
      // Not the seconds the run took: on a loaded machine the two adapters of a stream can end a second apart.
      completedAt: 1_700_000_001,
      parser,
      ...RESPONSES_VARIANTS[n % RESPONSES_VARIANTS.length],
    })
  return new ChatCompletionsStream({
    model: 'gpt-oss',
    id: `chatcmpl-${n}`,
    created: 1_700_000_000 + n,
    promptTokens: 7,
    parser,
    ...CHAT_VARIANTS[n % CHAT_VARIANTS.length],
  })
}

/** A schedule of engine steps: which streams take part and how many tokens each gets (mostly one). */
function schedule(seed: number, streams: number[][], concurrent: number): { id: number; count: number }[][] {
  const next = random(seed)
  const position = streams.map(() => 0)
  const steps: { id: number; count: number }[][] = []
  let live = Array.from({ length: Math.min(concurrent, streams.length) }, (_, i) => i)
  let waiting = live.length
  while (live.length > 0) {
    const step: { id: number; count: number }[] = []
    for (const n of live) {
      const roll = next()
      if (roll < 0.1) continue // this stream is not in this step
      const count = roll < 0.8 ? 1 : roll < 0.9 ? 0 : 2 + Math.floor(next() * 6)
      const take = Math.min(count, streams[n].length - position[n])
      step.push({ id: n, count: take })
      position[n] += take
    }
    steps.push(step.sort(() => next() - 0.5))
    const done = live.filter((n) => position[n] >= streams[n].length)
    live = live.filter((n) => position[n] < streams[n].length)
    for (const _ of done) if (waiting < streams.length) live.push(waiting++)
  }
  return steps
}

/** Frames the native lane wrote (bytes) and frames an adapter wrote (strings), over the last `runPool`. */
const served = { lane: 0, adapter: 0 }

/** Runs a schedule through one pool; returns each stream's bytes per step (and its finish) as strings. */
function runPool(implementation: Implementation, streams: number[][], steps: { id: number; count: number }[][]): string[][] {
  served.lane = served.adapter = 0
  const pool = new SsePool({ implementation })
  const ids = new Map<number, number>()
  const position = streams.map(() => 0)
  const written: string[][] = streams.map(() => [])
  for (const step of steps) {
    for (const { id: n } of step) if (!ids.has(n)) ids.set(n, pool.add(adapterFor(n, implementation)))
    const tokens: number[] = []
    const offsets = [0]
    for (const { id: n, count } of step) {
      tokens.push(...streams[n].slice(position[n], position[n] + count))
      position[n] += count
      offsets.push(tokens.length)
    }
    const frames = pool.step(Uint32Array.from(step.map(({ id: n }) => ids.get(n)!)), Uint32Array.from(offsets), Uint32Array.from(tokens))
    if (frames.errors.length > 0) throw frames.errors[0].error
    step.forEach(({ id: n }, i) => {
      const frame = frames.frame(i)
      if (frame.length > 0) served[typeof frame === 'string' ? 'adapter' : 'lane']++
      written[n].push(Buffer.from(frame).toString())
    })
    for (const { id: n } of step) {
      if (position[n] === streams[n].length) written[n].push(pool.finish(ids.get(n)!, { truncated: n % 5 === 0 }))
    }
  }
  if (pool.size !== 0) throw new Error(`${pool.size} streams left in the pool`)
  return written
}

/** The same schedule, each stream through its own adapter's pushSse/finishSse. */
function runAlone(implementation: Implementation, streams: number[][], steps: { id: number; count: number }[][]): string[][] {
  const adapters = streams.map((_, n) => adapterFor(n, implementation))
  const position = streams.map(() => 0)
  const written: string[][] = streams.map(() => [])
  for (const step of steps) {
    for (const { id: n, count } of step) {
      written[n].push(adapters[n].pushSse(streams[n].slice(position[n], position[n] + count)))
      position[n] += count
      if (position[n] === streams[n].length) written[n].push(adapters[n].finishSse({ truncated: n % 5 === 0 }))
    }
  }
  return written
}

const TOKENS = STREAMS.map((s) => s.tokens)

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: every stream's bytes in every step equal its adapter's own pushSse/finishSse`, (t) => {
    for (const [seed, concurrent] of [
      [1, 64],
      [2, 7],
      [3, 1],
    ]) {
      const steps = schedule(seed, TOKENS, concurrent)
      const pooled = runPool(implementation, TOKENS, steps)
      const alone = runAlone(implementation, TOKENS, steps)
      for (let n = 0; n < TOKENS.length; n++) {
        const at = pooled[n].findIndex((bytes, i) => bytes !== alone[n][i])
        if (at >= 0 || pooled[n].length !== alone[n].length) {
          return t.fail(
            `seed ${seed}, stream ${n}, step ${at} of ${pooled[n].length}/${alone[n].length}: ${JSON.stringify(pooled[n][at])}\nvs ${JSON.stringify(alone[n][at])}`,
          )
        }
      }
      // The native lane answers in bytes: most text frames must have come from it, or this compared little.
      if (implementation === 'native') t.true(served.lane > 3 * served.adapter, `lane ${served.lane}, adapters ${served.adapter}`)
    }
    t.pass()
  })
}

nativeTest(test)('native and js pools write the same bytes', (t) => {
  const steps = schedule(9, TOKENS, 32)
  t.deepEqual(runPool('native', TOKENS, steps), runPool('js', TOKENS, steps))
})

/**
 * Token soup: markers, stop tokens, header words and text in random order, strict and lenient, batches of 0
 * to 3 tokens. Whatever the lane takes without the adapter must be what the adapter would have taken
 * silently: the same bytes, the same errors, and in the end the same diagnostics.
 */
const SOUP = [
  ...harmony('<|start|><|channel|><|message|><|constrain|><|end|><|return|><|call|>'),
  ...harmony('assistant analysis final to=functions.get json Hello 東京'),
]

function soup(implementation: Implementation, pooled: boolean, seed: number): { bytes: string[]; diagnostics: string } {
  const next = random(seed)
  const parser = { implementation, strict: seed % 3 === 0, maxHeaderTokens: 2 + (seed % 4) }
  const adapter =
    seed % 2 === 0
      ? new ChatCompletionsStream({ model: 'm', id: 'chatcmpl-soup', created: 1, parser })
      : new ResponsesStream({ model: 'm', id: 'resp_soup', createdAt: 1, parser })
  const pool = new SsePool({ implementation })
  const id = pooled ? pool.add(adapter) : -1
  const bytes: string[] = []
  for (let step = 0; step < 30; step++) {
    const batch = Array.from({ length: Math.floor(next() * 4) }, () => SOUP[Math.floor(next() * SOUP.length)])
    if (!pooled) {
      try {
        bytes.push(adapter.pushSse(batch))
      } catch (error) {
        bytes.push(`error: ${(error as Error).message}`)
      }
      continue
    }
    const frames = pool.step(Uint32Array.of(id), Uint32Array.of(0, batch.length), Uint32Array.from(batch))
    bytes.push(frames.errors.length > 0 ? `error: ${frames.errors[0].error.message}` : Buffer.from(frames.frame(0)).toString())
  }
  try {
    bytes.push(pooled ? pool.finish(id) : adapter.finishSse())
  } catch (error) {
    bytes.push(`error: ${(error as Error).message}`)
  }
  return { bytes, diagnostics: JSON.stringify(adapter.diagnostics) }
}

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: on token soup the pool writes, fails and diagnoses as the adapter alone`, (t) => {
    for (let seed = 1; seed <= 300; seed++) {
      const pooled = soup(implementation, true, seed)
      const alone = soup(implementation, false, seed)
      if (JSON.stringify(pooled) !== JSON.stringify(alone)) return t.deepEqual(pooled, alone, `seed ${seed}`)
    }
    t.pass()
  })
}

/** A completion with reasoning and final text, in tokens. */
const COMPLETION = harmony(
  '<|channel|>analysis<|message|>Think about it first.<|end|><|start|>assistant<|channel|>final<|message|>The answer is 42, of course.<|return|>',
)

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: bad steps throw before anything is consumed`, (t) => {
    const pool = new SsePool({ implementation })
    const chat = () => new ChatCompletionsStream({ model: 'm', id: 'chatcmpl-x', created: 1, parser: { implementation } })
    const a = pool.add(chat())
    const b = pool.add(chat())
    const other = new SsePool({ implementation }).add(chat())
    // Into the final message, so that both streams are on their lanes.
    const head = COMPLETION.length - 8
    const tokens = Uint32Array.from([...COMPLETION.slice(0, head), ...COMPLETION.slice(0, head)])
    pool.step(Uint32Array.of(a, b), Uint32Array.of(0, head, 2 * head), tokens)
    const one = (id: number, token: number) =>
      pool.step(Uint32Array.of(a, id), Uint32Array.of(0, 1, 2), Uint32Array.of(COMPLETION[head], token))
    t.throws(() => one(other, COMPLETION[head]), { instanceOf: RangeError, message: /is not open in this pool/ })
    t.throws(() => one(a, COMPLETION[head]), { instanceOf: RangeError, message: /named twice in one step/ })
    t.throws(() => one(b, 300_000), { instanceOf: RangeError, message: /token id 300000 at index 1 is outside the vocabulary/ })
    t.throws(() => pool.step(Uint32Array.of(a, b), Uint32Array.of(0, 1), Uint32Array.of(1)), { instanceOf: RangeError, message: /offsets/ })
    t.throws(() => pool.step([a] as never, Uint32Array.of(0, 0), Uint32Array.of()), { instanceOf: TypeError })
    // Nothing was consumed: the rest gives both streams the same bytes as one adapter fed the whole completion.
    const rest = COMPLETION.slice(head)
    const last = pool.step(Uint32Array.of(a, b), Uint32Array.of(0, rest.length, 2 * rest.length), Uint32Array.from([...rest, ...rest]))
    const alone = chat()
    const expected = alone.pushSse(COMPLETION.slice(0, head)) + alone.pushSse(rest) + alone.finishSse()
    const first = chat()
    const before = first.pushSse(COMPLETION.slice(0, head))
    for (const [i, id] of [a, b].entries()) t.is(before + Buffer.from(last.frame(i)).toString() + pool.finish(id), expected)
    t.throws(() => last.frame(2), { instanceOf: RangeError })
    t.throws(() => pool.finish(a), { instanceOf: RangeError, message: /not in this pool/ })
    t.is(pool.size, 0)
  })

  test(`${implementation}: adapters the pool cannot serve are refused`, (t) => {
    const pool = new SsePool({ implementation })
    const chat = new ChatCompletionsStream({ model: 'm', parser: { implementation } })
    pool.add(chat)
    t.throws(() => pool.add(chat), { instanceOf: TypeError, message: /already in a pool/ })
    t.throws(() => new SsePool({ implementation }).add(chat), { instanceOf: TypeError, message: /already in a pool/ })
    t.throws(() => pool.add(new ChatCompletionsStream({ model: 'm', input: 'text', parser: { implementation } })), {
      instanceOf: TypeError,
      message: /reads text/,
    })
    const finished = new ResponsesStream({ model: 'm', parser: { implementation } })
    finished.finishSse()
    t.throws(() => pool.add(finished), { instanceOf: TypeError, message: /finished or closed/ })
    t.throws(() => pool.add({} as never), { instanceOf: TypeError })
    t.throws(() => new SsePool({ implementation: 'wasm' as never }), { instanceOf: TypeError })
    if (NATIVE) {
      const otherImplementation = implementation === 'js' ? 'native' : 'js'
      t.throws(() => pool.add(new ChatCompletionsStream({ model: 'm', parser: { implementation: otherImplementation } })), {
        instanceOf: TypeError,
        message: /implementation/,
      })
    }
  })

  test(`${implementation}: one stream's strict-mode error is reported and the others go on`, (t) => {
    const pool = new SsePool({ implementation })
    const make = (strict: boolean) =>
      new ChatCompletionsStream({ model: 'm', id: 'chatcmpl-s', created: 1, parser: { implementation, strict } })
    const strict = pool.add(make(true))
    const lenient = pool.add(make(false))
    // A header the reference rejects (an unknown role), then text.
    const bad = harmony('<|channel|>final<|message|>ok<|end|><|start|>final<|message|>oops')
    const frames = pool.step(
      Uint32Array.of(strict, lenient),
      Uint32Array.of(0, bad.length, 2 * bad.length),
      Uint32Array.from([...bad, ...bad]),
    )
    t.is(frames.errors.length, 1)
    t.like(frames.errors[0], { index: 0, id: strict })
    t.true(frames.errors[0].error instanceof HarmonyParseError)
    t.is(frames.frame(0), '')
    const alone = make(false)
    t.is(Buffer.from(frames.frame(1)).toString(), alone.pushSse(bad))
    t.true(pool.remove(strict))
    t.false(pool.remove(strict))
    t.is(pool.finish(lenient), alone.finishSse())
  })

  test(`${implementation}: usage counts the tokens the lane served`, (t) => {
    const pool = new SsePool({ implementation })
    const options = { model: 'm', id: 'chatcmpl-u', created: 1, includeUsage: true, promptTokens: 3, parser: { implementation } }
    const id = pool.add(new ChatCompletionsStream(options))
    for (const token of COMPLETION) pool.step(Uint32Array.of(id), Uint32Array.of(0, 1), Uint32Array.of(token))
    const last = pool.finish(id)
    const usage = JSON.parse(last.trim().split('\n\n').at(-1)!.slice('data: '.length)).usage
    const alone = new ChatCompletionsStream(options)
    alone.pushSse(COMPLETION)
    t.deepEqual(usage, alone.usage())
    t.is(usage.completion_tokens, COMPLETION.length)
    t.true(usage.completion_tokens_details.reasoning_tokens > 0)
  })
}

/** The implementation an adapter's parser runs on (internal: adapters do not expose it). */
function parserImplementation(adapter: Adapter): Implementation {
  return (adapter as unknown as { stream: { parser: { implementation: Implementation } } }).stream.parser.implementation
}

/** What `new SsePool()` runs on in this process: js (docs/API.md "Implementation choice"), unless the environment forces one. */
const POOL_DEFAULT: Implementation = process.env.HARMONY_STREAM_IMPL === 'native' ? 'native' : 'js'

test('a pool made without an implementation runs on js, and adapters made without one, fed nothing yet, move onto it', (t) => {
  const pool = new SsePool()
  t.is(pool.implementation, POOL_DEFAULT)
  const chat = new ChatCompletionsStream({ model: 'm', id: 'chatcmpl-default', created: 1 })
  const responses = new ResponsesStream({ model: 'm', id: 'resp_default', createdAt: 1, completedAt: 2 })
  const ids = [pool.add(chat), pool.add(responses)]
  t.is(parserImplementation(chat), pool.implementation)
  t.is(parserImplementation(responses), pool.implementation)
  // They write what adapters made on that implementation write alone.
  const alone = [
    new ChatCompletionsStream({ model: 'm', id: 'chatcmpl-default', created: 1, parser: { implementation: POOL_DEFAULT } }),
    new ResponsesStream({ model: 'm', id: 'resp_default', createdAt: 1, completedAt: 2, parser: { implementation: POOL_DEFAULT } }),
  ]
  const tokens = TOKENS[0]
  for (const token of tokens) {
    const frames = pool.step(Uint32Array.from(ids), Uint32Array.of(0, 1, 2), Uint32Array.of(token, token))
    for (const [i, adapter] of alone.entries()) t.is(Buffer.from(frames.frame(i)).toString(), adapter.pushSse([token]))
  }
  t.is(pool.finish(ids[0]), alone[0].finishSse())
  t.is(pool.finish(ids[1]), alone[1].finishSse())
})

nativeTest(test)(
  'an adapter on the other implementation that cannot move is refused, naming the fix; a native pool takes native adapters',
  (t) => {
    const other: Implementation = POOL_DEFAULT === 'js' ? 'native' : 'js'
    const pool = new SsePool()
    // Made on the other implementation by name: the user chose it.
    const chosen = new ChatCompletionsStream({ model: 'm', parser: { implementation: other } })
    t.throws(() => pool.add(chosen), {
      instanceOf: TypeError,
      message: new RegExp(`runs on the ${POOL_DEFAULT} implementation.*parser: \\{ implementation`),
    })
    t.is(parserImplementation(chosen), other)
    // Made without one but already fed: its parser holds the stream so far.
    const running = new ChatCompletionsStream({ model: 'm' })
    running.pushSse(harmony('<|channel|>'))
    if (parserImplementation(running) !== POOL_DEFAULT) {
      t.throws(() => new SsePool().add(running), { instanceOf: TypeError, message: /before its first token/ })
    }
    // Named, the pool runs on native and takes the adapters made on it.
    const native = new SsePool({ implementation: 'native' })
    t.is(native.implementation, 'native')
    t.notThrows(() => native.add(new ChatCompletionsStream({ model: 'm', parser: { implementation: 'native' } })))
    t.notThrows(() => native.add(new ResponsesStream({ model: 'm' })))
  },
)

nativeTest(test)('HARMONY_STREAM_IMPL=native makes pools made without an implementation native', (t) => {
  const script =
    "const { SsePool, ChatCompletionsStream } = require('harmony-stream'); const pool = new SsePool(); pool.add(new ChatCompletionsStream({ model: 'm' })); console.log(pool.implementation)"
  for (const [forced, expected] of [
    ['native', 'native'],
    ['js', 'js'],
  ]) {
    const run = spawnSync(process.execPath, ['-e', script], { env: { ...process.env, HARMONY_STREAM_IMPL: forced }, encoding: 'utf8' })
    t.is(run.stdout.trim(), expected, run.stderr)
  }
})
