/**
 * Failover mid-stream (issue 45): an engine of a group that fails after the first step (a stream cut, a 5xx,
 * a stall) is replaced by another, prompted with the prompt and the ids generated, and the consumer reads one
 * stream: every id once, usage as one engine's, log probabilities per id, an `engine-failover` diagnostic. The
 * engines here are a deterministic "model" that goes on from wherever its prompt ends, as greedy decoding on
 * identical engines does; time is a clock of the test's own (the group's `now` and `sleep`), never waited out.
 */
import test from 'ava'
import { type Engine, type EngineDiagnostic, EngineError, EngineGroup, type EngineStep, type GenerateRequest } from 'harmony-stream/engines'

import { fakeLogprobs } from '../helpers/fake-engines.mjs'
import { harmony, SPECIAL } from '../helpers/harmony.mjs'
import { until } from '../helpers/until.mjs'

const PROMPT = harmony('<|start|>user<|message|>Tell me about foxes.<|end|><|start|>assistant')
const ANSWER = harmony('<|channel|>final<|message|>The quick brown fox jumps over the lazy dog, then runs to the hills.<|return|>')

/** What goes wrong on one call of an engine: after `after` ids, an error, or a stall (until its request is aborted). */
interface Fault {
  after: number
  error?: () => EngineError
}

const reset = (engine: string) => () => new EngineError('engine-connection-error', `${engine}: reset`, { engine })

/** Resolves when `signal` aborts. */
const aborted = (signal: AbortSignal | undefined) =>
  new Promise<void>((resolve) => (signal?.aborted ? resolve() : signal?.addEventListener('abort', () => resolve(), { once: true })))

/**
 * An engine whose completion of any prompt ending `<|start|>assistant` is ANSWER: given the prompt and the first
 * k ids of ANSWER, it goes on from id k. One id a step (with its log probability by its place in ANSWER), then a
 * step without ids with the finish reason and usage. `fault(call)` says what goes wrong on its call-th request.
 */
function continuing(name: string, fault: (call: number) => Fault | null = () => null) {
  const requests: GenerateRequest[] = []
  const engine: Engine = {
    name,
    async *generate(request: GenerateRequest): AsyncIterable<EngineStep> {
      const call = requests.push(request) - 1
      const broken = fault(call)
      const tokens = Array.from(request.tokens)
      const from = tokens.length - (tokens.lastIndexOf(SPECIAL['<|start|>']!) + 2)
      const rest = ANSWER.slice(from, request.maxTokens === undefined ? undefined : from + request.maxTokens)
      for (let n = 0; n <= rest.length; n++) {
        if (broken !== null && n === broken.after) {
          if (broken.error !== undefined) throw broken.error()
          await aborted(request.signal)
          throw new EngineError('engine-aborted', `${name}: aborted`, { engine: name })
        }
        if (n === rest.length) break
        const id = rest[n]!
        yield {
          tokens: Uint32Array.of(id),
          ...(request.logprobs === undefined ? {} : { logprobs: [fakeLogprobs(id, from + n, request.logprobs)] }),
        }
      }
      const finishReason = from + rest.length === ANSWER.length ? 'stop' : 'length'
      yield { tokens: new Uint32Array(0), finishReason, usage: { promptTokens: tokens.length, completionTokens: rest.length } }
    },
  }
  return { engine, requests }
}

/** A clock of the test's own: `sleep`s resolve when `advance` moves the time past them. */
function fakeClock() {
  let time = 0
  const sleeps = new Set<{ at: number; resolve: () => void }>()
  return {
    now: () => time,
    sleep: (ms: number, signal: AbortSignal) =>
      new Promise<void>((resolve, reject) => {
        const entry = { at: time + ms, resolve }
        sleeps.add(entry)
        signal.addEventListener(
          'abort',
          () => {
            sleeps.delete(entry)
            reject(signal.reason)
          },
          { once: true },
        )
      }),
    /** Sleeps under way. */
    sleeping: () => sleeps.size,
    advance(ms: number) {
      time += ms
      for (const entry of [...sleeps])
        if (entry.at <= time) {
          sleeps.delete(entry)
          entry.resolve()
        }
    },
  }
}

/** Lets every promise reaction that is due run. */
const settle = () => new Promise((resolve) => setImmediate(resolve))

