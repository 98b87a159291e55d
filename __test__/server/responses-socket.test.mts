/**
 * The Responses API's WebSocket mode (issue 21; Open Responses 2026-04-24 "WebSocket mode") through the example
 * gateway: the official openai client's `ResponsesWS`, and the `ws` package's client for the frames
 * themselves. The Open Responses compliance suite's WebSocket cases are here (one response; turns in order on
 * one connection; a store: false continuation; a reconnect that cannot continue and a new chain that can; an
 * unknown previous response; a failed continuation that forgets the response it named; a new chain from a
 * compaction), with what a gateway must also survive: bad messages, an engine that fails before or during a
 * response, a client that leaves mid-response, the connection's lifetime, an oversized message, idle connections
 * (their timeout, by a clock the test moves; the cap, where the one idle longest makes way).
 */
import { once } from 'node:events'
import type { AddressInfo } from 'node:net'

import test, { type ExecutionContext } from 'ava'
import { ResponsesStream, renderResponsesRequest } from 'harmony-stream'
import { type Engine, EngineError, type GenerateRequest } from 'harmony-stream/engines'
import { createGateway, ResponsesSocket, type SocketTransport, serveResponsesSocket, sseEventTexts } from 'harmony-stream/server'
import { ResponsesWS } from 'openai/resources/responses/ws'
import { WebSocket, WebSocketServer } from 'ws'

import { failingEngine, recordingEngine, startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { connect, errorOf, type Frame, responseOf, TERMINAL } from '../helpers/responses-socket.mjs'
import { until } from '../helpers/until.mjs'

const MODEL = 'gpt-oss'
const ANSWER = harmony('<|channel|>analysis<|message|>Count.<|end|><|start|>assistant<|channel|>final<|message|>1, 2, 3.<|return|>')
const CALL = harmony('<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>')
const TOOLS = [{ type: 'function', name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } }]
/** A well-formed turn: `response.created` first, sequence numbers 0, 1, 2…, one terminal event last, no `[DONE]`. */
function assertStream(t: ExecutionContext, turn: Frame[], status = 'completed'): void {
  t.is(turn[0]!.type, 'response.created')
  t.deepEqual(
    turn.map((frame) => frame.sequence_number),
    turn.map((_, i) => i),
  )
  t.is(turn.filter((frame) => TERMINAL.has(frame.type)).length, 1)
  t.is(responseOf(turn).status, status)
}

/** A transport whose client reads everything at once: the frames it got, and the close codes. */
function readingTransport(): { transport: SocketTransport; sent: Frame[]; closes: number[] } {
  const sent: Frame[] = []
  const closes: number[] = []
  const transport: SocketTransport = {
    send: (text, done) => {
      sent.push(JSON.parse(text) as Frame)
      done?.()
    },
    bufferedAmount: 0,
    close: (code) => closes.push(code),
  }
  return { transport, sent, closes }
}

test('the openai client’s ResponsesWS: a response streams over the socket, then another on the same connection', async (t) => {
  const { client } = await startGateway(t, { replay: [ANSWER] })
  const rws = new ResponsesWS(client)
  t.teardown(() => rws.close())
  await new Promise<void>((resolve, reject) => {
    rws.socket.once('open', () => resolve())
    rws.socket.once('error', reject)
  })
  const events: { type: string; delta?: string; response?: { status: string; output_text?: string } }[] = []
  const errors: unknown[] = []
  rws.on('error', (error) => errors.push(error))
  const done = () =>
    new Promise<void>((resolve) => {
      rws.on('response.completed', () => resolve())
    })
  rws.on('event', (event) => events.push(event as never))
  for (const input of ['Count from 1 to 3.', 'Again.']) {
    const completed = done()
    rws.send({ type: 'response.create', model: MODEL, store: false, input })
    await completed
  }
  t.deepEqual(errors, [])
  const texts = events.filter((event) => event.type === 'response.output_text.done')
  t.is(texts.length, 2)
  t.is(
    events
      .filter((event) => event.type === 'response.output_text.delta')
      .map((event) => event.delta)
      .join(''),
    '1, 2, 3.1, 2, 3.',
  )
  t.is(events.filter((event) => event.type === 'response.completed').length, 2)
})

