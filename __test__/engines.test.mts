/**
 * The engine clients against local servers that speak each engine's wire format (helpers/fake-engines.mts):
 * the ids assembled, the request fields each engine expects, the stop token whether the engine puts it in the
 * ids or only in its stop reason, finish reasons and usage, HTTP and mid-stream errors, stalls, dropped
 * connections, aborts and early exits the server observes, backpressure, and bad arguments.
 */
import test from 'ava'

import { EngineError, type EngineStep, LlamaCppEngine, ReplayEngine, SglangEngine, VllmEngine, createEngine } from 'harmony-stream/engines'

import { type FakeBehaviour, type FakeEngine, fakeLlamaCpp, fakeSglang, fakeVllm, fakeVllmGenerate } from './helpers/fake-engines.mjs'
import { harmony } from './helpers/harmony.mjs'

const PROMPT = harmony('<|start|>user<|message|>Weather in Paris?<|end|><|start|>assistant')
const COMPLETION = harmony('<|channel|>analysis<|message|>Need the tool.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>')
const CALL = 200012

interface Kind {
  name: string
  start(behaviour: FakeBehaviour): Promise<FakeEngine>
  client(url: string, options?: Record<string, unknown>): { generate: VllmEngine['generate'] }
}

const KINDS: Kind[] = [
  { name: 'vllm', start: fakeVllm, client: (url, o = {}) => new VllmEngine({ url, model: 'gpt-oss', ...o }) },
  { name: 'vllm generate', start: fakeVllmGenerate, client: (url, o = {}) => new VllmEngine({ url, api: 'generate', ...o }) },
  { name: 'sglang', start: fakeSglang, client: (url, o = {}) => new SglangEngine({ url, ...o }) },
  { name: 'sglang incremental', start: (b) => fakeSglang({ ...b, incremental: true }), client: (url, o = {}) => new SglangEngine({ url, ...o }) },
  { name: 'llamacpp', start: fakeLlamaCpp, client: (url, o = {}) => new LlamaCppEngine({ url, ...o }) },
]

async function collect(steps: AsyncIterable<EngineStep>): Promise<{ tokens: number[]; steps: EngineStep[] }> {
  const all: EngineStep[] = []
  for await (const s of steps) all.push(s)
  return { tokens: all.flatMap((s) => Array.from(s.tokens)), steps: all }
}

