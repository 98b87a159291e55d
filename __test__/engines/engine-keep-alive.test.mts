/**
 * Kept-alive engine connections (src/engines/keep-alive.ts), on real sockets on 127.0.0.1: generations that follow
 * each other share one connection; a stream cut short, aborted or refused takes its connection with it; a request
 * sent on an idle connection the engine closes at that moment is sent again on a new one, and the engine sees it
 * once; never a request that got any byte of an answer; `keepAlive: false` opens a connection per generation. The
 * tests wait for events (the server's connections closing, the client's pool taking a connection back), never a
 * clock of their own; the idle tests wait for the client's real idle timer (1 to 2 s) and check who closed the
 * connection first, with a second or more between the two sides' timers.
 */
import { once } from 'node:events'
import { createServer, type ServerResponse } from 'node:http'
import { createRequire } from 'node:module'
import { type AddressInfo, createServer as createNetServer, type Server, type Socket } from 'node:net'

import test, { type ExecutionContext } from 'ava'
import { collectSteps, EngineError, LlamaCppEngine, VllmEngine } from 'harmony-stream/engines'

// Through require, as the clients load it: an import of the file would be a second instance, with pools of its own.
const { poolOf } = createRequire(import.meta.url)('../../src/engines/keep-alive.ts') as typeof import('../../src/engines/keep-alive.ts')
const { postEvents } = createRequire(import.meta.url)('../../src/engines/http.ts') as typeof import('../../src/engines/http.ts')

const RETURN = 200002

/** vLLM's /v1/completions chunk (the shape the client reads: see fake-engines.mts). */
const chunk = (ids: number[], finish: string | null = null, stop: number | null = null) =>
  `data: ${JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: 'gpt-oss', choices: [{ index: 0, text: '', logprobs: null, finish_reason: finish, stop_reason: stop, token_ids: ids }] })}\n\n`
const DONE = 'data: [DONE]\n\n'
/** A whole generation of `ids`, ended by the stop id (named in the stop reason only, as vLLM does). */
const generation = (ids: number[]) => chunk(ids.slice(0, -1)) + chunk(ids.slice(-1), 'stop', RETURN) + DONE
/** What the client reads of `generation(ids)`: the ids and the stop id it appends. */
const read = (ids: number[]) => [...ids, RETURN]

interface TestEngine {
  url: string
  /** The connections the server accepted, in order. */
  connections: Socket[]
  /** The requests it answered, in order (their bodies). */
  requests: Record<string, unknown>[]
  close(): Promise<void>
}