test('websocket-response and sequential responses: well-formed streams, one at a time, in order', async (t) => {
  const { port } = await startGateway(t, { replay: [ANSWER] })
  const ws = await connect(t, port)
  // Sent at once: the second waits for the first (the specification's one in-flight response per connection).
  for (const input of ['first', 'second', 'third']) ws.send({ type: 'response.create', model: MODEL, store: false, input })
  const turns = [await ws.turn(), await ws.turn(), await ws.turn()]
  for (const turn of turns) assertStream(t, turn)
  t.is(new Set(turns.map((turn) => responseOf(turn).id)).size, 3)
  // Each response echoes its own input's turn (the responses are not interleaved).
  t.true(
    turns.every((turn) =>
      turn.every((frame) => frame.response === undefined || (frame.response as { id: string }).id === responseOf(turn).id),
    ),
  )
})

for (const exactContinuations of [false, true]) {
  test(`websocket-continuation, exactContinuations ${exactContinuations}: a store: false response continues from the connection’s memory`, async (t) => {
    const { engine, prompts } = recordingEngine([CALL, ANSWER])
    const { port } = await startGateway(t, { engine, responseStore: null, exactContinuations })
    const ws = await connect(t, port)
    ws.send({ type: 'response.create', model: MODEL, store: false, tools: TOOLS, input: 'Weather in Paris?' })
    const first = responseOf(await ws.turn())
    t.is(first.status, 'completed')
    const call = (first.output as { type: string; call_id: string }[]).find((item) => item.type === 'function_call')!
    const result = { type: 'function_call_output', call_id: call.call_id, output: '{"sky":"clear"}' }
    ws.send({ type: 'response.create', model: MODEL, store: false, tools: TOOLS, previous_response_id: first.id, input: [result] })
    const second = await ws.turn()
    assertStream(t, second)
    t.is(responseOf(second).previous_response_id, first.id)
    const whole = renderResponsesRequest({
      model: MODEL,
      tools: TOOLS,
      input: [{ role: 'user', content: 'Weather in Paris?' }, ...(first.output as object[]), result],
    })
    // Re-rendered: the whole conversation's prompt; exact: the ids the engine saw and generated, then the result.
    if (exactContinuations) t.deepEqual(prompts[1]!.slice(0, prompts[0]!.length + CALL.length), [...prompts[0]!, ...CALL])
    else t.deepEqual(prompts[1], Array.from(whole.tokens))
  })
}

test('websocket-reconnect: a store: false response is gone with its connection; a new chain works; a stored one continues anywhere', async (t) => {
  const { port, client } = await startGateway(t, { replay: [ANSWER] })
  const one = await connect(t, port)
  one.send({ type: 'response.create', model: MODEL, store: false, input: 'Remember copper.' })
  const unstored = responseOf(await one.turn())
  one.send({ type: 'response.create', model: MODEL, input: 'Remember tin.' })
  const kept = responseOf(await one.turn())
  one.socket.close()

  const two = await connect(t, port)
  two.send({ type: 'response.create', model: MODEL, store: false, previous_response_id: unstored.id, input: 'Go on.' })
  t.deepEqual(errorOf(await two.turn()), {
    status: 400,
    type: 'invalid_request_error',
    code: 'previous_response_not_found',
    message: `Previous response with id '${unstored.id}' not found.`,
    param: 'previous_response_id',
  })
  two.send({
    type: 'response.create',
    model: MODEL,
    store: false,
    input: [{ type: 'message', role: 'user', content: 'reply with exactly: recovered' }],
  })
  assertStream(t, await two.turn())
  // Kept in the store (store defaults to true): continued on another connection, and there over HTTP.
  two.send({ type: 'response.create', model: MODEL, store: false, previous_response_id: kept.id, input: 'Go on.' })
  assertStream(t, await two.turn())
  t.is((await client.responses.retrieve(kept.id)).status, 'completed')
})

