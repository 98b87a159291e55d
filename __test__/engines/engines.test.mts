/**
 * The engine clients against local servers that speak each engine's wire format (helpers/fake-engines.mts):
 * the ids assembled, the exact request fields each engine expects, the stop token whether the engine puts it
 * in the ids or only in its stop reason, finish reasons and usage, HTTP and mid-stream errors, stalls, slow
 * heads, dropped connections, aborts and early exits the server observes, backpressure, loose SSE framing,
 * oversized events; the replay engine; and bad requests and options.
 */
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { type AddressInfo, createServer as createTcpServer, type Socket } from 'node:net'

import test, { type ExecutionContext } from 'ava'

import {
  createEngine,
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_READ_TIMEOUT_MS,
  EngineError,
  type EngineStep,
  type GenerateRequest,
  LAST_MODEL_TOKEN,
  LlamaCppEngine,
  ReplayEngine,
  SglangEngine,
  TrtllmEngine,
  VllmEngine,
} from 'harmony-stream/engines'

import {
  type FakeBehaviour,
  type FakeEngine,
  fakeLlamaCpp,
  fakeSglang,
  fakeTrtllm,
  fakeVllm,
  fakeVllmGenerate,
} from '../helpers/fake-engines.mjs'
import { untilStalled } from '../helpers/stall.mjs'
import { until } from '../helpers/until.mjs'

const START = 200006
const END = 200007
const MESSAGE = 200008
const CHANNEL = 200005
const CONSTRAIN = 200003
const RETURN = 200002
const CALL = 200012
const ENDOFTEXT = 199999

/** Ordinary ids standing for text (the clients never look at them). */
const text = (n: number, from: number) => Array.from({ length: n }, (_, i) => from + ((i * 7919) % 5000))
const PROMPT = [START, 882, MESSAGE, ...text(9, 1000), END, START, 173781]
/** Analysis, `<|end|>` (not a stop token), then a tool call ending with `<|call|>`. */
const COMPLETION = [
  CHANNEL,
  35644,
  MESSAGE,
  ...text(6, 2000),
  END,
  START,
  173781,
  CHANNEL,
  12606,
  316,
  28,
  CONSTRAIN,
  4108,
  MESSAGE,
  ...text(5, 3000),
  CALL,
]

interface Kind {
  name: string
  start(behaviour: FakeBehaviour): Promise<FakeEngine>
  client(url: string, options?: Record<string, unknown>): { generate(request: GenerateRequest): AsyncIterable<EngineStep> }
  /** Whether the engine can leave the stop id out of its ids (naming it only in its stop reason). */
  stopOutOfIds: boolean
}

const KINDS: Kind[] = [
  { name: 'vllm', start: fakeVllm, client: (url, o = {}) => new VllmEngine({ url, model: 'gpt-oss', ...o }), stopOutOfIds: true },
  {
    name: 'vllm generate',
    start: fakeVllmGenerate,
    client: (url, o = {}) => new VllmEngine({ url, api: 'generate', ...o }),
    stopOutOfIds: false,
  },
  { name: 'sglang', start: fakeSglang, client: (url, o = {}) => new SglangEngine({ url, ...o }), stopOutOfIds: true },
  {
    name: 'sglang incremental',
    start: (b) => fakeSglang({ ...b, incremental: true }),
    client: (url, o = {}) => new SglangEngine({ url, ...o }),
    stopOutOfIds: true,
  },
  { name: 'llamacpp', start: fakeLlamaCpp, client: (url, o = {}) => new LlamaCppEngine({ url, ...o }), stopOutOfIds: false },
  { name: 'trtllm', start: fakeTrtllm, client: (url, o = {}) => new TrtllmEngine({ url, model: 'gpt-oss', ...o }), stopOutOfIds: true },
]

async function collect(steps: AsyncIterable<EngineStep>): Promise<{ tokens: number[]; steps: EngineStep[] }> {
  const all: EngineStep[] = []
  for await (const s of steps) all.push(s)
  return { tokens: all.flatMap((s) => Array.from(s.tokens)), steps: all }
}

async function engineError(t: ExecutionContext, run: Promise<unknown>, code: string): Promise<EngineError> {
  const error = await t.throwsAsync(run, { instanceOf: EngineError })
  t.is(error?.code, code, error?.message)
  return error!
}

