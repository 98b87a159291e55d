/**
 * `EngineGroup` (issue 31): several engine servers as one engine. Generations are balanced on the engines'
 * running generations, a continuation goes back to the engine that holds its prefix (cache affinity) unless
 * that engine is far busier, and an engine that fails before its first step is taken out for a cool-down (the
 * generation tried on the next one, the client none the wiser) and probed back after it. Failover mid-stream:
 * engine-failover.test.mts. In-process engines
 * show the choices; two vLLM stand-ins over HTTP show a client's abort reaching the engine that generates, and,
 * one of them killed, the failover through a gateway.
 */
import test from 'ava'
import { createEngine, type Engine, EngineError, EngineGroup, type EngineStep, type GenerateRequest } from 'harmony-stream/engines'

import { fakeVllm } from '../helpers/fake-engines.mjs'
import { startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { until } from '../helpers/until.mjs'

const ANSWER = harmony('<|channel|>final<|message|>Hello there.<|return|>')

/** An engine that answers ANSWER (or fails as `fail` says), counting the generations it was given. */
function member(name: string, fail?: () => EngineError | null) {
  const prompts: number[][] = []
  const engine: Engine = {
    name,
    async *generate(request: GenerateRequest): AsyncIterable<EngineStep> {
      prompts.push(Array.from(request.tokens))
      const error = fail?.() ?? null
      if (error !== null) throw error
      yield { tokens: Uint32Array.from(ANSWER), finishReason: 'stop' }
    },
  }
  return { engine, prompts }
}

async function run(group: Engine, tokens: number[]): Promise<number[]> {
  const out: number[] = []
  for await (const step of group.generate({ tokens })) out.push(...step.tokens)
  return out
}

/** A prompt of `blocks` × 64 distinct ids, starting from `seed`. */
const prompt = (seed: number, blocks = 2) => Array.from({ length: blocks * 64 }, (_, i) => 1000 + ((seed * 7919 + i) % 50_000))

test('an idle group spreads generations; a continuation goes back to the engine that holds its prefix', async (t) => {
  const a = member('a')
  const b = member('b')
  const group = new EngineGroup([a.engine, b.engine])
  const first = prompt(1)
  const second = prompt(2)
  const firstAnswer = await run(group, first)
  await run(group, second)
  t.is(a.prompts.length, 1)
  t.is(b.prompts.length, 1)
  const onA = a.prompts[0]![0] === first[0] ? a : b
  const onB = onA === a ? b : a
  // The conversations go on: each continuation starts with the ids its engine saw and generated.
  for (let turn = 0; turn < 3; turn++) {
    await run(group, [...first, ...firstAnswer, ...prompt(10 + turn, 1)])
    await run(group, [...second, ...ANSWER, ...prompt(20 + turn, 1)])
  }
  t.is(onA.prompts.length, 4)
  t.is(onB.prompts.length, 4)
  t.true(
    onA.prompts.slice(1).every((p) => p[0] === first[0]),
    'every continuation of the first conversation went to its engine',
  )
  t.deepEqual(
    group.status().map((s) => s.healthy),
    [true, true],
  )
})

test('affinity yields to load: an engine far busier than the least loaded is passed over', async (t) => {
  let release!: () => void
  const held = new Promise<void>((resolve) => (release = resolve))
  let holding = false
  const served: string[] = []
  const engine = (name: string): Engine => ({
    name,
    async *generate() {
      served.push(name)
      if (holding) await held
      yield { tokens: Uint32Array.from(ANSWER), finishReason: 'stop' }
    },
  })
  const group = new EngineGroup([engine('a'), engine('b')], { affinitySlack: 1 })
  const base = prompt(3)
  await run(group, base)
  const holder = served[0]!
  const continuation = (turn: number) => run(group, [...base, ...ANSWER, ...prompt(60 + turn, 1)])
  // Continuations go back to their engine while it is within the slack (one more running than the other)…
  holding = true
  const running = [continuation(1), continuation(2)]
  await new Promise((resolve) => setImmediate(resolve))
  t.deepEqual(served.slice(1), [holder, holder])
  // …and, two ahead, the next one goes to the other engine.
  const third = continuation(3)
  await new Promise((resolve) => setImmediate(resolve))
  t.not(served.at(-1), holder)
  release()
  await Promise.all([...running, third])
})

test('an engine that fails before its first step is taken out, the generation goes to the next; it is probed back after its cool-down', async (t) => {
  let now = 0
  let down = true
  const a = member('a', () => (down ? new EngineError('engine-connection-error', 'refused', { engine: 'a' }) : null))
  const b = member('b')
  const group = new EngineGroup([a.engine, b.engine], { now: () => now })
  // Whichever is tried first, every generation is answered.
  for (let i = 0; i < 4; i++) t.deepEqual(await run(group, prompt(100 + i)), ANSWER)
  t.is(a.prompts.length, 1, 'tried once, then left out during its cool-down')
  t.is(b.prompts.length, 4)
  t.deepEqual(
    group.status().map((s) => s.healthy),
    [false, true],
  )
  // After the cool-down (1 s after one failure), the next generation routed there probes it.
  now += 1000
  down = false
  for (let i = 0; i < 4; i++) await run(group, prompt(200 + i))
  t.true(a.prompts.length > 1, 'probed and back in')
  t.deepEqual(
    group.status().map((s) => s.healthy),
    [true, true],
  )
})

test('failover off: no second engine once a step was passed on; never for a request an engine refused as a request', async (t) => {
  const midStream: Engine = {
    name: 'a',
    async *generate() {
      yield { tokens: Uint32Array.from(ANSWER.slice(0, 3)) }
      throw new EngineError('engine-connection-error', 'reset', { engine: 'a' })
    },
  }
  const b = member('b')
  await t.throwsAsync(run(new EngineGroup([midStream, b.engine], { now: () => 0, failover: false }), prompt(1)), { message: 'reset' })
  const refused = member('a', () => new EngineError('engine-http-error', 'bad request', { engine: 'a', status: 400 }))
  await t.throwsAsync(run(new EngineGroup([refused.engine, b.engine]), prompt(1)), { message: 'bad request' })
  t.is(b.prompts.length, 0, 'the second engine was never asked')
})

test('every engine failing before its first step: the failure of the last engine tried is the answer', async (t) => {
  const x = member('x', () => new EngineError('engine-overloaded', 'busy x', { engine: 'x', status: 503 }))
  const y = member('y', () => new EngineError('engine-overloaded', 'busy y', { engine: 'y', status: 503 }))
  const tried: string[] = []
  const failures: EngineError[] = []
  const request: GenerateRequest = {
    tokens: prompt(1),
    onEngine: (name, failure) => (failure === undefined ? tried.push(name) : failures.push(failure as EngineError)),
  }
  const steps = async () => {
    for await (const _ of new EngineGroup([x.engine, y.engine]).generate(request));
  }
  const error = await t.throwsAsync(steps(), { instanceOf: EngineError })
  t.is(tried.length, 2, 'each engine tried once')
  t.not(tried[0], tried[1])
  t.is(failures.length, 2)
  // Not the first failure, nor a failure of the group's own: the very error of the engine tried last.
  t.is(error, failures[1])
  t.is(error.message, `busy ${tried[1]}`)
})

test("a client's abort while an engine of the group generates: that engine's request is closed, no other is tried, nothing stays counted", async (t) => {
  // Before the first step (the engine has the request, no answer yet: a prefill) and after it (ids sent, then a
  // long wait for the next ones): either way the abort is the client's, not the engine's failure.
  for (const [when, behaviour] of [
    ['before the first step', { headDelayMs: -1 }],
    ['after the first step', { stallAfter: 1 }],
  ] as const) {
    const fakes = await Promise.all([fakeVllm({ completion: ANSWER, ...behaviour }), fakeVllm({ completion: ANSWER, ...behaviour })])
    t.teardown(() => Promise.all(fakes.map((fake) => fake.close())))
    const group = new EngineGroup(fakes.map((fake) => createEngine('vllm', { url: fake.url, model: 'gpt-oss' })))
    const controller = new AbortController()
    const tried: string[] = []
    const request: GenerateRequest = {
      tokens: prompt(1),
      signal: controller.signal,
      onEngine: (name, failure) => tried.push(failure === undefined ? name : `${name} failed`),
    }
    const steps = group.generate(request)[Symbol.asyncIterator]()
    let pending = steps.next()
    if (when === 'after the first step') {
      const first = await pending
      t.deepEqual(Array.from(first.value?.tokens ?? []), ANSWER.slice(0, 1), when)
      pending = steps.next()
    } else t.true(await until(() => fakes.some((fake) => fake.bodies.length === 1)), `${when}: the engine has the request`)
    const engine = fakes.findIndex((fake) => fake.bodies.length === 1)
    t.deepEqual(
      group.status().map((s) => s.running),
      engine === 0 ? [1, 0] : [0, 1],
      `${when}: one generation running, on the engine that has the request`,
    )
    controller.abort()
    const error = await t.throwsAsync(pending, { instanceOf: EngineError }, when)
    t.is(error?.code, 'engine-aborted', when)
    t.deepEqual(await steps.next(), { done: true, value: undefined }, `${when}: nothing after the abort`)
    // The engine sees its request closed before the stream's end (it frees the sequence); the other is never asked.
    t.true(await until(() => fakes[engine]!.clientClosed === 1), `${when}: the engine's request was closed`)
    t.deepEqual(tried, [`vllm/${engine}`], `${when}: no other engine was tried, and no failure was reported`)
    t.deepEqual(
      fakes.map((fake) => fake.bodies.length),
      engine === 0 ? [1, 0] : [0, 1],
      when,
    )
    // Nothing stays counted as running, and the aborted engine is not taken out as if it had failed.
    t.deepEqual(
      group.status(),
      [
        { name: 'vllm/0', running: 0, healthy: true },
        { name: 'vllm/1', running: 0, healthy: true },
      ],
      when,
    )
  }
})

test('through the gateway: two vLLM servers, one killed, and no request is lost; /health shows each engine', async (t) => {
  const one = await fakeVllm({ completion: ANSWER })
  const two = await fakeVllm({ completion: ANSWER })
  t.teardown(() => one.close())
  // The killed server refuses at once; the live one's connections must not time out in a loaded machine's pauses.
  const engines = [one, two].map((fake) => createEngine('vllm', { url: fake.url, model: 'gpt-oss', connectTimeoutMs: 10_000 }))
  const { client, port } = await startGateway(t, { engines, onError: () => {} })
  // Conversations that share no more than the system prompt: spread by load.
  const words = (i: number) => Array.from({ length: 300 }, (_, k) => `w${i}x${k}`).join(' ')
  for (let i = 0; i < 4; i++) await client.chat.completions.create({ model: 'gpt-oss', messages: [{ role: 'user', content: words(i) }] })
  t.true(one.bodies.length > 0 && two.bodies.length > 0, 'both served')
  await two.close()
  for (let i = 0; i < 6; i++) {
    const answer = await client.chat.completions.create({ model: 'gpt-oss', messages: [{ role: 'user', content: `Again ${i}` }] })
    t.is(answer.choices[0]?.message.content, 'Hello there.')
  }
  const health = (await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as { engines: { name: string; healthy: boolean }[] }
  t.deepEqual(
    health.engines.map((e) => [e.name, e.healthy]),
    [
      ['vllm/0', true],
      ['vllm/1', false],
    ],
  )
  // The metrics count each engine apart, the failures the client never saw included.
  const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
  const sample = (name: string, labels: string) => Number(new RegExp(`^${name}\\{${labels}\\} (\\S+)$`, 'm').exec(metrics)?.[1] ?? 0)
  t.true(sample('harmony_generated_tokens_total', 'engine="vllm/0"') > 0)
  t.true(sample('harmony_generated_tokens_total', 'engine="vllm/1"') > 0)
  t.true(sample('harmony_engine_errors_total', 'engine="vllm/1",code="engine-connection-error"') >= 1, metrics)
})

test('EngineGroup and the engines option are checked', (t) => {
  t.throws(() => new EngineGroup([]), { instanceOf: TypeError, message: /non-empty array/ })
  t.throws(() => new EngineGroup([member('a').engine], { blockTokens: 0 } as never), { instanceOf: RangeError })
  t.throws(() => new EngineGroup([member('a').engine], { slack: 1 } as never), { instanceOf: TypeError, message: /slack/ })
})