test('websocket-failed-continuation: a continuation that fails forgets the response it named', async (t) => {
  const { port } = await startGateway(t, { replay: [ANSWER], responseStore: null })
  const ws = await connect(t, port)
  ws.send({ type: 'response.create', model: MODEL, store: false, input: 'Remember ember.' })
  const first = responseOf(await ws.turn())
  ws.send({
    type: 'response.create',
    model: MODEL,
    store: false,
    previous_response_id: first.id,
    input: [{ type: 'function_call_output', call_id: 'call_openresponses_missing', output: 'No matching tool call.' }],
  })
  const failed = await ws.turn()
  t.is(failed.length, 1, 'one error frame, nothing else')
  // Named where it stands in the continued conversation: the stored input and output (3 items) come first.
  t.like(errorOf(failed), { status: 400, param: 'input[3].call_id' })
  ws.send({ type: 'response.create', model: MODEL, store: false, previous_response_id: first.id, input: 'Try again: stale' })
  t.like(errorOf(await ws.turn()), { status: 400, code: 'previous_response_not_found' })
})

test('websocket-compact-new-chain: a chain started from a compaction over the socket prompts as the whole conversation', async (t) => {
  const { engine, prompts } = recordingEngine([ANSWER])
  const { port, client } = await startGateway(t, { engine })
  const conversation = [
    {
      type: 'message' as const,
      role: 'user' as const,
      content: [{ type: 'input_text' as const, text: 'Remember the compaction code word: slate.' }],
    },
    {
      type: 'message' as const,
      role: 'assistant' as const,
      content: [{ type: 'output_text' as const, text: 'OK.', annotations: [] }],
      id: 'msg_1',
      status: 'completed' as const,
    },
    { type: 'message' as const, role: 'user' as const, content: [{ type: 'input_text' as const, text: 'Compress this conversation.' }] },
  ]
  const compacted = await client.responses.compact({ model: MODEL, input: conversation })
  const next = { type: 'message', role: 'user', content: 'Continue from here. Reply with exactly: compacted' }
  const ws = await connect(t, port)
  ws.send({ type: 'response.create', model: MODEL, store: false, input: [...compacted.output, next], tools: [] })
  const turn = await ws.turn()
  assertStream(t, turn)
  t.is(responseOf(turn).previous_response_id, null)
  t.deepEqual(prompts[0], Array.from(renderResponsesRequest({ model: MODEL, input: [...conversation, next] }).tokens))
})

test('bad messages get one error frame naming the problem, and the connection goes on', async (t) => {
  const { port } = await startGateway(t, { replay: [ANSWER] })
  const ws = await connect(t, port)
  const cases: [string | Record<string, unknown>, Record<string, unknown>][] = [
    ['{not json', { status: 400, code: 'invalid_json' }],
    [{ type: 'response.cancel' }, { status: 400, code: 'unknown_event_type', param: 'type' }],
    [
      { type: 'response.create', model: MODEL, input: 'x', background: true },
      { status: 400, param: 'background' },
    ],
    [
      { type: 'response.create', model: MODEL, input: 'x', stream: false },
      { status: 400, param: 'stream' },
    ],
    [
      { type: 'response.create', model: MODEL, input: 'x', generate: false },
      { status: 400, param: 'generate' },
    ],
    [
      { type: 'response.create', input: 'x' },
      { status: 400, param: 'model' },
    ],
    [
      { type: 'response.create', model: MODEL, input: 'x', previous_response_id: 7 },
      { status: 400, param: 'previous_response_id' },
    ],
  ]
  for (const [message, expected] of cases) {
    ws.socket.send(typeof message === 'string' ? message : JSON.stringify(message))
    const turn = await ws.turn()
    t.is(turn.length, 1)
    t.like(errorOf(turn), expected)
  }
  // What the openai package's types still have, asking for nothing: taken.
  ws.send({
    type: 'response.create',
    model: MODEL,
    input: 'x',
    stream: true,
    stream_options: { include_obfuscation: false },
    background: false,
  })
  assertStream(t, await ws.turn())
})

