/**
 * Clients that stop reading, on real sockets (127.0.0.1) that are paused: nothing reads them, so once the kernel's
 * loopback buffers are full (a few MiB) the server's writes wait for a 'drain' that never comes. The write timeout
 * bounds that wait, while a stream has more to write and after its last bytes: the client is dropped (its
 * connection closed), a foreground stream's engine request aborted as for a client that leaves, a background
 * stream's follower let go, each drop counted. The timeouts here are tiny, and the tests wait for the drop
 * itself (an outcome, an abort, a closed response, a counter), never for a time.
 */
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { type AddressInfo, connect, type Socket } from 'node:net'

import test, { type ExecutionContext } from 'ava'

import { ChatCompletionsStream } from 'harmony-stream'
import type { EngineStep, GenerateRequest } from 'harmony-stream/engines'
import { pipeSse, sendError } from 'harmony-stream/http'
import { createGateway, MemoryResponseStore, pipeStreamLog, StreamLog } from 'harmony-stream/server'

import { harmony } from '../helpers/harmony.mjs'
import { until } from '../helpers/until.mjs'

/** More than the loopback buffers take from a client that reads nothing (about 4 MiB here). */
const OVERFLOW = 16 * 1024 * 1024

async function serve(t: ExecutionContext, handler: (request: IncomingMessage, response: ServerResponse) => Promise<void>) {
  const server = createServer((request, response) => {
    handler(request, response).catch((error) => sendError(response, error))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  )
  return (server.address() as AddressInfo).port
}

/** A raw client that sends `head` (and `body`) and never reads: its socket is paused. */
async function stalledClient(t: ExecutionContext, port: number, head: string, body = ''): Promise<Socket> {
  const socket = connect(port, '127.0.0.1')
  t.teardown(() => socket.destroy())
  socket.on('error', () => {})
  await once(socket, 'connect')
  socket.write(`${head}\r\n\r\n${body}`)
  socket.pause()
  return socket
}

/** Content tokens without end, 64 a step, one step per event-loop turn; `finished` once the iteration ends. */
function endless() {
  let pulled = 0
  let finish!: () => void
  const finished = new Promise<void>((resolve) => (finish = resolve))
  const steps = (async function* () {
    try {
      for (;;) {
        pulled++
        await new Promise((resolve) => setImmediate(resolve))
        yield { tokens: Array.from({ length: 64 }, () => 13225) }
      }
    } finally {
      finish()
    }
  })()
  return { steps, finished, pulled: () => pulled }
}

test('pipeSse: a client that takes nothing within the write timeout is dropped, its engine request aborted', async (t) => {
  const abort = new AbortController()
  const engine = endless()
  let dropped = 0
  let result: Awaited<ReturnType<typeof pipeSse>> | null = null
  const port = await serve(t, async (_request, response) => {
    const adapter = new ChatCompletionsStream({ model: 'm', parser: { implementation: 'js' } })
    adapter.push(harmony('<|channel|>final<|message|>'))
    result = await pipeSse(response, adapter, engine.steps, { abort, writeTimeoutMs: 20, onWriteTimeout: () => dropped++ })
  })
  await stalledClient(t, port, 'GET / HTTP/1.1\r\nhost: x')
  // The engine's iteration ends only when the stream lets go of it: here, because the client was dropped.
  await engine.finished
  t.true(abort.signal.aborted, 'the engine request is aborted, as for a client that leaves')
  t.true(await until(() => result !== null))
  t.is(result!.outcome, 'client-closed')
  t.is(dropped, 1)
  t.true(engine.pulled() > 1, 'the stream ran until the buffers filled')
})

test('pipeSse: a stream whose last bytes the client never takes is dropped after it ended, not held', async (t) => {
  // The stream's last frame is larger than the socket buffers take: its write is still pending when pipeSse
  // returns, with nothing of the stream left to time it.
  class HugeEnding extends ChatCompletionsStream {
    override doneSse(): string {
      return `: ${'x'.repeat(OVERFLOW)}\n\ndata: [DONE]\n\n`
    }
  }
  let dropped = 0
  let closed!: () => void
  // Its connection closes: only a drop closes it, since the client neither reads nor leaves.
  const connectionClosed = new Promise<void>((resolve) => (closed = resolve))
  let outcome = ''
  const port = await serve(t, async (_request, response) => {
    response.once('close', () => closed())
    const adapter = new HugeEnding({ model: 'm', parser: { implementation: 'js' } })
    const steps = (async function* () {
      yield { tokens: harmony('<|channel|>final<|message|>Hi<|return|>') }
    })()
    outcome = (await pipeSse(response, adapter, steps, { writeTimeoutMs: 20, onWriteTimeout: () => dropped++ })).outcome
  })
  await stalledClient(t, port, 'GET / HTTP/1.1\r\nhost: x')
  await connectionClosed
  t.is(outcome, 'completed', 'every event was written')
  t.is(dropped, 1)
})

test('pipeStreamLog: a follower of a run that has ended, which reads nothing, is let go at the write timeout', async (t) => {
  // A run that ended: its frames all kept, more than the socket buffers take.
  const log = new StreamLog({ maxBytes: 2 * OVERFLOW })
  const frame = `data: ${'x'.repeat(64 * 1024)}\n\n`
  for (let i = 0; i * frame.length < OVERFLOW; i++) log.append(i, frame)
  log.end()
  let dropped = 0
  let outcome = ''
  const port = await serve(t, async (_request, response) => {
    outcome = await pipeStreamLog(response, log, -1, { writeTimeoutMs: 20, onWriteTimeout: () => dropped++ })
  })
  await stalledClient(t, port, 'GET / HTTP/1.1\r\nhost: x')
  t.true(await until(() => outcome !== ''))
  t.is(outcome, 'client-closed')
  t.is(dropped, 1)
})

/** An engine of long content tokens: `steps` steps of 64 each, then the end; counts its aborted requests. */
function longEngine(steps: number) {
  const engine = {
    name: 'long',
    aborted: 0,
    async *generate(request: GenerateRequest): AsyncIterable<EngineStep> {
      yield { tokens: Uint32Array.from(harmony('<|channel|>final<|message|>')) }
      for (let i = 0; i < steps; i++) {
        if (request.signal?.aborted) {
          engine.aborted++
          yield { tokens: new Uint32Array(0), finishReason: 'abort' }
          return
        }
        await new Promise((resolve) => setImmediate(resolve))
        yield { tokens: Uint32Array.from({ length: 64 }, () => 13225) }
      }
      yield { tokens: Uint32Array.from(harmony('<|return|>')), finishReason: 'stop' }
    },
  }
  return engine
}

async function startGateway(t: ExecutionContext, options: Record<string, unknown>) {
  const server = createGateway({ onDiagnostic: () => {}, onError: () => {}, ...options })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  )
  return (server.address() as AddressInfo).port
}