interface Read {
  ids: number[]
  steps: EngineStep[]
  diagnostics: EngineDiagnostic[]
  error: unknown
}

async function read(steps: AsyncIterable<EngineStep>): Promise<Read> {
  const out: Read = { ids: [], steps: [], diagnostics: [], error: null }
  try {
    for await (const step of steps) {
      out.steps.push(step)
      out.ids.push(...step.tokens)
      out.diagnostics.push(...(step.diagnostics ?? []))
    }
  } catch (error) {
    out.error = error
  }
  return out
}

/** Every log probability passed on, in order, null where none. */
const logprobsOf = (steps: EngineStep[]) => steps.flatMap((step) => step.logprobs ?? [])

test('a stream cut mid-stream: the next engine goes on from the prompt and the ids generated, and the consumer reads one stream', async (t) => {
  const a = continuing('a', (call) => (call === 0 ? { after: 5, error: reset('a') } : null))
  const b = continuing('b')
  const served: string[] = []
  const group = new EngineGroup([a.engine, b.engine], { now: () => 0 })
  const request: GenerateRequest = {
    tokens: PROMPT,
    maxTokens: 100,
    logprobs: 2,
    temperature: 0,
    onEngine: (name, failure) => served.push(failure === undefined ? name : `${name} failed`),
  }
  const out = await read(group.generate(request))
  const whole = await read(continuing('fresh').engine.generate({ ...request, onEngine: undefined }))
  t.is(out.error, null)
  // Every id once, as the unbroken generation.
  t.deepEqual(out.ids, ANSWER)
  t.deepEqual(out.ids, whole.ids)
  t.deepEqual(served, ['a', 'a failed', 'b'])
  // The second engine's prompt is the prompt and the 5 ids generated; its limit is less those ids; the rest is the request's.
  const second = b.requests[0]!
  t.deepEqual(Array.from(second.tokens), [...PROMPT, ...ANSWER.slice(0, 5)])
  t.is(second.maxTokens, 95)
  t.is(second.logprobs, 2)
  t.is(second.temperature, 0)
  // Usage as one engine would give it: the prompt as sent, every id generated.
  const last = out.steps.at(-1)!
  t.is(last.finishReason, 'stop')
  t.deepEqual(last.usage, { promptTokens: PROMPT.length, completionTokens: ANSWER.length })
  t.deepEqual(logprobsOf(out.steps), logprobsOf(whole.steps))
  t.is(logprobsOf(out.steps).length, ANSWER.length, 'one log probability per id')
  t.is(out.diagnostics.length, 1)
  t.like(out.diagnostics[0], { code: 'engine-failover', from: 'a', to: 'b', carried: 5 })
  t.regex(out.diagnostics[0]!.message, /a failed mid-stream; b goes on .* 5 ids/)
  t.deepEqual(
    group.status().map((s) => s.healthy),
    [false, true],
    'the engine that failed is out for its cool-down',
  )
})

test('a 5xx mid-stream fails over too; a 4xx does not (a request refused as a request is the client’s)', async (t) => {
  const status = (code: number) => () => new EngineError('engine-http-error', `a: ${code}`, { engine: 'a', status: code })
  const a = continuing('a', () => ({ after: 3, error: status(500) }))
  const b = continuing('b')
  const out = await read(new EngineGroup([a.engine, b.engine], { now: () => 0 }).generate({ tokens: PROMPT }))
  t.deepEqual(out.ids, ANSWER)
  t.is(b.requests.length, 1)
  t.like(out.diagnostics[0], { code: 'engine-failover', carried: 3 })
  const refused = continuing('a', () => ({ after: 3, error: status(400) }))
  const c = continuing('c')
  const failed = await read(new EngineGroup([refused.engine, c.engine], { now: () => 0 }).generate({ tokens: PROMPT }))
  t.like(failed.error, { message: 'a: 400' })
  t.is(c.requests.length, 0)
})