test('an engine that fails before its first step: one error frame (502); during the response: response.failed alone', async (t) => {
  const before: Engine = {
    name: 'down',
    // biome-ignore lint/correctness/useYield: it fails before its first step
    async *generate() {
      throw new EngineError('engine-connection-error', 'connect ECONNREFUSED', { engine: 'down' })
    },
  }
  for (const [engine, expect] of [
    [before, 'error'],
    [failingEngine, 'response.failed'],
  ] as const) {
    const { port } = await startGateway(t, { engine, onError: () => {} })
    const ws = await connect(t, port)
    ws.send({ type: 'response.create', model: MODEL, input: 'x' })
    const turn = await ws.turn()
    t.is(turn.at(-1)!.type, expect)
    t.is(turn.filter((frame) => frame.type === 'error').length, expect === 'error' ? 1 : 0, 'no error frame beside response.failed')
    if (expect === 'error') t.like(errorOf(turn), { status: 502, code: 'engine_connection_error' })
    else t.like(responseOf(turn), { status: 'failed', error: { code: 'engine_connection_error' } })
    // The connection goes on.
    ws.send({ type: 'response.create', model: MODEL, input: 'x' })
    t.true(TERMINAL.has((await ws.turn()).at(-1)!.type))
  }
})

test('a client that leaves mid-response aborts the engine request; the lifetime ends a connection with its error', async (t) => {
  let aborted = false
  // The start of the answer, then nothing until the request is aborted: the client leaves mid-response however
  // slowly it reads.
  const slow: Engine = {
    name: 'slow',
    async *generate(request: GenerateRequest) {
      request.signal?.addEventListener('abort', () => {
        aborted = true
      })
      yield { tokens: Uint32Array.from(ANSWER.slice(0, 4)) }
      await new Promise((resolve) => request.signal?.addEventListener('abort', resolve, { once: true }))
    },
  }
  // A lifetime a loaded machine's pauses stay within: the first connection's message must come before it ends.
  const { port } = await startGateway(t, { engine: slow, socketLifetimeMs: 2000 })
  const ws = await connect(t, port)
  ws.send({ type: 'response.create', model: MODEL, input: 'x' })
  t.true(await until(() => ws.frames.length >= 3, 10_000), 'the response began')
  ws.socket.terminate()
  t.true(await until(() => aborted, 10_000), 'the engine request was aborted')

  const idle = await connect(t, port)
  const limit = await idle.turn()
  t.like(errorOf(limit), { status: 400, code: 'websocket_connection_limit_reached' })
  await until(() => idle.closed !== null)
  t.is(idle.closed?.code, 1000)
})

test('a message over the body limit closes the connection (1009); other paths are not upgraded', async (t) => {
  const { port } = await startGateway(t, { replay: [ANSWER], bodyLimit: 1024 })
  const ws = await connect(t, port)
  ws.send({ type: 'response.create', model: MODEL, input: 'x'.repeat(2000) })
  await until(() => ws.closed !== null)
  t.is(ws.closed?.code, 1009)
  const other = new WebSocket(`ws://127.0.0.1:${port}/v1/chat/completions`)
  const refused = await new Promise<string>((resolve) => {
    other.once('unexpected-response', (_request, response) => resolve(String(response.statusCode)))
    other.once('error', (error) => resolve(error.message))
  })
  t.is(refused, '404')
})

