/**
 * The gateway's time limits on an engine (issue 30): the first token, the silence between tokens (steps without
 * ids, as heartbeats are, are no progress) and the whole request. At a limit the engine request is aborted (the
 * engine sees its signal) and the client gets a 504 naming the limit, or, once streaming, the stream's error
 * naming it. The engines here wait for their signal: each test ends when the gateway acts, whatever the clock.
 */
import test from 'ava'
import { type Engine, type EngineStep, type GenerateRequest, ReplayEngine, VllmEngine } from 'harmony-stream/engines'
import OpenAI from 'openai'

import { fakeVllm } from '../helpers/fake-engines.mjs'
import { startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { until } from '../helpers/until.mjs'

const messages = [{ role: 'user' as const, content: 'Hi' }]

/** Resolves when `signal` aborts. */
const aborted = (signal: AbortSignal | undefined) =>
  new Promise<void>((resolve) => (signal?.aborted ? resolve() : signal?.addEventListener('abort', () => resolve(), { once: true })))

/**
 * An engine that yields `first` steps, then steps without ids (heartbeats) or nothing, until it is aborted;
 * `aborts` resolves with each request's abort, in order.
 */
function stallingEngine(first: EngineStep[], heartbeats: boolean): { engine: Engine; aborts: Promise<void>[] } {
  const aborts: Promise<void>[] = []
  return {
    aborts,
    engine: {
      name: 'stalling',
      async *generate(request: GenerateRequest) {
        aborts.push(aborted(request.signal))
        for (const step of first) yield step
        while (heartbeats && !request.signal?.aborted) {
          yield { tokens: new Uint32Array(0) }
          await new Promise((resolve) => setImmediate(resolve))
        }
        await aborted(request.signal)
      },
    },
  }
}

test('no first token within firstTokenMs: a 504 naming the limit (streamed or not), and the engine request aborted', async (t) => {
  const { engine, aborts } = stallingEngine([], false)
  const { client } = await startGateway(t, { engine, engineTimeLimits: { firstTokenMs: 50 }, onError: () => {} })
  for (const stream of [false, true]) {
    const error = await t.throwsAsync(client.chat.completions.create({ model: 'gpt-oss', messages, stream }), {
      instanceOf: OpenAI.APIError,
    })
    t.is(error?.status, 504)
    t.is(error?.code, 'engine_first_token_timeout')
  }
  t.is(aborts.length, 2)
  await Promise.all(aborts)
})

test('heartbeats before the first token are no progress either: the stream ends with an error naming firstTokenMs', async (t) => {
  const { engine, aborts } = stallingEngine([], true)
  const { client } = await startGateway(t, { engine, engineTimeLimits: { firstTokenMs: 50 }, onError: () => {} })
  const stream = await client.chat.completions.create({ model: 'gpt-oss', messages, stream: true })
  const error = await t.throwsAsync(async () => {
    for await (const _ of stream);
  })
  t.regex(String(error), /no token in time/)
  await aborts[0]
})

test('heartbeats after the first tokens are no progress: idleMs ends the stream with an error naming it', async (t) => {
  // idleMs counts from the first tokens, whatever the first token's limit: the default (two minutes, which the
  // limit once waited for before idleMs counted) or none. Either would outlast this bound.
  t.timeout(60_000, 'idleMs did not end the stream')
  for (const engineTimeLimits of [{ idleMs: 50 }, { idleMs: 50, firstTokenMs: null }]) {
    const { engine, aborts } = stallingEngine([{ tokens: Uint32Array.from(harmony('<|channel|>final<|message|>Hel')) }], true)
    const { client } = await startGateway(t, { engine, engineTimeLimits, onError: () => {} })
    const stream = await client.responses.create({ model: 'gpt-oss', input: 'Hi', stream: true })
    const types: string[] = []
    let failure: unknown = null
    try {
      for await (const event of stream) types.push(event.type)
    } catch (error) {
      failure = error
    }
    t.true(types.includes('response.output_text.delta'), types.join(' '))
    t.is((failure as { code?: string } | null)?.code, 'engine_idle_timeout', String(failure))
    await aborts[0]
  }
})

test('deadlineMs ends a generation that keeps going, whatever it sends', async (t) => {
  const token = Uint32Array.from(harmony('a'))
  const aborts: Promise<void>[] = []
  const endless: Engine = {
    name: 'endless',
    async *generate(request: GenerateRequest) {
      aborts.push(aborted(request.signal))
      yield { tokens: Uint32Array.from(harmony('<|channel|>final<|message|>')) }
      while (!request.signal?.aborted) {
        yield { tokens: token }
        await new Promise((resolve) => setImmediate(resolve))
      }
    },
  }
  const { client } = await startGateway(t, { engine: endless, engineTimeLimits: { deadlineMs: 100, idleMs: null }, onError: () => {} })
  const error = await t.throwsAsync(client.chat.completions.create({ model: 'gpt-oss', messages }), { instanceOf: OpenAI.APIError })
  t.is(error?.status, 504)
  t.is(error?.code, 'engine_deadline_exceeded')
  await aborts[0]
})

test('limits are checked options: a misspelt, negative or mistyped one is a TypeError or RangeError naming it', async (t) => {
  const { engine } = stallingEngine([], false)
  for (const [limits, name] of [
    [{ idleMS: 5 }, 'idleMS'],
    [{ firstTokenMs: -1 }, 'firstTokenMs'],
    [{ deadlineMs: 'soon' }, 'deadlineMs'],
  ] as const) {
    const failed = await startGateway(t, { engine, engineTimeLimits: limits }).then(
      () => null,
      (error: Error) => error,
    )
    t.true((failed instanceof TypeError || failed instanceof RangeError) && failed.message.includes(name), String(failed))
  }
})

test('an HTTP engine that only sends heartbeats (SSE comments) after its first tokens: cut at idleMs, its connection closed', async (t) => {
  t.timeout(60_000, 'idleMs did not end the stream')
  // The text's ids in one chunk, then heartbeats: text reaches the client before idleMs can pass, however slow
  // the machine (a pause between chunks of single ids could pass it before any text).
  const fake = await fakeVllm({ completion: harmony('<|channel|>final<|message|>Hello there.<|return|>'), chunk: 5, heartbeatAfter: 1 })
  t.teardown(() => fake.close())
  // Its read timeout never fires: every comment is a byte. The token limit does.
  const engine = new VllmEngine({ url: fake.url, readTimeoutMs: 60_000 })
  const { client } = await startGateway(t, { engine, engineTimeLimits: { idleMs: 100 }, onError: () => {} })
  const stream = await client.chat.completions.create({ model: 'gpt-oss', messages, stream: true })
  let content = ''
  const error = await t.throwsAsync(async () => {
    for await (const chunk of stream) content += chunk.choices[0]?.delta.content ?? ''
  })
  t.regex(String(error), /stopped giving tokens/)
  t.true(content.length > 0, 'the tokens before the heartbeats were streamed')
  // The close reaches the fake on its own time: waited for, up to 10 s.
  t.true(await until(() => fake.clientClosed === 1, 10_000))
})

test("a built-in tool's call is the gateway's work, not the engine's silence: a call longer than idleMs runs, and the response goes on", async (t) => {
  const call = harmony(
    '<|channel|>analysis<|message|>Let me compute it.<|end|><|start|>assistant<|channel|>analysis to=python code<|message|>print(2)<|call|>',
  )
  const answer = harmony('<|channel|>final<|message|>It is 2.<|return|>')
  const engine = new ReplayEngine({ completions: [call, answer], interval: 1000 })
  const idleMs = 1000
  let ran = 0
  const python = {
    // Four times idleMs: without the hold, the engine would have been cut as silent while this ran.
    run: async () => {
      ran++
      await new Promise((resolve) => setTimeout(resolve, 4 * idleMs))
      return { output: '2' }
    },
    end: () => {},
    close: async () => {},
  }
  const { client } = await startGateway(t, { engine, engineTimeLimits: { idleMs }, tools: { python } })
  const response = await client.responses.create({
    model: 'gpt-oss',
    input: 'What is 1 + 1?',
    tools: [{ type: 'code_interpreter', container: { type: 'auto' } }],
  })
  t.is(ran, 1)
  t.is(response.status, 'completed')
  t.is(response.output_text, 'It is 2.')
})