test('a stall (no ids for failoverIdleMs while the group waits) aborts that engine’s request and fails over; a slow reader is no stall', async (t) => {
  const clock = fakeClock()
  const a = continuing('a', (call) => (call === 0 ? { after: 3 } : null))
  const b = continuing('b')
  const group = new EngineGroup([a.engine, b.engine], { failoverIdleMs: 1000, now: clock.now, sleep: clock.sleep })
  const steps = group.generate({ tokens: PROMPT })[Symbol.asyncIterator]()
  const ids: number[] = []
  for (let i = 0; i < 3; i++) ids.push(...(await steps.next()).value!.tokens)
  const pending = steps.next()
  t.true(await until(() => clock.sleeping() > 0), 'the group waits with its timer set')
  clock.advance(999)
  await settle()
  t.is(b.requests.length, 0, 'not yet')
  t.false(a.requests[0]!.signal?.aborted)
  clock.advance(1)
  // The stalled engine's request was aborted (its own signal), and the next engine goes on.
  t.true(await until(() => a.requests[0]!.signal?.aborted === true))
  let next = await pending
  const diagnostics: EngineDiagnostic[] = []
  while (!next.done) {
    ids.push(...next.value.tokens)
    diagnostics.push(...(next.value.diagnostics ?? []))
    next = await steps.next()
  }
  t.deepEqual(ids, ANSWER)
  t.like(diagnostics[0], { code: 'engine-failover', from: 'a', to: 'b', carried: 3 })

  // A reader that takes its time between steps: the engine was not waited on, no stall.
  const slow = fakeClock()
  const c = continuing('c')
  const d = continuing('d')
  const patient = new EngineGroup([c.engine, d.engine], { failoverIdleMs: 1000, now: slow.now, sleep: slow.sleep })
  const out: number[] = []
  for await (const step of patient.generate({ tokens: PROMPT })) {
    out.push(...step.tokens)
    slow.advance(5000)
  }
  t.deepEqual(out, ANSWER)
  t.is(c.requests.length + d.requests.length, 1, 'one engine served it all')
})

test('failover off: a failure mid-stream is the client’s, as before', async (t) => {
  const a = continuing('a', () => ({ after: 4, error: reset('a') }))
  const b = continuing('b')
  const out = await read(new EngineGroup([a.engine, b.engine], { failover: false, now: () => 0 }).generate({ tokens: PROMPT }))
  t.deepEqual(out.ids, ANSWER.slice(0, 4))
  t.like(out.error, { code: 'engine-connection-error' })
  t.is(b.requests.length, 0)
  t.deepEqual(out.diagnostics, [])
})

test('at most maxFailovers per generation: then the failure is the client’s, with a diagnostic saying why', async (t) => {
  const engines = ['a', 'b', 'c'].map((name) => continuing(name, () => ({ after: 2, error: reset(name) })))
  const out = await read(
    new EngineGroup(
      engines.map((e) => e.engine),
      { maxFailovers: 1, now: () => 0 },
    ).generate({ tokens: PROMPT }),
  )
  t.deepEqual(out.ids, ANSWER.slice(0, 4), 'two ids from each of the two engines asked, none twice')
  t.like(out.error, { code: 'engine-connection-error' })
  t.deepEqual(engines.map((e) => e.requests.length).sort(), [0, 1, 1])
  t.deepEqual(
    out.diagnostics.map((d) => d.code),
    ['engine-failover', 'engine-failover-refused'],
  )
  t.regex(out.diagnostics[1]!.message, /maxFailovers/)
  // The default, 2: three engines, each cut, each tried once.
  const three = ['a', 'b', 'c'].map((name) => continuing(name, () => ({ after: 2, error: reset(name) })))
  const again = await read(
    new EngineGroup(
      three.map((e) => e.engine),
      { now: () => 0 },
    ).generate({ tokens: PROMPT }),
  )
  t.deepEqual(again.ids, ANSWER.slice(0, 6))
  t.deepEqual(
    three.map((e) => e.requests.length),
    [1, 1, 1],
  )
})

test('an abort by the caller never fails over', async (t) => {
  const a = continuing('a', () => ({ after: 3 }))
  const b = continuing('b')
  const controller = new AbortController()
  const served: string[] = []
  const request: GenerateRequest = { tokens: PROMPT, signal: controller.signal, onEngine: (name) => served.push(name) }
  const steps = new EngineGroup([a.engine, b.engine], { now: () => 0 }).generate(request)[Symbol.asyncIterator]()
  for (let i = 0; i < 3; i++) await steps.next()
  const pending = steps.next()
  controller.abort()
  await t.throwsAsync(pending, { instanceOf: EngineError, message: /aborted/ })
  t.is(b.requests.length, 0)
  t.deepEqual(served, ['a'])
})