test('ResponsesSocket: a client that reads nothing is closed (1008) after the stall timeout, and its turn aborted', async (t) => {
  const closes: [number, string][] = []
  const transport: SocketTransport = {
    // Frames never leave: a client that does not read.
    send: () => {},
    bufferedAmount: 10,
    close: (code, reason) => closes.push([code, reason]),
  }
  let signal: AbortSignal | null = null
  const socket = new ResponsesSocket({
    transport,
    highWaterMark: 0,
    stallTimeoutMs: 50,
    async respond(turn) {
      signal = turn.signal
      await turn.emit({ type: 'response.created', sequence_number: 0 })
      await turn.emit({ type: 'response.in_progress', sequence_number: 1 })
      return null
    },
  })
  socket.receive(JSON.stringify({ type: 'response.create', model: MODEL, input: 'x' }))
  await until(() => closes.length > 0)
  t.deepEqual(closes, [[1008, 'the client does not read']])
  t.true((signal as AbortSignal | null)?.aborted)
  t.throws(() => new ResponsesSocket({ transport, respond: async () => null, lifetimeMs: 0 }), { instanceOf: RangeError })
  t.throws(() => new ResponsesSocket({ transport } as never), { instanceOf: TypeError })
})

test('the socket of a server closed with it', async (t) => {
  const { server, port } = await startGateway(t, { replay: [ANSWER] })
  const ws = await connect(t, port)
  await new Promise<void>((resolve) => server.close(() => resolve()))
  await until(() => ws.closed !== null)
  t.not(ws.closed, null)
  t.is((server.address() as AddressInfo | null) ?? null, null)
})

test('ResponsesSocket: a message past the queue’s bounds is refused at once; one after the lifetime waits for the running turn', async (t) => {
  const { transport, sent } = readingTransport()
  let finishTurn: () => void = () => {}
  const socket = new ResponsesSocket({
    transport,
    maxQueued: 1,
    maxQueuedBytes: 200,
    lifetimeMs: 60_000,
    async respond(turn) {
      await turn.emit({ type: 'response.created', sequence_number: 0 })
      await new Promise<void>((resolve) => {
        finishTurn = resolve
      })
      await turn.emit({ type: 'response.completed', sequence_number: 1, response: { id: 'resp_1', status: 'completed' } })
      return null
    },
  })
  const create = JSON.stringify({ type: 'response.create', model: MODEL, input: 'x' })
  socket.receive(create)
  socket.receive(create)
  // A third: over maxQueued. A long one: over maxQueuedBytes.
  socket.receive(create)
  socket.receive(JSON.stringify({ type: 'response.create', model: MODEL, input: 'x'.repeat(300) }))
  await new Promise((resolve) => setImmediate(resolve))
  t.deepEqual(
    sent.filter((frame) => frame.type === 'error').map((frame) => (frame.error as { code: string }).code),
    ['websocket_queue_full', 'websocket_queue_full'],
  )
  socket.closed()
  finishTurn()
})

test('ResponsesSocket: after its lifetime the running turn ends with its terminal frame, then the limit’s error frame', async (t) => {
  const { transport, sent, closes } = readingTransport()
  let release = () => {}
  const released = new Promise<void>((resolve) => {
    release = resolve
  })
  const socket = new ResponsesSocket({
    transport,
    lifetimeMs: 1,
    async respond(turn) {
      await turn.emit({ type: 'response.created', sequence_number: 0 })
      await released
      await turn.emit({ type: 'response.completed', sequence_number: 1, response: { id: 'resp_1', status: 'completed' } })
      return null
    },
  })
  socket.receive(JSON.stringify({ type: 'response.create', model: MODEL, input: 'x' }))
  await until(() => sent.length > 0)
  // A longer timer set later fires after the lifetime's: the order of timers, not how fast the machine is.
  await new Promise((resolve) => setTimeout(resolve, 5))
  // Past the lifetime, while the turn runs: not run, and the turn is not cut.
  socket.receive(JSON.stringify({ type: 'response.create', model: MODEL, input: 'y' }))
  release()
  await until(() => closes.length > 0)
  t.deepEqual(
    sent.map((frame) => frame.type),
    ['response.created', 'response.completed', 'error'],
  )
  t.like(sent[2]!.error, { code: 'websocket_connection_limit_reached' })
  t.deepEqual(closes, [1000])
})

