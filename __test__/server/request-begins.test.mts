/**
 * Requests that arrive together are begun a few a turn of the event loop (server/pipeline/begin-budget.ts), so
 * that the first ones' engines can answer while the rest wait. The requests go out on raw sockets connected
 * beforehand and written in one tick, so that they reach the gateway together; turns are counted by a
 * `setImmediate` chain, not timed.
 */
import { once } from 'node:events'
import { createRequire } from 'node:module'
import { connect, type Socket } from 'node:net'

import test, { type ExecutionContext } from 'ava'
import { type GenerateRequest, ReplayEngine } from 'harmony-stream/engines'
import type { GatewayServer } from 'harmony-stream/server'

import type * as BeginBudgetModule from '../../src/server/pipeline/begin-budget.ts'
import { startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'

// Required, not imported: the server entry is loaded as CommonJS, and an import of the file would load a second
// copy of it, which no gateway uses.
const { requestBegins } = createRequire(import.meta.url)('../../src/server/pipeline/begin-budget.ts') as typeof BeginBudgetModule

const ANSWER = harmony('<|channel|>final<|message|>Hello there.<|return|>')

/** A gateway whose engine notes the turn of the event loop each generation began in, counted while asked. */
async function countingGateway(t: ExecutionContext) {
  const turns = { now: 0, running: false }
  const tick = () => {
    turns.now++
    if (turns.running) setImmediate(tick)
  }
  const begunIn: number[] = []
  const replay = new ReplayEngine({ completions: [ANSWER] })
  const engine = {
    name: 'counting',
    generate(request: GenerateRequest) {
      begunIn.push(turns.now)
      return replay.generate(request)
    },
  }
  const { server, port } = await startGateway(t, { engine })
  // Stopped whatever the test's end: the chain of turns would keep the process busy.
  t.teardown(() => {
    turns.running = false
  })
  return {
    server: server as GatewayServer,
    port,
    begunIn,
    startCounting() {
      turns.running = true
      setImmediate(tick)
    },
    stopCounting() {
      turns.running = false
    },
  }
}

/** `count` connections, each accepted by `server` before this resolves. */
async function connected(server: import('node:http').Server, port: number, count: number): Promise<Socket[]> {
  let accepted = 0
  let onConnection = () => {}
  const all = new Promise<void>((resolve) => {
    onConnection = () => {
      if (++accepted === count) resolve()
    }
    server.on('connection', onConnection)
  })
  const sockets = await Promise.all(
    Array.from({ length: count }, async () => {
      const socket = connect(port, '127.0.0.1')
      await once(socket, 'connect')
      return socket
    }),
  )
  await all
  server.off('connection', onConnection)
  return sockets
}

function chatRequest(stream: boolean): string {
  const body = JSON.stringify({ model: 'gpt-oss', stream, messages: [{ role: 'user', content: 'Hi' }] })
  return (
    'POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n' +
    `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`
  )
}

/** Everything the server sent on `socket` until it closed it. */
function answerOf(socket: Socket): Promise<string> {
  let answer = ''
  socket.setEncoding('utf8')
  socket.on('data', (data: string) => (answer += data))
  return once(socket, 'close').then(() => answer)
}

// Serial: both use the process's one budget, and count what waits in it.
test.serial('requests that arrive together are begun a budget a turn, and every one is answered', async (t) => {
  const { budget } = requestBegins
  const count = budget * 3 + 1
  // More than ten generations at once, each listening to the gateway's shutdown: no leak to warn of.
  const warnings: Error[] = []
  const onWarning = (warning: Error) => warnings.push(warning)
  process.on('warning', onWarning)
  t.teardown(() => process.off('warning', onWarning))
  const gateway = await countingGateway(t)
  const sockets = await connected(gateway.server, gateway.port, count)
  const answers = sockets.map(answerOf)
  gateway.startCounting()
  for (const [i, socket] of sockets.entries()) socket.write(chatRequest(i % 2 === 0))
  const got = await Promise.all(answers)
  gateway.stopCounting()
  for (const answer of got) {
    t.regex(answer, /^HTTP\/1\.1 200 /)
    // Whole, the answer in one piece; streamed, its chunks to the end.
    t.regex(answer, /Hello there\.|"finish_reason":"stop"[\s\S]*data: \[DONE\]/)
  }
  t.is(gateway.begunIn.length, count)
  const perTurn = new Map<number, number>()
  for (const turn of gateway.begunIn) perTurn.set(turn, (perTurn.get(turn) ?? 0) + 1)
  // A turn begins its budget, and the longest waiting at its end whatever it spent (turn-budget.ts).
  t.true(Math.max(...perTurn.values()) <= budget + 1, `begun per turn: ${JSON.stringify([...perTurn])}`)
  t.true(perTurn.size >= Math.ceil(count / (budget + 1)))
  t.deepEqual(
    warnings.map((w) => w.name),
    [],
  )
})

test.serial('clients that leave while their requests wait are counted as gone, and the gateway still shuts down', async (t) => {
  const { budget } = requestBegins
  const count = budget * 3
  const gateway = await countingGateway(t)
  const sockets = await connected(gateway.server, gateway.port, count)
  const answers = sockets.map(answerOf)
  for (const socket of sockets) socket.write(chatRequest(true))
  // Every other client leaves at once: most of them while their requests wait for a turn.
  const left = sockets.filter((_, i) => i % 2 === 1)
  for (const socket of left) socket.destroy()
  const got = await Promise.all(answers)
  for (const [i, answer] of got.entries()) if (i % 2 === 0) t.regex(answer, /^HTTP\/1\.1 200 [\s\S]*data: \[DONE\]/)
  // The gateway is still whole: another request is answered…
  const [after] = await connected(gateway.server, gateway.port, 1)
  const answer = answerOf(after!)
  after!.write(chatRequest(false))
  t.regex(await answer, /^HTTP\/1\.1 200 [\s\S]*Hello there\./)
  // …and once it shuts down, every request has ended: each that stayed completed, each that left was counted
  // as gone, whether it left while it waited or once begun (a request that never ended would hold this for ever).
  await gateway.server.shutdown(0)
  t.is(requestBegins.queued, 0)
  const { completed, clientClosed, failed } = gateway.server.outcomes
  // The outcomes count streams: the last request, answered whole, is not one.
  t.is(failed, 0)
  t.is(completed + clientClosed, count)
  // A client that left may still have had its whole answer written before the gateway saw it go.
  t.true(completed >= count / 2)
  t.true(gateway.begunIn.length <= count + 1)
})