async function listening(server: Server | import('node:http').Server): Promise<string> {
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** An engine that answers its `n`th request (from 0) as `answer` says, on a Node HTTP server (which keeps connections alive). */
async function httpEngine(answer: (response: ServerResponse, n: number) => void): Promise<TestEngine> {
  const connections: Socket[] = []
  const requests: Record<string, unknown>[] = []
  const server = createServer(async (request, response) => {
    let text = ''
    for await (const piece of request) text += piece
    requests.push(JSON.parse(text) as Record<string, unknown>)
    answer(response, requests.length - 1)
  })
  server.on('connection', (socket: Socket) => connections.push(socket))
  const url = await listening(server)
  return {
    url,
    connections,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

/** A streamed answer of `body`, in `pieces` writes, the end of the chunked body in a write of its own. */
function stream(response: ServerResponse, ...pieces: string[]): void {
  response.writeHead(200, { 'content-type': 'text/event-stream' })
  for (const piece of pieces) response.write(piece)
  response.end()
}

/**
 * An engine on a raw socket, for what an HTTP server will not do: each connection's first request is answered with
 * `generation(ids)` (head, chunked body and its end in one write, keep-alive); what comes after it on the same
 * connection (the next request, on a reused socket) is handed to `later`.
 */
async function rawEngine(ids: number[], later: (socket: Socket) => void): Promise<TestEngine> {
  const connections: Socket[] = []
  const requests: Record<string, unknown>[] = []
  const server = createNetServer((socket) => {
    connections.push(socket)
    socket.on('error', () => {})
    let served = false
    let received = Buffer.alloc(0)
    socket.on('data', (data: Buffer) => {
      if (served) {
        later(socket)
        return
      }
      received = Buffer.concat([received, data])
      const head = received.indexOf('\r\n\r\n')
      if (head < 0) return
      const length = Number(/content-length: *(\d+)/i.exec(received.subarray(0, head).toString())?.[1] ?? 0)
      if (received.length < head + 4 + length) return
      served = true
      requests.push(JSON.parse(received.subarray(head + 4, head + 4 + length).toString()) as Record<string, unknown>)
      const body = generation(ids)
      socket.write(
        `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`,
      )
    })
  })
  const url = await listening(server)
  return {
    url,
    connections,
    requests,
    close: async () => {
      for (const socket of connections) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** The client's pool (one per client: keyed by the options object the client keeps). */
function poolOfClient(engine: VllmEngine | LlamaCppEngine, url: string) {
  const pool = poolOf((engine as unknown as { options: object }).options, new URL(url))
  if (pool === false) throw new Error('no pool')
  return pool
}

/** Once `count` connections of the client's pool are idle: the pool's own 'idle' event, no clock. */
async function idle(engine: VllmEngine | LlamaCppEngine, url: string, count = 1): Promise<void> {
  const pool = poolOfClient(engine, url)
  while (pool.idleCount < count) await once(pool, 'idle')
}

/** Counts the connections the client's pool takes back from now on. */
function frees(engine: VllmEngine | LlamaCppEngine, url: string): { count: number } {
  const counter = { count: 0 }
  poolOfClient(engine, url).on('idle', () => counter.count++)
  return counter
}

/**
 * An engine whose server closes an idle connection after `keepAliveTimeout` ms and says so (`Keep-Alive: timeout=N`,
 * in seconds, as Node's server writes it), streaming `generation([1, 2])` to every request.
 */
async function hintingEngine(t: ExecutionContext, keepAliveTimeout: number): Promise<{ url: string; connections: Socket[] }> {
  const connections: Socket[] = []
  const server = createServer({ keepAliveTimeout }, async (request, response) => {
    for await (const _ of request);
    stream(response, generation([1, 2]))
  })
  server.on('connection', (socket: Socket) => connections.push(socket))
  const url = await listening(server)
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { url, connections }
}

/**
 * Once the server's end of `socket` is closed: true when the client closed it first (the server read its end of
 * the stream), false when the server did (its own keep-alive timeout).
 */
function closedByClient(socket: Socket | undefined): Promise<boolean> {
  if (socket === undefined) throw new Error('no such connection')
  return new Promise((resolve) => {
    socket.once('end', () => resolve(true))
    socket.once('close', () => resolve(false))
  })
}

/** Once the server's end of `socket` is closed (at once when it is already). */
async function closed(socket: Socket | undefined): Promise<void> {
  if (socket === undefined) throw new Error('no such connection')
  if (!socket.destroyed) await once(socket, 'close')
}

const prompt = { tokens: [200006, 1428, 200008], maxTokens: 50 }

/**
 * An engine whose first generation sends one id and is still generating when its reader leaves; later ones stream
 * [7, 8].
 */
function stillGeneratingFirst(): Promise<TestEngine> {
  return httpEngine((response, n) => {
    if (n > 0) return stream(response, generation([7, 8]))
    // Never ends by itself.
    response.writeHead(200, { 'content-type': 'text/event-stream' })
    response.write(chunk([1]))
  })
}

/**
 * After a first generation that took its connection with it: the next one is read whole on a new connection, at
 * once (not when an idle connection would time out), the engine sees the first connection close (it frees the
 * sequence then), and the pool took only the second back.
 */
async function tookItsConnection(t: ExecutionContext, engine: TestEngine, client: VllmEngine, taken: { count: number }): Promise<void> {
  t.deepEqual([...(await collectSteps(client.generate(prompt))).tokens], read([7, 8]))
  t.is(engine.connections.length, 2)
  await closed(engine.connections[0])
  await idle(client, engine.url)
  t.is(taken.count, 1)
}

test('two generations one after the other share one connection', async (t) => {
  const engine = await httpEngine((response, n) => stream(response, chunk([10 + n]), chunk([20 + n], 'stop', RETURN), DONE))
  t.teardown(engine.close)
  const client = new VllmEngine({ url: engine.url })
  const first = await collectSteps(client.generate(prompt))
  t.deepEqual([...first.tokens], read([10, 20]))
  await idle(client, engine.url)
  const second = await collectSteps(client.generate(prompt))
  t.deepEqual([...second.tokens], read([11, 21]))
  t.is(engine.requests.length, 2)
  t.is(engine.connections.length, 1)
})

test('an idle connection is closed by the client before the engine would close it', async (t) => {
  // Node's server closes an idle connection after 5 s and says `Keep-Alive: timeout=5` (uvicorn says nothing, and
  // closes after 5 s too): the client keeps it 2 s, and its close comes first.
  const engine = await httpEngine((response) => stream(response, generation([1, 2])))
  t.teardown(engine.close)
  const client = new VllmEngine({ url: engine.url })
  for (let i = 0; i < 2; i++) {
    t.deepEqual([...(await collectSteps(client.generate(prompt))).tokens], read([1, 2]))
    await idle(client, engine.url)
  }
  t.is(engine.connections.length, 1)
  t.true(await closedByClient(engine.connections[0]))
})

test("a server's shorter Keep-Alive timeout is honoured: the client closes first", async (t) => {
  // `Keep-Alive: timeout=2`: kept a second less (1 s), so that the client gives the connection up before the server.
  // With the client's own 2 s, the two would close it at once.
  const { url, connections } = await hintingEngine(t, 2000)
  const client = new VllmEngine({ url })
  await collectSteps(client.generate(prompt))
  await idle(client, url)
  t.true(await closedByClient(connections[0]))
})

test("a server's Keep-Alive timeout of a second keeps nothing: the next generation opens a new connection", async (t) => {
  const { url, connections } = await hintingEngine(t, 1000)
  const client = new VllmEngine({ url })
  await collectSteps(client.generate(prompt))
  t.true(await closedByClient(connections[0]))
  await collectSteps(client.generate(prompt))
  t.is(connections.length, 2)
})

test('a stream without [DONE] that ends (llama.cpp) gives its connection back too', async (t) => {
  const result = (tokens: number[], stop: boolean) =>
    `data: ${JSON.stringify({ index: 0, content: '', tokens, stop, id_slot: 0, tokens_predicted: 2, tokens_evaluated: 3, ...(stop ? { stop_type: 'eos', timings: { cache_n: 0 } } : {}) })}\n\n`
  const connections: Socket[] = []
  const server = createServer(async (request, response) => {
    for await (const _ of request);
    response.writeHead(200, { 'content-type': 'text/event-stream' })
    response.write(result([5], false))
    // The final result and the body's end in one write, as the end follows it at once.
    response.end(result([RETURN], true))
  })
  server.on('connection', (socket: Socket) => connections.push(socket))
  const url = await listening(server)
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const client = new LlamaCppEngine({ url })
  for (let i = 0; i < 2; i++) {
    const whole = await collectSteps(client.generate(prompt))
    t.deepEqual([...whole.tokens], [5, RETURN])
    await idle(client, url)
  }
  t.is(connections.length, 1)
})

test('a stream cut short by its reader takes its connection: the next generation opens a new one', async (t) => {
  const engine = await stillGeneratingFirst()
  t.teardown(engine.close)
  const client = new VllmEngine({ url: engine.url })
  const taken = frees(client, engine.url)
  for await (const step of client.generate(prompt)) {
    t.deepEqual([...step.tokens], [1])
    break
  }
  await tookItsConnection(t, engine, client, taken)
})

test('an aborted stream takes its connection', async (t) => {
  const engine = await stillGeneratingFirst()
  t.teardown(engine.close)
  const client = new VllmEngine({ url: engine.url })
  const taken = frees(client, engine.url)
  const controller = new AbortController()
  const error = await t.throwsAsync(async () => {
    for await (const _ of client.generate({ ...prompt, signal: controller.signal })) controller.abort()
  })
  t.is((error as EngineError).code, 'engine-aborted')
  await tookItsConnection(t, engine, client, taken)
})

test('an HTTP error status takes its connection, its body read or not', async (t) => {
  const engine = await httpEngine((response, n) => {
    if (n > 0) return stream(response, generation([7, 8]))
    response.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: 'too long', code: 400 } }))
  })
  t.teardown(engine.close)
  const client = new VllmEngine({ url: engine.url })
  const taken = frees(client, engine.url)
  const error = await t.throwsAsync(collectSteps(client.generate(prompt)))
  t.is((error as EngineError).code, 'engine-http-error')
  t.is((error as EngineError).engineMessage, 'too long')
  await tookItsConnection(t, engine, client, taken)
})

test('a stream whose body does not end after [DONE] is not kept', async (t) => {
  const engine = await httpEngine((response, n) => {
    response.writeHead(200, { 'content-type': 'text/event-stream' })
    // The first: everything but the body's end, ever.
    if (n === 0) response.write(generation([3, 4]))
    else response.end(generation([5, 6]))
  })
  t.teardown(engine.close)
  const client = new VllmEngine({ url: engine.url })
  const taken = frees(client, engine.url)
  // The generation itself is whole: its end was not needed to read it.
  t.deepEqual([...(await collectSteps(client.generate(prompt))).tokens], read([3, 4]))
  // Closed by the client after its short wait for the end (the engine's idle timeout would be seconds).
  await closed(engine.connections[0])
  t.is(taken.count, 0)
  t.deepEqual([...(await collectSteps(client.generate(prompt))).tokens], read([5, 6]))
  t.is(engine.connections.length, 2)
})

test('a request lost to an idle connection the engine closes as it arrives is sent again on a new one, once', async (t) => {
  // The engine drops the kept connection on the first bytes of the next request, before reading it as one.
  const engine = await rawEngine([30, 31], (socket) => socket.destroy())
  t.teardown(engine.close)
  const client = new VllmEngine({ url: engine.url })
  t.deepEqual([...(await collectSteps(client.generate(prompt))).tokens], read([30, 31]))
  await idle(client, engine.url)
  t.deepEqual([...(await collectSteps(client.generate({ ...prompt, maxTokens: 7 }))).tokens], read([30, 31]))
  // Two connections, and each generation's request answered once: the lost one was never taken as a request.
  t.is(engine.connections.length, 2)
  t.deepEqual(
    engine.requests.map((body) => body.max_tokens),
    [50, 7],
  )
})

test('a request on a reused connection that got part of an answer fails as before, and is not sent again', async (t) => {
  // The next request gets the start of a head, then the connection ends.
  const engine = await rawEngine([30, 31], (socket) => socket.end('HTTP/1.1 200 OK\r\ncontent-type: text/'))
  t.teardown(engine.close)
  const client = new VllmEngine({ url: engine.url })
  await collectSteps(client.generate(prompt))
  await idle(client, engine.url)
  const error = await t.throwsAsync(collectSteps(client.generate(prompt)))
  t.true(error instanceof EngineError)
  t.is((error as EngineError).code, 'engine-connection-error')
  t.is(engine.connections.length, 1)
  t.is(engine.requests.length, 1)
})

test('a reused connection that breaks after the head fails the stream as before, with no new request', async (t) => {
  const engine = await rawEngine([30, 31], (socket) =>
    socket.end(
      `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n${(chunk([1]).length).toString(16)}\r\n${chunk([1])}\r\n`,
    ),
  )
  t.teardown(engine.close)
  const client = new VllmEngine({ url: engine.url })
  await collectSteps(client.generate(prompt))
  await idle(client, engine.url)
  const error = await t.throwsAsync(collectSteps(client.generate(prompt)))
  t.is((error as EngineError).code, 'engine-connection-error')
  t.is(engine.connections.length, 1)
})

/**
 * An answer whose connection is not kept, reset while its reader is not reading: undici 6 asserts, uncaught, when
 * such a connection is reset while its parser is stopped (exchange.ts), so the client must not stop it. The engine
 * sends `head` and one event, then, once the reader has it, 70 KiB more (past what the client gathers before it
 * would stop, short of what would fill the socket: then the reset would go unseen), and resets the connection while
 * the reader waits elsewhere. Resolves with how the rest of the stream ended.
 */
async function resetWhileNotReading(head: string, frame: (event: string) => string): Promise<unknown> {
  const event = frame(`data: ${'x'.repeat(1000)}\n\n`)
  let socket: Socket | undefined
  const server = createNetServer((accepted) => {
    socket = accepted
    accepted.on('error', () => {})
    accepted.once('data', () => accepted.write(`${head}\r\ncontent-type: text/event-stream\r\n\r\n${event}`))
  })
  const url = await listening(server)
  try {
    const events = postEvents('test', new URL(url), {}, {}, {}, () => null)
    if ((await events.next()).value?.length !== 1) throw new Error('no first event')
    // Turns of the event loop, not a clock: the client reads what came (or sees the reset) in each.
    const turns = async () => {
      for (let turn = 0; turn < 20; turn++) await new Promise((resolve) => setImmediate(resolve))
    }
    socket!.write(event.repeat(70))
    await turns()
    socket!.resetAndDestroy()
    await turns()
    for (let next = await events.next(); !next.done; next = await events.next());
    return 'ended'
  } catch (error) {
    return (error as EngineError).code
  } finally {
    server.close()
  }
}

test('an answer that closes its connection, reset while its reader is not reading, fails its stream and nothing else', async (t) => {
  const chunked = (event: string) => `${event.length.toString(16)}\r\n${event}\r\n`
  const close = 'HTTP/1.1 200 OK\r\nconnection: close\r\ntransfer-encoding: chunked'
  t.is(await resetWhileNotReading(close, chunked), 'engine-connection-error')
  // HTTP/1.0, the body read to the connection's end: the reset ends it (as undici reads such a body).
  t.is(await resetWhileNotReading('HTTP/1.0 200 OK', (event) => event), 'ended')
})

test('keepAlive: false opens a connection per generation', async (t) => {
  const engine = await httpEngine((response, n) => stream(response, generation([40 + n, 50])))
  t.teardown(engine.close)
  const client = new VllmEngine({ url: engine.url, keepAlive: false })
  t.is(poolOf((client as unknown as { options: object }).options, new URL(engine.url)), false)
  t.deepEqual([...(await collectSteps(client.generate(prompt))).tokens], read([40, 50]))
  // Closed at its end, by the client (`Connection: close`), with nothing waiting for a clock.
  await closed(engine.connections[0])
  t.deepEqual([...(await collectSteps(client.generate(prompt))).tokens], read([41, 50]))
  t.is(engine.connections.length, 2)
})

test('keepAlive is checked like the other options', (t) => {
  const url = 'http://127.0.0.1:1'
  t.throws(() => new VllmEngine({ url, keepAlive: 'yes' as unknown as boolean }), {
    instanceOf: TypeError,
    message: /option 'keepAlive' must be true or false/,
  })
  t.throws(() => new VllmEngine({ url, keepalive: true } as unknown as { url: string }), { instanceOf: TypeError, message: /keepAlive/ })
  t.notThrows(() => new LlamaCppEngine({ url, keepAlive: false }))
})
