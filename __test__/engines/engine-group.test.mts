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
import {
  createEngine,
  type Engine,
  EngineError,
  EngineGroup,
  type EngineGroupOptions,
  type EngineStep,
  type GenerateRequest,
} from 'harmony-stream/engines'

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

test('affinitySlack (deprecated) still passes over an engine more than that far ahead of the least loaded', async (t) => {
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

/**
 * Engines that hold every generation while `hold()` is on, until `release()`, so that many run at once, and
 * that refuse to connect while their name is in `down`; `served` lists which engine got which prompt.
 */
function heldEngines(names: readonly string[]) {
  const down = new Set<string>()
  const served: { engine: string; tokens: number[] }[] = []
  let held: Promise<void> | null = null
  let release = () => {}
  const engines = names.map(
    (name): Engine => ({
      name,
      async *generate(request: GenerateRequest) {
        if (down.has(name)) throw new EngineError('engine-connection-error', 'refused', { engine: name })
        served.push({ engine: name, tokens: Array.from(request.tokens) })
        if (held !== null) await held
        yield { tokens: Uint32Array.from(ANSWER), finishReason: 'stop' }
      },
    }),
  )
  return {
    engines,
    down,
    served,
    hold() {
      held = new Promise<void>((resolve) => (release = resolve))
    },
    release() {
      held = null
      release()
    },
  }
}

/** Every generation started so far has reached its engine. */
const started = () => new Promise((resolve) => setImmediate(resolve))

/**
 * `count` conversations whose first turns all went to engine `a` (engine `b` was out, a restart, say), then all
 * continued at once: how many of the continuations their engine kept, and the group's running counts then.
 */
async function continueAtOnce(count: number, options: EngineGroupOptions) {
  let now = 0
  const fleet = heldEngines(['a', 'b'])
  const group = new EngineGroup(fleet.engines, { ...options, now: () => now })
  fleet.down.add('b')
  const firsts = Array.from({ length: count }, (_, c) => prompt(300 + c))
  for (const first of firsts) await run(group, first)
  const before = fleet.served.length
  // Every first turn on a; b back after its cool-down.
  now += 1000
  fleet.down.delete('b')
  fleet.hold()
  const running = firsts.map((first, c) => run(group, [...first, ...ANSWER, ...prompt(400 + c, 1)]))
  await started()
  const continued = fleet.served.slice(before)
  const status = group.status().map((s) => s.running)
  fleet.release()
  await Promise.all(running)
  return { firsts: before, kept: continued.filter((s) => s.engine === 'a').length, continued: continued.length, status }
}

test('ten conversations held by one engine continue at once: the spill gate keeps all ten there, where affinitySlack 4 kept seven', async (t) => {
  const gate = await continueAtOnce(10, {})
  t.is(gate.firsts, 10)
  t.is(gate.continued, 10)
  t.is(gate.kept, 10, 'every continuation found its prefix cache')
  t.deepEqual(gate.status, [10, 0])
  // The old rule: five in a row, then every other one sent to the idle engine and its cache lost.
  const slack = await continueAtOnce(10, { affinitySlack: 4 })
  t.is(slack.continued, 10)
  t.is(slack.kept, 7)
})

test('a truly overloaded holder is spilled: past 1.5 × the mean and the margin above it, the next continuation goes to the other engine', async (t) => {
  // Mean 5.5 with 11 running on a: 11 > 8.25 and 11 > 5.5 + 5 (the margin: ceil(2 × √5.5)), so the twelfth spills.
  const gate = await continueAtOnce(12, {})
  t.is(gate.kept, 11)
  t.deepEqual(gate.status, [11, 1])
  // A tighter gate spills sooner: a margin of at most 2 passes a over once it runs 5 (mean 2.5, 5 > 4.5).
  const tight = await continueAtOnce(10, { balanceAbsThreshold: 2 })
  t.true(tight.kept < 10)
  t.true(tight.status[1]! > 0)
  // The relative part alone (margin 0) at 1: any engine above the mean is passed over, as load balancing does.
  const loadAlone = await continueAtOnce(10, { balanceAbsThreshold: 0, balanceRelThreshold: 1 })
  t.deepEqual(loadAlone.status, [5, 5])
})

test('an affinity key (prompt_cache_key) keeps requests that share no known prefix on one engine, one after another and at once', async (t) => {
  const fleet = heldEngines(['a', 'b'])
  const group = new EngineGroup(fleet.engines, { now: () => 0 })
  const keyed = (i: number, affinityKey: string) => group.generate({ tokens: prompt(500 + i), affinityKey })
  const drain = async (steps: AsyncIterable<EngineStep>) => {
    for await (const _ of steps);
  }
  for (let i = 0; i < 6; i++) await drain(keyed(i, 'team-1'))
  for (let i = 0; i < 6; i++) await drain(keyed(10 + i, 'team-2'))
  const engineOf = (from: number, to: number) => new Set(fleet.served.slice(from, to).map((s) => s.engine))
  t.is(engineOf(0, 6).size, 1, 'team-1 on one engine')
  t.is(engineOf(6, 12).size, 1, 'team-2 on one engine')
  // Without a key, the same kind of prompts are spread by load.
  for (let i = 0; i < 6; i++) await run(group, prompt(600 + i))
  t.is(engineOf(12, 18).size, 2)
  // At once: six running on one engine, none on the other, is within the gate (mean 3: 5 is not above 3 + 4).
  const [team1] = engineOf(0, 6)
  fleet.hold()
  const running = Array.from({ length: 6 }, (_, i) => drain(keyed(20 + i, 'team-1')))
  await started()
  t.deepEqual([...engineOf(18, 24)], [team1])
  fleet.release()
  await Promise.all(running)
  // With affinity off, a key routes nothing.
  const off = heldEngines(['a', 'b'])
  const byLoad = new EngineGroup(off.engines, { affinity: false })
  for (let i = 0; i < 4; i++) for await (const _ of byLoad.generate({ tokens: prompt(700 + i), affinityKey: 'team-1' }));
  t.is(new Set(off.served.map((s) => s.engine)).size, 2)
})

test("an affinity key's engine that fails goes out and the key moves to the next engine, and stays there", async (t) => {
  let now = 0
  const fleet = heldEngines(['a', 'b'])
  const group = new EngineGroup(fleet.engines, { now: () => now })
  const keyed = async (i: number) => {
    for await (const _ of group.generate({ tokens: prompt(800 + i), affinityKey: 'agent' }));
    return fleet.served.at(-1)!.engine
  }
  const first = await keyed(0)
  t.is(await keyed(1), first)
  fleet.down.add(first)
  const next = await keyed(2)
  t.not(next, first, 'the client never saw the failure: the next engine answered')
  t.deepEqual(
    group.status().map((s) => s.healthy),
    first === 'a' ? [false, true] : [true, false],
  )
  t.is(await keyed(3), next)
  // Back after its cool-down, the first engine does not take the key back.
  now += 30_000
  fleet.down.delete(first)
  t.is(await keyed(4), next)
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
  const one = [member('a').engine]
  t.throws(() => new EngineGroup(one, { balanceRelTreshold: 2 } as never), {
    instanceOf: TypeError,
    message: /unknown option 'balanceRelTreshold' \(did you mean 'balanceRelThreshold'\?\)/,
  })
  t.throws(() => new EngineGroup(one, { balanceRelThreshold: 0.5 }), { instanceOf: RangeError, message: /'balanceRelThreshold'/ })
  t.throws(() => new EngineGroup(one, { balanceRelThreshold: '2' } as never), { instanceOf: TypeError, message: /'balanceRelThreshold'/ })
  t.throws(() => new EngineGroup(one, { balanceAbsThreshold: -1 }), { instanceOf: RangeError, message: /'balanceAbsThreshold'/ })
  t.throws(() => new EngineGroup(one, { balanceAbsThreshold: 1.5 }), { instanceOf: RangeError, message: /'balanceAbsThreshold'/ })
  t.throws(() => new EngineGroup(one, { cacheThreshold: 1.2 }), { instanceOf: RangeError, message: /'cacheThreshold'/ })
  t.throws(() => new EngineGroup(one, { maxKeys: 0 }), { instanceOf: RangeError, message: /'maxKeys'/ })
  t.throws(() => new EngineGroup(one, { affinitySlack: 4, balanceAbsThreshold: 8 }), {
    instanceOf: TypeError,
    message: /'affinitySlack' \(deprecated\) cannot be given with 'balanceRelThreshold' or 'balanceAbsThreshold'/,
  })
  t.notThrows(() => new EngineGroup(one, { affinitySlack: 4, cacheThreshold: 0.3, maxKeys: 10 }))
})