for (const kind of KINDS) {
  test(`${kind.name}: the completion's ids, one stop token, finish reason and usage, at chunk sizes 1, 3 and 7`, async (t) => {
    for (const chunk of [1, 3, 7]) {
      for (const stopInIds of kind.stopOutOfIds ? [false, true] : [true]) {
        const engine = await kind.start({ completion: COMPLETION, chunk, stopInIds })
        try {
          const { tokens, steps } = await collect(
            kind.client(engine.url).generate({ tokens: PROMPT, maxTokens: 500, temperature: 0.5, topP: 0.9, seed: 7 }),
          )
          const where = `chunk ${chunk}, stop in ids: ${stopInIds}`
          t.deepEqual(tokens, COMPLETION, where)
          t.is(tokens.filter((id) => id === CALL).length, 1, `${where}: the stop token once`)
          t.is(steps.at(-1)!.finishReason, 'stop', where)
          t.true(
            steps.slice(0, -1).every((s) => s.finishReason === undefined && s.usage === undefined && s.tokens.length > 0),
            `${where}: finish and usage on the last step only, no empty steps before`,
          )
          t.true(steps.every((s) => s.tokens instanceof Uint32Array))
          t.deepEqual(steps.at(-1)!.usage, { promptTokens: PROMPT.length, completionTokens: COMPLETION.length }, where)
        } finally {
          await engine.close()
        }
      }
    }
  })

  test(`${kind.name}: the request carries exactly what the engine expects`, async (t) => {
    const engine = await kind.start({ completion: COMPLETION })
    t.teardown(() => engine.close())
    const prompt = Uint32Array.from(PROMPT)
    await collect(
      kind
        .client(engine.url, { headers: { authorization: 'Bearer k' } })
        .generate({ tokens: prompt, maxTokens: 64, temperature: 0.25, topP: 0.75, seed: 11 }),
    )
    await collect(kind.client(engine.url).generate({ tokens: PROMPT, stopTokens: [RETURN] }))
    const [full, bare] = engine.bodies
    const sampling = { stop_token_ids: [RETURN, CALL, ENDOFTEXT], skip_special_tokens: false, temperature: 0.25, top_p: 0.75 }
    if (kind.name === 'vllm') {
      const stream = { stream: true, stream_options: { include_usage: true } }
      t.deepEqual(full, { model: 'gpt-oss', prompt: PROMPT, max_tokens: 64, return_token_ids: true, ...sampling, seed: 11, ...stream })
      t.deepEqual(
        bare,
        {
          model: 'gpt-oss',
          prompt: PROMPT,
          max_tokens: 8192,
          return_token_ids: true,
          stop_token_ids: [RETURN],
          skip_special_tokens: false,
          ...stream,
        },
        'max_tokens is always sent (vLLM would stop at 16)',
      )
    } else if (kind.name === 'vllm generate') {
      const stream = { stream: true, stream_options: { include_usage: true } }
      t.deepEqual(full, { token_ids: PROMPT, sampling_params: { ...sampling, seed: 11, max_tokens: 64 }, ...stream })
      t.deepEqual(
        bare,
        { token_ids: PROMPT, sampling_params: { stop_token_ids: [RETURN], skip_special_tokens: false }, ...stream },
        'no max_tokens: the server allows the rest of the context',
      )
    } else if (kind.name.startsWith('sglang')) {
      t.deepEqual(full, { input_ids: PROMPT, sampling_params: { max_new_tokens: 64, ...sampling, sampling_seed: 11 }, stream: true })
      t.deepEqual(
        bare,
        {
          input_ids: PROMPT,
          sampling_params: { max_new_tokens: null, stop_token_ids: [RETURN], skip_special_tokens: false },
          stream: true,
        },
        'null: until the context is full',
      )
    } else if (kind.name === 'trtllm') {
      // Only CompletionRequest's own fields: the server refuses any other (the stand-in too, see its test below).
      const stream = { stream: true, stream_options: { include_usage: true } }
      const tokens = { skip_special_tokens: false, detokenize: false }
      t.deepEqual(full, {
        model: 'gpt-oss',
        prompt: PROMPT,
        max_tokens: 64,
        stop_token_ids: [RETURN, CALL, ENDOFTEXT],
        ...tokens,
        temperature: 0.25,
        top_p: 0.75,
        seed: 11,
        ...stream,
      })
      t.deepEqual(
        bare,
        { model: 'gpt-oss', prompt: PROMPT, stop_token_ids: [RETURN], ...tokens, ...stream },
        "no max_tokens: the engine's own limit",
      )
    } else {
      t.deepEqual(full, {
        prompt: PROMPT,
        n_predict: 64,
        stream: true,
        return_tokens: true,
        cache_prompt: true,
        temperature: 0.25,
        top_p: 0.75,
        seed: 11,
      })
      t.deepEqual(bare, { prompt: PROMPT, n_predict: -1, stream: true, return_tokens: true, cache_prompt: true })
    }
    t.is(engine.headers[0].authorization, 'Bearer k', 'extra headers are sent')
    t.is(engine.headers[0]['content-type'], 'application/json')
    t.is(engine.headers[1].authorization, undefined)
  })

  test(`${kind.name}: the token limit ends with finish reason length`, async (t) => {
    const engine = await kind.start({ completion: COMPLETION, chunk: 2 })
    t.teardown(() => engine.close())
    for (const maxTokens of [1, 9, COMPLETION.length - 1]) {
      const { tokens, steps } = await collect(kind.client(engine.url).generate({ tokens: PROMPT, maxTokens }))
      t.deepEqual(tokens, COMPLETION.slice(0, maxTokens), `maxTokens ${maxTokens}`)
      t.is(steps.at(-1)!.finishReason, 'length', `maxTokens ${maxTokens}`)
      t.is(steps.at(-1)!.usage?.completionTokens, maxTokens)
    }
  })

  test(`${kind.name}: HTTP errors and mid-stream errors are EngineErrors with the engine's status and message`, async (t) => {
    for (const status of [400, 503]) {
      const refused = await kind.start({ completion: COMPLETION, httpError: status })
      const code = status === 503 ? 'engine-overloaded' : 'engine-http-error'
      const error = await engineError(t, collect(kind.client(refused.url).generate({ tokens: PROMPT })), code)
      t.is(error.status, status)
      t.is(error.engineMessage, 'the prompt is too long for this model')
      t.is(error.engine, (kind.client(refused.url) as unknown as { name: string }).name)
      await refused.close()
    }
    const plain = await kind.start({ completion: COMPLETION, httpError: 502, httpErrorText: 'Bad Gateway from the proxy in front' })
    const proxied = await engineError(t, collect(kind.client(plain.url).generate({ tokens: PROMPT })), 'engine-http-error')
    t.is(proxied.status, 502)
    t.is(proxied.engineMessage, 'Bad Gateway from the proxy in front', 'not JSON: the raw text')
    await plain.close()
    for (const errorFraming of ['data', 'line'] as const) {
      if (errorFraming === 'line' && kind.name !== 'llamacpp') continue
      const failing = await kind.start({ completion: COMPLETION, failAfter: 3, errorFraming })
      const seen: number[] = []
      const mid = await engineError(
        t,
        (async () => {
          for await (const s of kind.client(failing.url).generate({ tokens: PROMPT })) seen.push(...s.tokens)
        })(),
        'engine-stream-error',
      )
      t.is(mid.engineMessage, 'CUDA out of memory')
      t.deepEqual(seen, COMPLETION.slice(0, 3), 'the steps before the failure came through')
      await failing.close()
    }
  })

  test(`${kind.name}: a dropped connection, a stalled engine, a closed port`, async (t) => {
    const dropping = await kind.start({ completion: COMPLETION, dropAfter: 2 })
    await engineError(t, collect(kind.client(dropping.url).generate({ tokens: PROMPT })), 'engine-connection-error')
    await dropping.close()
    const stalling = await kind.start({ completion: COMPLETION, stallAfter: 2 })
    const started = Date.now()
    await engineError(t, collect(kind.client(stalling.url, { readTimeoutMs: 300 }).generate({ tokens: PROMPT })), 'engine-read-timeout')
    // The option's timeout, not the default one: a bound between them that a loaded machine does not reach.
    t.true(Date.now() - started < DEFAULT_READ_TIMEOUT_MS / 2, 'the read timeout, not a longer one')
    await stalling.close()
    const gone = await kind.start({ completion: COMPLETION })
    const url = gone.url
    await gone.close()
    await engineError(t, collect(kind.client(url).generate({ tokens: PROMPT })), 'engine-connection-error')
  })

  test(`${kind.name}: the response head may take longer than the connect timeout (prefill), not longer than the read timeout`, async (t) => {
    // A connect timeout a loaded machine stays within: a busy event loop holds the connection's event back
    // past its timer (a loaded run hit 400 ms and 1,000 ms: the file runs forty tests at once). The head comes
    // later than that timeout after the request arrived, so after the connection too.
    const slow = await kind.start({ completion: COMPLETION, headDelayMs: 6000 })
    t.teardown(() => slow.close())
    const { tokens } = await collect(kind.client(slow.url, { connectTimeoutMs: 5000, readTimeoutMs: 60_000 }).generate({ tokens: PROMPT }))
    t.deepEqual(tokens, COMPLETION)
    const silent = await kind.start({ completion: COMPLETION, headDelayMs: -1 })
    t.teardown(() => silent.close())
    await engineError(
      t,
      collect(kind.client(silent.url, { connectTimeoutMs: 5000, readTimeoutMs: 1000 }).generate({ tokens: PROMPT })),
      'engine-read-timeout',
    )
    t.true(await until(() => silent.clientClosed === 1), 'the client hung up')
  })

  test(`${kind.name}: an abort or an early break closes the connection, and the engine sees it`, async (t) => {
    const engine = await kind.start({ completion: COMPLETION, delayMs: 20 })
    t.teardown(() => engine.close())
    const controller = new AbortController()
    let steps = 0
    await engineError(
      t,
      (async () => {
        for await (const _ of kind.client(engine.url).generate({ tokens: PROMPT, signal: controller.signal }))
          if (++steps === 2) controller.abort()
      })(),
      'engine-aborted',
    )
    t.is(steps, 2, 'nothing after the abort')
    t.true(await until(() => engine.clientClosed === 1), 'the engine saw the abort')
    for await (const _ of kind.client(engine.url).generate({ tokens: PROMPT })) break
    t.true(await until(() => engine.clientClosed === 2), 'the engine saw the break')
    t.true(
      engine.closes.every((c) => c.chunks < COMPLETION.length),
      'both before the stream ended',
    )
    // Aborted while the consumer holds a step and reads nothing: the connection goes at once all the same.
    const busy = new AbortController()
    const iterator = kind.client(engine.url).generate({ tokens: PROMPT, signal: busy.signal })[Symbol.asyncIterator]()
    await iterator.next()
    busy.abort()
    t.true(await until(() => engine.clientClosed === 3, 10_000), 'closed without another next()')
    await engineError(t, iterator.next(), 'engine-aborted')
    // Aborted before the request went out: nothing is sent.
    const before = engine.bodies.length
    await engineError(t, collect(kind.client(engine.url).generate({ tokens: PROMPT, signal: AbortSignal.abort() })), 'engine-aborted')
    t.is(engine.bodies.length, before)
  })

  test(`${kind.name}: a connection dropped while the consumer is busy is a connection error, not a read timeout`, async (t) => {
    const engine = await kind.start({ completion: COMPLETION, dropAfter: 2 })
    t.teardown(() => engine.close())
    // A read timeout far longer than the test: a drop noticed only when the consumer reads again would be one.
    const iterator = kind.client(engine.url, { readTimeoutMs: 60_000 }).generate({ tokens: PROMPT })[Symbol.asyncIterator]()
    await iterator.next()
    // The consumer holds its step until the engine has dropped the connection (not a fixed time).
    t.true(await until(() => engine.dropped === 1, 10_000), 'the engine dropped the connection')
    await engineError(
      t,
      (async () => {
        for (let next = await iterator.next(); !next.done; next = await iterator.next());
      })(),
      'engine-connection-error',
    )
  })

  test(`${kind.name}: a consumer that does not read holds the engine back (bounded buffering), and loses nothing`, async (t) => {
    const completion = Array.from({ length: 40_000 }, (_, i) => 1000 + (i % 500))
    const padding = 2000
    const engine = await kind.start({ completion, padding })
    t.teardown(() => engine.close())
    const iterator = kind.client(engine.url).generate({ tokens: PROMPT, maxTokens: 40_000 })[Symbol.asyncIterator]()
    await iterator.next()
    // How soon the buffers fill depends on the machine's load: waited for, not a fixed time.
    t.true(await until(() => engine.blockedWrites > 0, 20_000), 'the engine had to wait for the client')
    const sent = await untilStalled(() => engine.bytesSent, 1 << 20)
    t.true(sent < 16 << 20, `${sent} of at least ${completion.length * padding} bytes went out: the rest waits in the engine`)
    t.true(engine.bytesSent - sent < 1 << 20, 'and it stays waiting')
    await iterator.return!()
    t.true(await until(() => engine.clientClosed === 1), 'return() closed the connection')
    // A slow consumer gets everything once it reads again.
    const small = await kind.start({ completion: completion.slice(0, 2000), padding: 3000 })
    const slow = kind.client(small.url).generate({ tokens: PROMPT, maxTokens: 2000 })[Symbol.asyncIterator]()
    const got: number[] = [...(await slow.next()).value.tokens]
    t.true(await until(() => small.blockedWrites > 0, 20_000), 'the engine waits for the slow consumer')
    for (let next = await slow.next(); !next.done; next = await slow.next()) got.push(...next.value.tokens)
    t.deepEqual(got, completion.slice(0, 2000))
    await small.close()
  })

  test(`${kind.name}: SSE framed loosely (CRLF, comments, multi-line data, bytes split anywhere) reads the same`, async (t) => {
    const engine = await kind.start({ completion: COMPLETION, chunk: 4, looseFraming: true, stopInIds: true })
    t.teardown(() => engine.close())
    const { tokens, steps } = await collect(kind.client(engine.url).generate({ tokens: PROMPT }))
    t.deepEqual(tokens, COMPLETION)
    t.is(steps.at(-1)!.finishReason, 'stop')
  })

  test(`${kind.name}: an event larger than the limit is a protocol error, not a buffer that grows`, async (t) => {
    const engine = await kind.start({ completion: COMPLETION, padding: 200_000 })
    t.teardown(() => engine.close())
    await engineError(t, collect(kind.client(engine.url, { maxEventBytes: 100_000 }).generate({ tokens: PROMPT })), 'engine-protocol-error')
    t.true(await until(() => engine.clientClosed === 1), 'the client hung up')
    t.true(engine.closes[0].chunks < COMPLETION.length, 'before the stream ended')
    const { tokens } = await collect(kind.client(engine.url, { maxEventBytes: 300_000 }).generate({ tokens: PROMPT }))
    t.deepEqual(tokens, COMPLETION, 'under the limit, the same events are fine')
  })
}