for (const kind of KINDS) {
  test(`${kind.name}: the completion's ids, stop token and finish reason, at chunk sizes 1, 3 and 7, stop id in the ids or not`, async (t) => {
    for (const chunk of [1, 3, 7]) {
      for (const stopInIds of [false, true]) {
        const engine = await kind.start({ completion: COMPLETION, chunk, stopInIds })
        try {
          const { tokens, steps } = await collect(kind.client(engine.url).generate({ tokens: PROMPT, maxTokens: 500, temperature: 0.5, topP: 0.9, seed: 7 }))
          const where = `chunk ${chunk}, stop in ids: ${stopInIds}`
          if (kind.name === 'vllm generate' && !stopInIds) {
            // The tokens-only endpoint reports no stop reason: a stop token it left out cannot be known.
            t.deepEqual(tokens, COMPLETION.slice(0, -1), where)
          } else {
            t.deepEqual(tokens, COMPLETION, where)
            t.is(tokens.filter((id) => id === CALL).length, 1, `${where}: the stop token once`)
          }
          t.is(steps.at(-1)!.finishReason, 'stop', where)
          t.true(steps.slice(0, -1).every((s) => s.finishReason === undefined), 'the finish reason on the last step only')
          t.true(steps.at(-1)!.usage === undefined || steps.at(-1)!.usage!.promptTokens === PROMPT.length)
        } finally {
          await engine.close()
        }
      }
    }
  })

  test(`${kind.name}: the request carries what the engine expects`, async (t) => {
    const engine = await kind.start({ completion: COMPLETION })
    t.teardown(() => engine.close())
    await collect(kind.client(engine.url).generate({ tokens: Uint32Array.from(PROMPT), maxTokens: 64, temperature: 0.25, topP: 0.75, seed: 11 }))
    const body = engine.bodies[0]
    if (kind.name === 'vllm') {
      t.like(body, { model: 'gpt-oss', prompt: PROMPT, max_tokens: 64, temperature: 0.25, top_p: 0.75, seed: 11, stream: true, return_token_ids: true, skip_special_tokens: false, stop_token_ids: [200002, 200012], stream_options: { include_usage: true } })
    } else if (kind.name === 'vllm generate') {
      t.like(body, { token_ids: PROMPT, stream: true, sampling_params: { max_tokens: 64, temperature: 0.25, top_p: 0.75, seed: 11, stop_token_ids: [200002, 200012], skip_special_tokens: false } })
    } else if (kind.name.startsWith('sglang')) {
      t.like(body, { input_ids: PROMPT, stream: true, sampling_params: { max_new_tokens: 64, temperature: 0.25, top_p: 0.75, sampling_seed: 11, stop_token_ids: [200002, 200012], skip_special_tokens: false } })
    } else {
      t.like(body, { prompt: PROMPT, n_predict: 64, temperature: 0.25, top_p: 0.75, seed: 11, stream: true, return_tokens: true })
    }
    const stops = (body.stop_token_ids ?? (body.sampling_params as Record<string, unknown> | undefined)?.stop_token_ids ?? []) as number[]
    t.false(stops.includes(200007), '<|end|> never stops generation')
  })

  test(`${kind.name}: the token limit ends with finish reason length`, async (t) => {
    const engine = await kind.start({ completion: COMPLETION, chunk: 2 })
    t.teardown(() => engine.close())
    const { tokens, steps } = await collect(kind.client(engine.url).generate({ tokens: PROMPT, maxTokens: 9 }))
    t.deepEqual(tokens, COMPLETION.slice(0, 9))
    t.is(steps.at(-1)!.finishReason, 'length')
  })

  test(`${kind.name}: HTTP errors and mid-stream errors are EngineErrors with the engine's message`, async (t) => {
    const refused = await kind.start({ completion: COMPLETION, httpError: 400 })
    const http = await t.throwsAsync(collect(kind.client(refused.url).generate({ tokens: PROMPT })), { instanceOf: EngineError })
    t.is(http.code, 'engine-http-error')
    t.is(http.status, 400)
    t.is(http.engineMessage, 'the prompt is too long for this model')
    await refused.close()
    const failing = await kind.start({ completion: COMPLETION, failAfter: 3 })
    const seen: number[] = []
    const mid = await t.throwsAsync(
      (async () => {
        for await (const s of kind.client(failing.url).generate({ tokens: PROMPT })) seen.push(...s.tokens)
      })(),
      { instanceOf: EngineError },
    )
    t.is(mid.code, 'engine-stream-error')
    t.regex(mid.message, /CUDA out of memory/)
    t.deepEqual(seen, COMPLETION.slice(0, 3), 'the steps before the failure came through')
    await failing.close()
  })

  test(`${kind.name}: a dropped connection, a stalled engine and a closed port`, async (t) => {
    const dropping = await kind.start({ completion: COMPLETION, dropAfter: 2 })
    t.is((await t.throwsAsync(collect(kind.client(dropping.url).generate({ tokens: PROMPT })), { instanceOf: EngineError })).code, 'engine-connection-error')
    await dropping.close()
    const stalling = await kind.start({ completion: COMPLETION, stallAfter: 2 })
    const stalled = await t.throwsAsync(collect(kind.client(stalling.url, { readTimeoutMs: 300 }).generate({ tokens: PROMPT })), { instanceOf: EngineError })
    t.is(stalled.code, 'engine-read-timeout')
    await stalling.close()
    const gone = await kind.start({ completion: COMPLETION })
    const url = gone.url
    await gone.close()
    t.is((await t.throwsAsync(collect(kind.client(url).generate({ tokens: PROMPT })), { instanceOf: EngineError })).code, 'engine-connection-error')
  })

  test(`${kind.name}: an abort or an early break closes the connection, and the engine sees it`, async (t) => {
    const engine = await kind.start({ completion: COMPLETION, delayMs: 20 })
    t.teardown(() => engine.close())
    const controller = new AbortController()
    const aborted = await t.throwsAsync(
      (async () => {
        let n = 0
        for await (const _ of kind.client(engine.url).generate({ tokens: PROMPT, signal: controller.signal })) if (++n === 2) controller.abort()
      })(),
      { instanceOf: EngineError },
    )
    t.is(aborted.code, 'engine-aborted')
    for await (const _ of kind.client(engine.url).generate({ tokens: PROMPT })) break
    for (let i = 0; i < 50 && engine.clientClosed < 2; i++) await new Promise((resolve) => setTimeout(resolve, 20))
    t.is(engine.clientClosed, 2)
  })

  test(`${kind.name}: a consumer that does not read holds the engine back (bounded buffering)`, async (t) => {
    const completion = Array.from({ length: 20_000 }, (_, i) => 1000 + (i % 500))
    const engine = await kind.start({ completion, padding: 2000 })
    t.teardown(() => engine.close())
    const iterator = kind.client(engine.url).generate({ tokens: PROMPT, maxTokens: 20_000 })[Symbol.asyncIterator]()
    await iterator.next()
    await new Promise((resolve) => setTimeout(resolve, 800))
    t.true(engine.blockedWrites > 0, 'the engine had to wait for the client')
    t.true(engine.maxBuffered < 4 << 20, `at most ${engine.maxBuffered} bytes waited on the engine side`)
    await iterator.return!()
  })
}