test('a binary frame closes the connection (1003); a cancel request’s id is no previous response', async (t) => {
  const { port } = await startGateway(t, { replay: [ANSWER] })
  const ws = await connect(t, port)
  ws.send({ type: 'response.create', model: MODEL, previous_response_id: 'cancel-request:resp_x', input: 'x' })
  t.like(errorOf(await ws.turn()), { code: 'previous_response_not_found' })
  ws.socket.send(Buffer.from(JSON.stringify({ type: 'response.create', model: MODEL, input: 'x' })), { binary: true })
  await until(() => ws.closed !== null)
  t.is(ws.closed?.code, 1003)
})

test('sseEventTexts cuts an adapter’s SSE frames into exactly its events’ JSON, text that looks like a frame included', (t) => {
  const completion = harmony('<|channel|>final<|message|>data: {"x":1}\n\nevent: no\ndata: still text<|return|>')
  for (const interval of [1, 4, completion.length]) {
    const objects = new ResponsesStream({ model: MODEL, id: 'resp_same', createdAt: 1 })
    const frames = new ResponsesStream({ model: MODEL, id: 'resp_same', createdAt: 1 })
    const fromObjects: unknown[] = []
    const fromFrames: unknown[] = []
    for (let i = 0; i < completion.length; i += interval) {
      fromObjects.push(...objects.push(completion.slice(i, i + interval)))
      fromFrames.push(...sseEventTexts(frames.pushSse(completion.slice(i, i + interval))).map((text) => JSON.parse(text)))
    }
    fromObjects.push(...objects.finish())
    fromFrames.push(...sseEventTexts(frames.finishSse()).map((text) => JSON.parse(text)))
    t.deepEqual(
      fromFrames.map((event) => JSON.stringify(event).replace(/"completed_at":[\d.]+/, '')),
      fromObjects.map((event) => JSON.stringify(event).replace(/"completed_at":[\d.]+/, '')),
    )
  }
})

test('an idle connection (no turn running, none asked for) is closed after socketIdleMs; one in a turn is not', async (t) => {
  // An idle limit a loaded machine's pauses stay within: the working connection's message must come before it.
  const { port } = await startGateway(t, { engine: recordingEngine([ANSWER, ANSWER]).engine, socketIdleMs: 2000 })
  // A connection that asks for a turn, then waits: its turn runs to the end, then the idle clock starts.
  const working = await connect(t, port)
  working.send({ type: 'response.create', model: MODEL, input: 'x' })
  assertStream(t, await working.turn())
  // One that never asks: closed, normally, with the reason.
  const idle = await connect(t, port)
  await until(() => idle.closed !== null && working.closed !== null, 10_000)
  t.is(idle.closed?.code, 1000)
  t.is(working.closed?.code, 1000)
  t.throws(() => new ResponsesSocket({ transport: readingTransport().transport, respond: async () => null, idleMs: 0 }), {
    instanceOf: RangeError,
    message: /idleMs/,
  })
})

/** An engine whose first `quick` requests answer at once; later ones hold after their first ids until aborted. */
function holdingAfter(quick: number): { engine: Engine; held: () => number } {
  let requests = 0
  let held = 0
  return {
    held: () => held,
    engine: {
      name: 'holding',
      async *generate(request: GenerateRequest) {
        if (++requests <= quick) {
          yield { tokens: Uint32Array.from(ANSWER), finishReason: 'stop' }
          return
        }
        yield { tokens: Uint32Array.from(ANSWER.slice(0, 4)) }
        held++
        await new Promise((resolve) => request.signal?.addEventListener('abort', resolve, { once: true }))
      },
    },
  }
}

/** The gateway's count of idle connections closed for new ones. */
async function evictions(port: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
  return Number(/^harmony_websocket_evictions_total (\d+)$/m.exec(text)?.[1])
}