test('vLLM generate: a stream that ends without a finish reason (no new ids in the last output) is read from its last id', async (t) => {
  const stopping = await fakeVllmGenerate({ completion: COMPLETION, chunk: 3, stopInIds: true, omitFinish: true })
  const { tokens, steps } = await collect(new VllmEngine({ url: stopping.url, api: 'generate' }).generate({ tokens: PROMPT }))
  t.deepEqual(tokens, COMPLETION)
  t.is(steps.at(-1)!.finishReason, 'stop')
  t.is(steps.at(-1)!.usage?.completionTokens, COMPLETION.length)
  const cut = await collect(new VllmEngine({ url: stopping.url, api: 'generate' }).generate({ tokens: PROMPT, maxTokens: 10 }))
  t.deepEqual(cut.tokens, COMPLETION.slice(0, 10))
  t.is(cut.steps.at(-1)!.finishReason, 'length')
  await stopping.close()
})

test('SGLang: cumulative and incremental output_ids are told apart, with or without the stop id, and by option', async (t) => {
  for (const incremental of [false, true]) {
    for (const chunk of [1, 2, 5]) {
      for (const stopInIds of [false, true]) {
        const engine = await fakeSglang({ completion: COMPLETION, chunk, incremental, stopInIds })
        for (const option of ['auto', incremental] as const) {
          const { tokens } = await collect(new SglangEngine({ url: engine.url, incremental: option }).generate({ tokens: PROMPT }))
          t.deepEqual(tokens, COMPLETION, `incremental ${incremental}, chunk ${chunk}, stop in ids ${stopInIds}, option ${option}`)
        }
        await engine.close()
      }
    }
  }
  // The wrong option is noticed where it can be: cumulative ids read as incremental repeat, the other way round
  // they do not extend what came before.
  const cumulative = await fakeSglang({ completion: COMPLETION, chunk: 2 })
  const { tokens } = await collect(new SglangEngine({ url: cumulative.url, incremental: true }).generate({ tokens: PROMPT }))
  t.notDeepEqual(tokens, COMPLETION)
  await cumulative.close()
  const incrementalServer = await fakeSglang({ completion: COMPLETION, chunk: 2, incremental: true })
  await engineError(
    t,
    collect(new SglangEngine({ url: incrementalServer.url, incremental: false }).generate({ tokens: PROMPT })),
    'engine-protocol-error',
  )
  await incrementalServer.close()
})

