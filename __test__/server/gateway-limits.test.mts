/**
 * The example gateway under bad input and bad clients, on 127.0.0.1: malformed, oversized and wrongly typed
 * requests get OpenAI-shaped 4xx answers with memory bounded; clients that stop reading hold the engine back
 * instead of filling memory; thousands of aborted streams leave no generation running.
 */
import { once } from 'node:events'
import { request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'
import { connect } from 'node:net'
import { join } from 'node:path'

import test from 'ava'

import { ReplayEngine } from 'harmony-stream/engines'

import { harmony } from '../helpers/harmony.mjs'
import { untilStalled } from '../helpers/stall.mjs'
import { until } from '../helpers/until.mjs'

const root = join(import.meta.dirname, '..', '..')
const { createGateway } = (await import(join(root, 'examples/gateway/server.mjs'))) as {
  createGateway(options: Record<string, unknown>): import('node:http').Server
}

/** A long completion: reasoning, then a long answer (about 60k tokens). */
const LONG = harmony(
  `<|channel|>analysis<|message|>Plan.<|end|><|start|>assistant<|channel|>final<|message|>${'All work and no play makes a gateway dull. '.repeat(6000)}<|return|>`,
)

/** The replay engine, counting generations that are running (started and not yet ended). */
function countingEngine(completions: number[][], interval: number) {
  const replay = new ReplayEngine({ completions, interval })
  const engine = {
    name: 'counting',
    running: 0,
    started: 0,
    steps: 0,
    generate(request: Parameters<ReplayEngine['generate']>[0]) {
      const steps = replay.generate(request)
      return (async function* () {
        engine.running++
        engine.started++
        try {
          for await (const step of steps) {
            engine.steps++
            yield step
          }
        } finally {
          engine.running--
        }
      })()
    },
  }
  return engine
}

async function start(options: Record<string, unknown>) {
  const server = createGateway({ onDiagnostic: () => {}, onError: () => {}, ...options })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

/** What the tests read of the gateway's JSON answers (errors, /v1/models, /health, a completion); null for an empty body. */
interface Answer {
  error?: { type: string; param: string | null }
  object?: string
  data?: { id: string }[]
  choices?: { message: { content: string } }[]
  status?: string
  engine?: string
  implementation?: string
}

function send(
  port: number,
  method: string,
  path: string,
  body?: string | Buffer,
  headers: Record<string, string | number> = { 'content-type': 'application/json' },
) {
  return new Promise<{ status: number; json: Answer | null }>((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let text = ''
      res
        .setEncoding('utf8')
        .on('data', (c) => (text += c))
        .on('end', () => resolve({ status: res.statusCode!, json: text ? JSON.parse(text) : null }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

const CHAT = JSON.stringify({ model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }] })

test('bad requests: OpenAI-shaped 4xx naming the field; /v1/models and /health', async (t) => {
  const { port, close } = await start({
    engine: countingEngine([harmony('<|channel|>final<|message|>ok<|return|>')], 1),
    implementation: 'js',
  })
  t.teardown(close)
  for (const [body, status, param] of [
    ['{}', 400, 'model'],
    ['{"model":"m","messages":"hello"}', 400, 'messages'],
    ['{"model":42,"messages":[{"role":"user","content":"x"}]}', 400, 'model'],
    ['{"model":"m","messages":[{"role":"user","content":"x"}],"stream":"yes"}', 400, 'stream'],
    [
      '{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}',
      400,
      'messages[0].content[0].type',
    ],
    ['{"model":"m","messages":[{"role":"tool","tool_call_id":"nope","content":"x"}]}', 400, 'messages[0].tool_call_id'],
    ['{"model":"m", "messages": [', 400, null],
  ] as const) {
    const answer = await send(port, 'POST', '/v1/chat/completions', body)
    t.is(answer.status, status, body)
    t.is(answer.json?.error?.type, 'invalid_request_error', body)
    t.is(answer.json?.error?.param, param, body)
  }
  t.is((await send(port, 'POST', '/v1/chat/completions', CHAT, { 'content-type': 'text/plain' })).status, 415)
  t.is(
    (await send(port, 'POST', '/v1/responses', '{"model":"m","input":"x","previous_response_id":"r"}')).json?.error?.param,
    'previous_response_id',
  )
  t.is((await send(port, 'GET', '/v1/chat/completions')).status, 405)
  t.is((await send(port, 'GET', '/nowhere')).status, 404)
  const models = await send(port, 'GET', '/v1/models')
  t.is(models.json?.object, 'list')
  t.is(models.json?.data?.[0].id, 'gpt-oss')
  t.deepEqual((await send(port, 'GET', '/health')).json, { status: 'ok', engine: 'counting', implementation: 'js' })
  const ok = await send(port, 'POST', '/v1/chat/completions', CHAT)
  t.is(ok.json?.choices?.[0].message.content, 'ok')
})

test.serial('oversized bodies: 413 without reading them, eight at once, memory bounded', async (t) => {
  const { port, close } = await start({
    engine: countingEngine([harmony('<|channel|>final<|message|>ok<|return|>')], 1),
    bodyLimit: 1 << 20,
  })
  t.teardown(close)
  const before = process.memoryUsage().rss
  const big = Buffer.alloc(50 << 20, 'x')
  const declared = await Promise.all(
    Array.from({ length: 8 }, () => send(port, 'POST', '/v1/chat/completions', big).catch(() => ({ status: 413, json: null }))),
  )
  t.true(declared.every((answer) => answer.status === 413))
  // Without a content-length: the gateway stops reading at the limit and closes the connection.
  const streamed = await Promise.all(
    Array.from({ length: 8 }, async () => {
      const socket = connect(port, '127.0.0.1')
      await once(socket, 'connect')
      socket.write('POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n')
      let answer = ''
      socket.setEncoding('utf8').on('data', (c) => (answer += c))
      const closed = once(socket, 'close')
      let sent = 0
      const chunk = `10000\r\n${'x'.repeat(0x10000)}\r\n`
      const timer = setInterval(() => {
        if (!socket.destroyed && sent < 800) socket.write(chunk, () => sent++)
      }, 1)
      socket.on('error', () => {})
      await closed
      clearInterval(timer)
      return { answer, sent }
    }),
  )
  for (const { answer, sent } of streamed) {
    t.regex(answer, /^HTTP\/1\.1 413/)
    t.true(sent < 400, `stopped after ${sent} × 64 KiB`)
  }
  const grown = (process.memoryUsage().rss - before) / 2 ** 20
  t.log(`RSS grew ${grown.toFixed(0)} MiB (the test's own 50 MiB buffer included)`)
  t.true(grown < 150, `RSS grew ${grown.toFixed(0)} MiB`)
})

test.serial('10 clients that stop reading a long stream: the engine is held back, memory bounded, released when they go', async (t) => {
  // One token per step: ~9 MB of SSE per stream, more than the socket buffers hold.
  const engine = countingEngine([LONG], 1)
  const { port, close } = await start({ engine, implementation: 'js' })
  t.teardown(close)
  const before = process.memoryUsage().rss
  const body = JSON.stringify({ model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }], stream: true })
  const sockets = await Promise.all(
    Array.from({ length: 10 }, async () => {
      const socket = connect(port, '127.0.0.1')
      await once(socket, 'connect')
      socket.write(
        `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      )
      socket.pause()
      return socket
    }),
  )
  // All ten generations start (bounded wait), then their sockets' buffers fill.
  await until(() => engine.running === 10, 20_000)
  const pulled = await untilStalled(() => engine.steps, 10)
  t.is(engine.running, 10, 'all ten generations are held, not finished into memory')
  t.true(engine.steps - pulled <= 10, `the engine is not pulled while nobody reads (${pulled} → ${engine.steps} steps)`)
  t.true(pulled < 10 * LONG.length, `${pulled} steps pulled of ${10 * LONG.length}`)
  const grown = (process.memoryUsage().rss - before) / 2 ** 20
  t.log(`RSS grew ${grown.toFixed(0)} MiB with 10 stalled streams of ~${LONG.length} tokens`)
  t.true(grown < 100, `RSS grew ${grown.toFixed(0)} MiB (bound: 100 MiB)`)
  for (const socket of sockets) socket.destroy()
  await until(() => engine.running === 0)
  t.is(engine.running, 0, 'the clients left: their generations ended')
})

test.serial('3,000 streams aborted by their clients leave no generation running', async (t) => {
  const engine = countingEngine([LONG], 4)
  const { port, close } = await start({ engine, implementation: 'js' })
  t.teardown(close)
  const body = JSON.stringify({ model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }], stream: true })
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const controller = new AbortController()
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/v1/chat/completions',
          headers: { 'content-type': 'application/json' },
          signal: controller.signal,
        },
        (res) => {
          res.once('data', () => controller.abort())
          res.on('error', () => resolve())
          res.on('close', () => resolve())
        },
      )
      req.on('error', (error) => (error.name === 'AbortError' ? resolve() : reject(error)))
      req.end(body)
    })
  const before = process.memoryUsage().rss
  for (let batch = 0; batch < 60; batch++) await Promise.all(Array.from({ length: 50 }, one))
  await until(() => engine.running === 0)
  t.is(engine.started, 3000)
  t.is(engine.running, 0)
  const grown = (process.memoryUsage().rss - before) / 2 ** 20
  t.log(`RSS after 3,000 aborted streams: ${grown.toFixed(0)} MiB more (before any GC)`)
  t.true(grown < 200, `RSS grew ${grown.toFixed(0)} MiB`)
})