test('an event larger than the limit is a protocol error, not a buffer that grows', async (t) => {
  const engine = await fakeVllm({ completion: COMPLETION, padding: 200_000 })
  t.teardown(() => engine.close())
  const error = await t.throwsAsync(collect(new VllmEngine({ url: engine.url, maxEventBytes: 100_000 }).generate({ tokens: PROMPT })), { instanceOf: EngineError })
  t.is(error.code, 'engine-protocol-error')
})

test('SGLang: cumulative and incremental output_ids are told apart, also from meta_info alone', async (t) => {
  for (const incremental of [false, true]) {
    for (const chunk of [1, 2, 5]) {
      const engine = await fakeSglang({ completion: COMPLETION, chunk, incremental })
      for (const option of ['auto', incremental] as const) {
        const { tokens } = await collect(new SglangEngine({ url: engine.url, incremental: option }).generate({ tokens: PROMPT }))
        t.deepEqual(tokens, COMPLETION, `incremental ${incremental}, chunk ${chunk}, option ${option}`)
      }
      await engine.close()
    }
  }
})

test('requests and options are checked: TypeError or RangeError naming the field', (t) => {
  const engine = new VllmEngine({ url: 'http://127.0.0.1:1' })
  t.throws(() => engine.generate({ tokens: [1, -2] }), { instanceOf: RangeError, message: /tokens\[1\]/ })
  t.throws(() => engine.generate({ tokens: [1], maxTokens: 0 }), { instanceOf: RangeError, message: /maxTokens/ })
  t.throws(() => engine.generate({ tokens: [1], temperature: Number.NaN }), { instanceOf: RangeError, message: /temperature/ })
  t.throws(() => engine.generate({ tokens: [1], stopTokens: [200002, 200007] }), { instanceOf: RangeError, message: /<\|end\|>/ })
  t.throws(() => engine.generate({ tokens: 'hi' as never }), { instanceOf: TypeError, message: /tokens/ })
  t.throws(() => new VllmEngine({} as never), { instanceOf: TypeError, message: /url/ })
  t.throws(() => new VllmEngine({ url: 'ftp://x' }), { instanceOf: TypeError, message: /http/ })
  t.throws(() => new SglangEngine({ url: 'http://x', readTimeoutMs: -1 }), { instanceOf: TypeError, message: /readTimeoutMs/ })
  t.throws(() => new LlamaCppEngine({ url: 'http://x', model: 'm' } as never), { instanceOf: TypeError, message: /unknown option 'model'/ })
  t.throws(() => createEngine('tgi' as never, {}), { instanceOf: TypeError, message: /unknown engine/ })
  t.true(createEngine('replay', { completions: [[1]] }) instanceof ReplayEngine)
})