test('llama.cpp: the client ends generation at the first stop id itself when the server would go on, and closes the connection', async (t) => {
  const completion = [...COMPLETION.slice(0, -1), RETURN, ...text(30, 4000), CALL]
  const engine = await fakeLlamaCpp({ completion, chunk: 3, ignoreStops: true, delayMs: 5 })
  t.teardown(() => engine.close())
  const { tokens, steps } = await collect(new LlamaCppEngine({ url: engine.url }).generate({ tokens: PROMPT }))
  t.deepEqual(tokens, completion.slice(0, COMPLETION.length))
  t.is(steps.at(-1)!.finishReason, 'stop')
  t.deepEqual(steps.at(-1)!.usage, { promptTokens: PROMPT.length, completionTokens: COMPLETION.length })
  t.true(await until(() => engine.clientClosed === 1), 'llama.cpp sees the connection close and frees the slot')
  // Only <|call|> stops this request: generation goes on past <|return|>.
  const longer = await collect(new LlamaCppEngine({ url: engine.url }).generate({ tokens: PROMPT, stopTokens: [CALL] }))
  t.deepEqual(longer.tokens, completion)
  t.is(longer.steps.at(-1)!.finishReason, 'stop')
})

test('https: a server that never completes the TLS handshake is a connect timeout', async (t) => {
  const sockets: Socket[] = []
  // Reads (and ignores) the ClientHello, so it sees the client hang up.
  const server = createTcpServer((socket) => void sockets.push(socket.resume())).listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => {
    for (const socket of sockets) socket.destroy()
    server.close()
  })
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`
  const started = Date.now()
  await engineError(t, collect(new VllmEngine({ url, connectTimeoutMs: 200 }).generate({ tokens: PROMPT })), 'engine-connect-timeout')
  // The option's timeout, not the default one: a bound between them that a loaded machine does not reach.
  t.true(Date.now() - started < DEFAULT_CONNECT_TIMEOUT_MS / 2)
  t.true(await until(() => sockets.length === 1 && sockets[0].destroyed), `the client hung up: ${sockets.map((s) => s.destroyed)}`)
})

test("headers go out once each, the client's own last, and credentials in the URL as Basic authorization", async (t) => {
  const seen: string[][] = []
  const server = createServer((request, response) => {
    seen.push(request.rawHeaders)
    request.resume()
    response.writeHead(200, { 'content-type': 'text/event-stream' }).end(data('[DONE]'))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => server.close())
  const { port } = server.address() as AddressInfo
  const headers = { Accept: 'application/json', 'Content-Type': 'text/plain', 'X-Trace': 'a' }
  await collect(new VllmEngine({ url: `http://127.0.0.1:${port}`, headers }).generate({ tokens: PROMPT })).catch(() => {})
  await collect(new VllmEngine({ url: `http://us%40er:p%3Ass@127.0.0.1:${port}` }).generate({ tokens: PROMPT })).catch(() => {})
  const named = (raw: string[], name: string) =>
    raw.flatMap((value, i) => (i % 2 === 0 && value.toLowerCase() === name ? [raw[i + 1]] : []))
  const [first, second] = seen
  // The caller's accept replaces the client's; the client's content-type (the body's framing) replaces the caller's.
  t.deepEqual(named(first!, 'accept'), ['application/json'])
  t.deepEqual(named(first!, 'content-type'), ['application/json'])
  t.deepEqual(named(first!, 'x-trace'), ['a'])
  t.deepEqual(named(second!, 'authorization'), [`Basic ${Buffer.from('us@er:p:ss').toString('base64')}`])
  t.deepEqual(named(first!, 'authorization'), [])
})