test('one engine (or the others out): the same engine again once, when its cool-down ends on the group’s clock', async (t) => {
  const clock = fakeClock()
  const a = continuing('a', (call) => (call === 0 ? { after: 4, error: reset('a') } : null))
  const group = new EngineGroup([a.engine], { now: clock.now, sleep: clock.sleep })
  const reading = read(group.generate({ tokens: PROMPT, maxTokens: 50 }))
  t.true(await until(() => clock.sleeping() > 0), 'waiting for the cool-down')
  clock.advance(999)
  await settle()
  t.is(a.requests.length, 1, 'not before the cool-down ends')
  clock.advance(1)
  const out = await reading
  t.is(out.error, null)
  t.deepEqual(out.ids, ANSWER)
  t.deepEqual(Array.from(a.requests[1]!.tokens), [...PROMPT, ...ANSWER.slice(0, 4)])
  t.is(a.requests[1]!.maxTokens, 46)
  t.like(out.diagnostics[0], { code: 'engine-failover', from: 'a', to: 'a', carried: 4 })
  t.true(group.status()[0]!.healthy, 'its success put it back')

  // Failing again, it is not tried a third time.
  const again = fakeClock()
  const flaky = continuing('a', () => ({ after: 2, error: reset('a') }))
  const reading2 = read(new EngineGroup([flaky.engine], { now: again.now, sleep: again.sleep }).generate({ tokens: PROMPT }))
  t.true(await until(() => again.sleeping() > 0))
  again.advance(1000)
  const out2 = await reading2
  t.like(out2.error, { code: 'engine-connection-error' })
  t.is(flaky.requests.length, 2)
  t.deepEqual(out2.ids, ANSWER.slice(0, 4))
  t.is(out2.diagnostics.at(-1)?.code, 'engine-failover-refused')
})

test('structured outputs are not failed over: a grammar cannot resume inside the message it constrains', async (t) => {
  const schema = { type: 'object' }
  for (const constraint of [
    { responseFormat: { name: 'answer', schema } },
    { argumentSchemas: [{ name: 'f', schema }] },
    { callArguments: { schema } },
  ] as Partial<GenerateRequest>[]) {
    const a = continuing('a', () => ({ after: 3, error: reset('a') }))
    const b = continuing('b')
    const out = await read(new EngineGroup([a.engine, b.engine], { now: () => 0 }).generate({ tokens: PROMPT, ...constraint }))
    t.like(out.error, { code: 'engine-connection-error' })
    t.is(b.requests.length, 0)
    t.is(out.diagnostics.length, 1)
    t.like(out.diagnostics[0], { code: 'engine-failover-refused', from: 'a' })
    t.regex(out.diagnostics[0]!.message, /structured outputs/)
  }
})

test('a failure after the last id needs no other engine: the generation ends (stop, or length at maxTokens)', async (t) => {
  for (const [maxTokens, after, finishReason] of [
    [undefined, ANSWER.length, 'stop'],
    [5, 5, 'length'],
  ] as const) {
    const a = continuing('a', () => ({ after, error: reset('a') }))
    const b = continuing('b')
    const out = await read(new EngineGroup([a.engine, b.engine], { now: () => 0 }).generate({ tokens: PROMPT, maxTokens }))
    t.is(out.error, null)
    t.deepEqual(out.ids, ANSWER.slice(0, after))
    t.is(b.requests.length, 0)
    t.is(out.steps.at(-1)?.finishReason, finishReason)
    t.deepEqual(out.steps.at(-1)?.usage, { promptTokens: PROMPT.length, completionTokens: after })
  }
})

test('the failover options are checked', (t) => {
  const { engine } = continuing('a')
  t.throws(() => new EngineGroup([engine], { failover: 'no' } as never), { instanceOf: TypeError, message: /failover/ })
  t.throws(() => new EngineGroup([engine], { maxFailovers: -1 }), { instanceOf: RangeError })
  t.throws(() => new EngineGroup([engine], { failoverIdleMs: 0 }), { instanceOf: RangeError })
  t.throws(() => new EngineGroup([engine], { sleep: 5 } as never), { instanceOf: TypeError, message: /sleep/ })
})