test('at the cap (responses.maxSockets) a new connection takes the place of the one idle longest; busy ones are never closed for it, and none idle is a 503', async (t) => {
  const { engine, held } = holdingAfter(1)
  const { port } = await startGateway(t, { engine, responses: { maxSockets: 2, store: null } })
  const first = await connect(t, port)
  const second = await connect(t, port)
  // Two held, idle both: a third takes the place of the first, idle the longest, closed as idle.
  const third = await connect(t, port)
  await until(() => first.closed !== null)
  t.is(first.closed?.code, 1000)
  t.is(second.closed, null)
  // A turn makes the second the one idle the least: the next connection takes the third's place.
  second.send({ type: 'response.create', model: MODEL, input: 'x', store: false })
  assertStream(t, await second.turn())
  const fourth = await connect(t, port)
  await until(() => third.closed !== null)
  t.is(third.closed?.code, 1000)
  t.is(second.closed, null)
  // Both places busy with a turn each: nothing is closed for a fifth, which is refused.
  second.send({ type: 'response.create', model: MODEL, input: 'x', store: false })
  fourth.send({ type: 'response.create', model: MODEL, input: 'x', store: false })
  await until(() => held() === 2)
  await t.throwsAsync(connect(t, port), { message: /Unexpected server response: 503/ })
  t.is(second.closed, null)
  t.is(fourth.closed, null)
  t.is(await evictions(port), 2)
  t.throws(() => createGateway({ engine, responses: { maxSockets: 0 } }), { instanceOf: RangeError, message: /maxSockets/ })
})

/** A clock the test moves itself: `setTimeout` callbacks run when `advance` passes their time. */
function manualClock() {
  let now = 0
  let next = 0
  const due = new Map<number, { at: number; callback: () => void }>()
  return {
    timers: {
      setTimeout: (callback: () => void, ms: number) => {
        due.set(next, { at: now + ms, callback })
        return next++
      },
      clearTimeout: (handle: unknown) => due.delete(handle as number),
    },
    advance(ms: number) {
      now += ms
      for (const [id, timer] of [...due].sort((a, b) => a[1].at - b[1].at)) if (timer.at <= now && due.delete(id)) timer.callback()
    },
  }
}

test('the idle timeout on a real socket, by an injected clock: closed (1000, idle) idleMs after its last turn ended, never while a turn runs', async (t) => {
  const clock = manualClock()
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' })
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  await once(server, 'listening')
  // The turn the client asks for runs until the test releases it.
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  const idle: boolean[] = []
  const accepted = new Promise<WebSocket>((resolve) =>
    server.once('connection', (ws) => {
      serveResponsesSocket(ws, {
        idleMs: 1000,
        timers: clock.timers,
        heartbeatMs: 2 ** 30,
        onIdle: (waiting) => idle.push(waiting),
        respond: async ({ emit }) => {
          await released
          await emit({ type: 'response.completed', response: { id: 'resp_1', status: 'completed' } })
          return null
        },
      })
      resolve(ws)
    }),
  )
  const client = new WebSocket(`ws://127.0.0.1:${(server.address() as AddressInfo).port}`)
  t.teardown(() => client.terminate())
  const closed = new Promise<[number, string]>((resolve) => client.once('close', (code, reason) => resolve([code, reason.toString()])))
  await once(client, 'open')
  const served = await accepted
  t.teardown(() => served.terminate())
  t.deepEqual(idle, [true], 'idle from the start')
  clock.advance(999)
  t.is(served.readyState, WebSocket.OPEN)
  // A turn: not idle while it runs, however long.
  client.send(JSON.stringify({ type: 'response.create', model: MODEL, input: 'x' }))
  await until(() => idle.length === 2)
  t.deepEqual(idle, [true, false])
  clock.advance(60_000)
  t.is(served.readyState, WebSocket.OPEN)
  // Its end starts the idle clock again, from then.
  release()
  await until(() => idle.length === 3)
  clock.advance(999)
  t.is(served.readyState, WebSocket.OPEN)
  clock.advance(1)
  t.deepEqual(await closed, [1000, 'idle'])
})