/** A server answering every request with `frames` as SSE: for streams no fake engine sends on its own. */
async function raw(frames: string[]): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((_req: IncomingMessage, res: ServerResponse) => {
    _req.resume()
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    for (const frame of frames) res.write(frame)
    res.end()
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

const data = (json: unknown) => `data: ${typeof json === 'string' ? json : JSON.stringify(json)}\n\n`

test('streams that break the wire format are protocol errors', async (t) => {
  const cases: [string, (url: string) => { generate(request: GenerateRequest): AsyncIterable<EngineStep> }, string[]][] = [
    ['vllm: not JSON', (url) => new VllmEngine({ url }), [data('{"choices": [')]],
    [
      'vllm: ids that are not ids',
      (url) => new VllmEngine({ url }),
      [data({ choices: [{ index: 0, token_ids: [1, -1], finish_reason: null }] })],
    ],
    [
      'vllm: no finish reason before [DONE]',
      (url) => new VllmEngine({ url }),
      [data({ choices: [{ index: 0, token_ids: [1], finish_reason: null }] }), data('[DONE]')],
    ],
    [
      'vllm: ids after the finish reason',
      (url) => new VllmEngine({ url }),
      [
        data({ choices: [{ index: 0, token_ids: [1], finish_reason: 'length' }] }),
        data({ choices: [{ index: 0, token_ids: [2], finish_reason: null }] }),
      ],
    ],
    [
      'vllm generate: cut short without [DONE]',
      (url) => new VllmEngine({ url, api: 'generate' }),
      [data({ choices: [{ index: 0, token_ids: [1], finish_reason: null }] })],
    ],
    [
      'sglang: no finish reason',
      (url) => new SglangEngine({ url }),
      [data({ output_ids: [1], meta_info: { finish_reason: null } }), data('[DONE]')],
    ],
    [
      'sglang: cumulative ids that change the past',
      (url) => new SglangEngine({ url, incremental: false }),
      [
        data({ output_ids: [1, 2], meta_info: { finish_reason: null } }),
        data({ output_ids: [1, 3, 4], meta_info: { finish_reason: null } }),
      ],
    ],
    ['llamacpp: no final chunk', (url) => new LlamaCppEngine({ url }), [data({ tokens: [1], stop: false })]],
    ['llamacpp: an array for a chunk', (url) => new LlamaCppEngine({ url }), [data([1, 2])]],
  ]
  for (const [name, client, frames] of cases) {
    const server = await raw(frames)
    const error = await t.throwsAsync(collect(client(server.url).generate({ tokens: PROMPT })), { instanceOf: EngineError }, name)
    t.is(error?.code, 'engine-protocol-error', `${name}: ${error?.message}`)
    await server.close()
  }
})

test('finish reasons the engines report otherwise: vLLM abort, SGLang abort with and without a message, llama.cpp limit', async (t) => {
  const vllm = await raw([data({ choices: [{ index: 0, token_ids: [5], finish_reason: 'abort', stop_reason: null }] }), data('[DONE]')])
  t.is((await collect(new VllmEngine({ url: vllm.url }).generate({ tokens: PROMPT }))).steps.at(-1)!.finishReason, 'abort')
  await vllm.close()
  const sglang = await raw([
    data({ output_ids: [5], meta_info: { finish_reason: { type: 'abort' }, prompt_tokens: 3, completion_tokens: 1 } }),
    data('[DONE]'),
  ])
  const aborted = await collect(new SglangEngine({ url: sglang.url }).generate({ tokens: PROMPT }))
  t.is(aborted.steps.at(-1)!.finishReason, 'abort')
  t.deepEqual(aborted.steps.at(-1)!.usage, { promptTokens: 3, completionTokens: 1 }, "the engine's own counts")
  await sglang.close()
  const refused = await raw([
    data({ output_ids: [], meta_info: { finish_reason: { type: 'abort', message: 'Input length exceeds the context' } } }),
    data('[DONE]'),
  ])
  const error = await engineError(t, collect(new SglangEngine({ url: refused.url }).generate({ tokens: PROMPT })), 'engine-stream-error')
  t.is(error.engineMessage, 'Input length exceeds the context')
  await refused.close()
  const llama = await raw([
    data({ tokens: [5, 6], stop: false }),
    data({ tokens: [], stop: true, stop_type: 'limit', tokens_predicted: 2, tokens_evaluated: 4 }),
  ])
  const limited = await collect(new LlamaCppEngine({ url: llama.url }).generate({ tokens: PROMPT }))
  t.deepEqual(limited.tokens, [5, 6])
  t.is(limited.steps.at(-1)!.finishReason, 'length')
  t.deepEqual(limited.steps.at(-1)!.usage, { promptTokens: 4, completionTokens: 2 })
  await llama.close()
})

test('a base URL with a path keeps it', async (t) => {
  const seen: string[] = []
  const server = createServer((req, res) => {
    seen.push(req.url!)
    req.resume()
    res.writeHead(404).end()
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => server.close())
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/engines/a`
  for (const client of [
    new VllmEngine({ url: base }),
    new VllmEngine({ url: `${base}/`, api: 'generate' }),
    new SglangEngine({ url: base }),
    new LlamaCppEngine({ url: base }),
  ]) {
    await t.throwsAsync(collect(client.generate({ tokens: PROMPT })), { instanceOf: EngineError })
  }
  t.deepEqual(seen, ['/engines/a/v1/completions', '/engines/a/inference/v1/generate', '/engines/a/generate', '/engines/a/completion'])
})

test('replay: interval tokens per step, one step per event-loop turn, round-robin, replayIndex and pick', async (t) => {
  const a = [1, 2, 3, 4, 5, RETURN]
  const b = [7, 8, CALL]
  const engine = new ReplayEngine({ completions: [a, b], interval: 4 })
  t.is(engine.name, 'replay')
  const first = await collect(engine.generate({ tokens: PROMPT }))
  t.deepEqual(
    first.steps.map((s) => Array.from(s.tokens)),
    [
      [1, 2, 3, 4],
      [5, RETURN],
    ],
  )
  t.deepEqual(first.steps.at(-1)!.usage, { promptTokens: PROMPT.length, completionTokens: a.length })
  t.deepEqual((await collect(engine.generate({ tokens: PROMPT }))).tokens, b, 'round-robin')
  t.deepEqual((await collect(engine.generate({ tokens: PROMPT }))).tokens, a)
  t.deepEqual((await collect(engine.generate({ tokens: PROMPT, replayIndex: 1 } as GenerateRequest))).tokens, b, 'replayIndex')
  t.throws(() => engine.generate({ tokens: PROMPT, replayIndex: 2 } as GenerateRequest), { instanceOf: RangeError, message: /replayIndex/ })
  t.deepEqual((await collect(engine.generate({ tokens: PROMPT }))).tokens, b, 'requests with replayIndex take no turn')

  // Two generations interleave, one step each per turn.
  const order: string[] = []
  const ones = new ReplayEngine({ completions: [[1, 2, 3, RETURN]] })
  await Promise.all(
    ['x', 'y'].map(async (name) => {
      for await (const s of ones.generate({ tokens: PROMPT })) order.push(`${name}${s.tokens[0]}`)
    }),
  )
  t.deepEqual(order, ['x1', 'y1', 'x2', 'y2', 'x3', 'y3', `x${RETURN}`, `y${RETURN}`])

  const picked = new ReplayEngine({ completions: [a, b], pick: (request, turn) => (request.tokens.length === 1 ? 1 : turn % 2) })
  t.deepEqual((await collect(picked.generate({ tokens: [42] }))).tokens, b, 'pick from the prompt')
  t.deepEqual((await collect(picked.generate({ tokens: PROMPT }))).tokens, b, 'pick from the turn (turn 1)')
  const wrong = new ReplayEngine({ completions: [a], pick: () => 3 })
  t.throws(() => wrong.generate({ tokens: PROMPT }), { instanceOf: RangeError, message: /pick/ })

  // Each step is the caller's: changing it changes no later replay.
  const steps = (await collect(engine.generate({ tokens: PROMPT, replayIndex: 0 } as GenerateRequest))).steps
  steps[0].tokens.fill(0)
  t.deepEqual((await collect(engine.generate({ tokens: PROMPT, replayIndex: 0 } as GenerateRequest))).tokens, a)
})

test('replay: finish reason stop when the recording is replayed to its end, length when maxTokens cuts it; abort', async (t) => {
  const engine = new ReplayEngine({ completions: [[1, 2, RETURN], [1, 2, CALL], [1, 2, END], [1, 2, 3], []], interval: 2 })
  const finish = async (replayIndex: number, extra: Partial<GenerateRequest> = {}) =>
    (await collect(engine.generate({ tokens: PROMPT, replayIndex, ...extra } as GenerateRequest))).steps.at(-1)!
  for (const index of [0, 1, 2, 3]) t.is((await finish(index)).finishReason, 'stop', `recording ${index} ends where its engine ended it`)
  t.deepEqual(await finish(4), {
    tokens: new Uint32Array(0),
    finishReason: 'stop',
    usage: { promptTokens: PROMPT.length, completionTokens: 0 },
  })
  t.is((await finish(0, { maxTokens: 2 })).finishReason, 'length', 'cut by maxTokens')
  t.deepEqual((await finish(0, { maxTokens: 2 })).usage, { promptTokens: PROMPT.length, completionTokens: 2 })

  const long = new ReplayEngine({ completions: [Array.from({ length: 100 }, (_, i) => i)] })
  const controller = new AbortController()
  const seen: EngineStep[] = []
  for await (const s of long.generate({ tokens: PROMPT, signal: controller.signal })) {
    seen.push(s)
    if (seen.length === 3) controller.abort()
  }
  t.is(seen.length, 4)
  t.deepEqual(seen.at(-1), { tokens: new Uint32Array(0), finishReason: 'abort' })
})

test('requests are checked before anything is sent: TypeError or RangeError naming the field', async (t) => {
  const engine = await fakeVllm({ completion: COMPLETION })
  t.teardown(() => engine.close())
  const clients = [
    new VllmEngine({ url: engine.url }),
    new VllmEngine({ url: engine.url, api: 'generate' }),
    new SglangEngine({ url: engine.url }),
    new LlamaCppEngine({ url: engine.url }),
    new ReplayEngine({ completions: [[1]] }),
  ]
  const bad: [Record<string, unknown>, typeof TypeError | typeof RangeError, RegExp][] = [
    [{ tokens: 'hi' }, TypeError, /tokens must be/],
    [{ tokens: [1, -2] }, RangeError, /tokens\[1\] is -2/],
    [{ tokens: [1, 1.5] }, RangeError, /tokens\[1\]/],
    [{ tokens: [201_089] }, RangeError, /tokens\[0\]/],
    [{ tokens: [1], maxTokens: 0 }, RangeError, /maxTokens/],
    [{ tokens: [1], maxTokens: 2.5 }, RangeError, /maxTokens/],
    [{ tokens: [1], temperature: Number.NaN }, RangeError, /temperature/],
    [{ tokens: [1], temperature: '0.5' }, RangeError, /temperature/],
    [{ tokens: [1], temperature: -1 }, RangeError, /temperature/],
    [{ tokens: [1], topP: Number.POSITIVE_INFINITY }, RangeError, /topP/],
    [{ tokens: [1], seed: 1.5 }, RangeError, /seed/],
    [{ tokens: [1], stopTokens: [RETURN, END] }, RangeError, /<\|end\|>/],
    [{ tokens: [1], stopTokens: [RETURN, -1] }, RangeError, /stopTokens\[1\]/],
    [{ tokens: [1], stopTokens: RETURN }, TypeError, /stopTokens/],
    [{ tokens: [1], signal: {} }, TypeError, /signal/],
  ]
  for (const client of clients) {
    for (const [request, type, message] of bad)
      t.throws(() => client.generate(request as never), { instanceOf: type, message }, `${client.name} ${JSON.stringify(request)}`)
  }
  t.is(engine.bodies.length, 0, 'the engine saw none of them')
  t.notThrows(() =>
    clients[0].generate({
      tokens: new Uint32Array([1, LAST_MODEL_TOKEN]),
      maxTokens: 1,
      temperature: 0,
      topP: 1,
      seed: -3,
      stopTokens: [],
    }),
  )
  // One past the model's vocabulary (the parser's 201088, which the Harmony encoding names and no model has).
  for (const client of clients) {
    t.throws(() => client.generate({ tokens: [1, LAST_MODEL_TOKEN + 1] }), { instanceOf: RangeError, message: /tokens\[1\] is 201088/ })
    t.throws(() => client.generate({ tokens: [1], stopTokens: [LAST_MODEL_TOKEN + 1] }), { instanceOf: RangeError })
  }
})

test('options are checked at construction, and createEngine builds each engine by name', (t) => {
  const bad: [() => unknown, RegExp][] = [
    [() => new VllmEngine(undefined as never), /options must be an object/],
    [() => new VllmEngine({} as never), /option 'url' is required/],
    [() => new VllmEngine({ url: 'not a url' }), /option 'url' is not a URL/],
    [() => new VllmEngine({ url: 'ftp://x' }), /option 'url' must be http or https/],
    [() => new VllmEngine({ url: 'http://x/?a=1' }), /without query/],
    [() => new VllmEngine({ url: 'http://x', api: 'chat' as never }), /option 'api'/],
    [() => new VllmEngine({ url: 'http://x', defaultMaxTokens: 0 }), /option 'defaultMaxTokens'/],
    [() => new VllmEngine({ url: 'http://x', model: '' }), /option 'model'/],
    [() => new SglangEngine({ url: 'http://x', readTimeoutMs: -1 }), /option 'readTimeoutMs'/],
    [() => new SglangEngine({ url: 'http://x', connectTimeoutMs: 1.5 }), /option 'connectTimeoutMs'/],
    [() => new SglangEngine({ url: 'http://x', incremental: 'yes' as never }), /option 'incremental'/],
    [() => new SglangEngine({ url: 'http://x', maxEventBytes: 0 }), /option 'maxEventBytes'/],
    [() => new LlamaCppEngine({ url: 'http://x', headers: { a: 1 } as never }), /option 'headers'/],
    [() => new VllmEngine({ url: 'http://x', headers: { 'x-a': 'one\r\ntwo' } }), /option 'headers': .*x-a/],
    [() => new VllmEngine({ url: 'http://x', headers: { 'a b': 'c' } }), /option 'headers': .*a b/],
    [() => new VllmEngine({ url: 'http://x', headers: { Connection: 'close' } }), /option 'headers' cannot set Connection/],
    [() => new SglangEngine({ url: 'http://x', headers: { 'transfer-encoding': 'chunked' } }), /cannot set transfer-encoding/],
    [() => new LlamaCppEngine({ url: 'http://x', model: 'm' } as never), /unknown option 'model'/],
    [() => new ReplayEngine({ completions: [] }), /option 'completions'/],
    [() => new ReplayEngine({ completions: [[1]], interval: 0 }), /option 'interval'/],
    [() => new ReplayEngine({ completions: [[1]], pick: 1 as never }), /option 'pick'/],
    [() => new ReplayEngine({ completions: [[1]], url: 'x' } as never), /unknown option 'url'/],
    [
      () => new VllmEngine({ url: 'http://x', readTimeoutMS: 5 } as never),
      /VllmEngine: unknown option 'readTimeoutMS' \(did you mean 'readTimeoutMs'\?\)/,
    ],
    [() => createEngine('tgi' as never, {} as never), /unknown engine "tgi" \(replay, vllm, sglang, llamacpp, trtllm\)/],
    [() => createEngine(undefined as never, {} as never), /unknown engine/],
    [() => createEngine('toString' as never, {} as never), /unknown engine/],
    [() => createEngine('vllm', {} as never), /VllmEngine: option 'url'/],
    [() => createEngine('sglang', { url: 'http://x', api: 'generate' } as never), /SglangEngine: unknown option 'api'/],
  ]
  for (const [make, message] of bad) t.throws(make, { instanceOf: TypeError, message })
  t.throws(() => new ReplayEngine({ completions: [[1, -1]] }), { instanceOf: RangeError, message: /completions\[0\]: tokens\[1\]/ })
  t.true(createEngine('replay', { completions: [[1]] }) instanceof ReplayEngine)
  t.true(createEngine('vllm', { url: 'http://127.0.0.1:1', api: 'generate' }) instanceof VllmEngine)
  t.true(createEngine('sglang', { url: 'http://127.0.0.1:1' }) instanceof SglangEngine)
  t.true(createEngine('llamacpp', { url: 'http://127.0.0.1:1' }) instanceof LlamaCppEngine)
  t.deepEqual(
    ['vllm', 'sglang', 'llamacpp'].map((name) => createEngine(name as 'vllm', { url: 'http://127.0.0.1:1' }).name),
    ['vllm', 'sglang', 'llamacpp'],
  )
})

test('trtllm: the stand-in refuses what trtllm-serve refuses, and the client needs a model name', async (t) => {
  const engine = await fakeTrtllm({ completion: COMPLETION })
  t.teardown(() => engine.close())
  const post = (body: Record<string, unknown>) =>
    fetch(new URL('v1/completions', `${engine.url}/`), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
  const unknown = await post({ model: 'm', prompt: [1], return_token_ids: true })
  t.is(unknown.status, 400)
  t.regex(((await unknown.json()) as { message: string }).message, /return_token_ids[\s\S]*Extra inputs are not permitted/)
  t.is((await post({ prompt: [1] })).status, 400)
  t.throws(() => new TrtllmEngine({ url: engine.url } as never), { instanceOf: TypeError, message: /option 'model' is required/ })
  t.true(createEngine('trtllm', { url: engine.url, model: 'm' }) instanceof TrtllmEngine)
  // Without detokenize: false the server sends text and no ids: the client asks for ids.
  const { tokens } = await collect(new TrtllmEngine({ url: engine.url, model: 'm' }).generate({ tokens: PROMPT }))
  const stop = COMPLETION.findIndex((id) => id === RETURN || id === CALL)
  t.deepEqual(tokens, COMPLETION.slice(0, stop + 1))
})

for (const kind of KINDS) {
  test(`${kind.name}: an engine that ignores the token limit is cut at it, finish reason length, and its request closed`, async (t) => {
    const long = [...COMPLETION.filter((id) => id !== RETURN && id !== CALL), ...text(50, 400)]
    const engine = await kind.start({ completion: long, chunk: 3, ignoreLimit: true, delayMs: 10 })
    t.teardown(() => engine.close())
    const { tokens, steps } = await collect(kind.client(engine.url).generate({ tokens: PROMPT, maxTokens: 10 }))
    t.deepEqual(tokens, long.slice(0, 10))
    t.is(steps.at(-1)?.finishReason, 'length')
    t.true(await until(() => engine.clientClosed === 1), 'the engine request was closed')
  })
}