/** Resolves with whether `check` held within `ms`, asking it again after each answer (it reads the gateway). */
async function eventually(check: () => Promise<boolean>, ms = 20_000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((resolve) => setTimeout(resolve, 10)))
    if (await check()) return true
  return check()
}

/** The gateway's count of clients dropped at the write timeout, by transport. */
async function writeTimeouts(port: number, transport: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
  const line = new RegExp(`^harmony_write_timeouts_total\\{transport="${transport}"\\} (\\d+)$`, 'm').exec(text)
  return line === null ? 0 : Number(line[1])
}

function post(path: string, json: object): [string, string] {
  const body = JSON.stringify(json)
  return [`POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}`, body]
}

test('the gateway drops a Chat client that stops reading at http.writeTimeoutMs: its engine request aborted, the drop counted', async (t) => {
  // Endless, for all a client that reads nothing could take.
  const engine = longEngine(Number.MAX_SAFE_INTEGER)
  const port = await startGateway(t, { engine, http: { writeTimeoutMs: 20 } })
  await stalledClient(
    t,
    port,
    ...post('/v1/chat/completions', { model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }], stream: true }),
  )
  t.true(await until(() => engine.aborted === 1, 20_000), 'the engine request is aborted')
  t.is(await writeTimeouts(port, 'sse'), 1)
})

test('the gateway lets go of a background stream’s follower that stops reading; the run goes on to its end', async (t) => {
  // About 13 MiB of events: more than the socket buffers, less than the log keeps for a follower.
  const engine = longEngine(6_000)
  const store = new MemoryResponseStore()
  const port = await startGateway(t, { engine, responses: { store }, http: { writeTimeoutMs: 20 } })
  const socket = connect(port, '127.0.0.1')
  t.teardown(() => socket.destroy())
  const [head, body] = post('/v1/responses', { model: 'gpt-oss', input: 'hi', background: true, stream: true })
  // The response's id, from the first bytes; then the client reads nothing more.
  const id = await new Promise<string>((resolve) => {
    let text = ''
    const read = (chunk: Buffer) => {
      text += chunk.toString('latin1')
      const found = /"id":"(resp_[0-9a-f]+)"/.exec(text)
      if (found === null) return
      socket.off('data', read)
      socket.pause()
      resolve(found[1]!)
    }
    socket.on('data', read)
    socket.write(`${head}\r\n\r\n${body}`)
  })
  t.true(await eventually(async () => (await writeTimeouts(port, 'sse')) === 1), 'the follower is dropped')
  t.true(await eventually(async () => (await store.get(id))?.response.status === 'completed'), 'the run ended as it would have')
  t.is(engine.aborted, 0)
})
