/**
 * The HTTP edge against clients that misbehave, on a server built from the package's helpers (hardenServer,
 * readJsonBody, sendError) on 127.0.0.1: a refusal sent before the body was read closes the connection (an
 * endless body is not read on), Node's own refusals come in OpenAI's error shape, the timeouts are the ones set.
 * Every client here is bounded in bytes and time and stops by itself.
 */
import { once } from 'node:events'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { type AddressInfo, connect, type Socket } from 'node:net'

import test from 'ava'
import { DEFAULT_SERVER_LIMITS, HttpError, hardenServer, readJsonBody, sendError, serverOptions } from 'harmony-stream/http'
import { createGateway } from 'harmony-stream/server'
import { exchange } from '../helpers/raw-http.mjs'
import { until } from '../helpers/until.mjs'

/** A server whose routes refuse as a gateway's do: 404 anywhere but /v1/x, 405 for GET, 415 for a non-JSON body. */
async function start(limits = {}, checkEveryMs = 50): Promise<{ server: Server; port: number; bytesRead: () => number }> {
  let bytes = 0
  const server = createServer({ connectionsCheckingInterval: checkEveryMs }, async (request: IncomingMessage, response: ServerResponse) => {
    try {
      if (request.url !== '/v1/x') throw new HttpError(404, 'no route', { code: 'not-found' })
      if (request.method !== 'POST') throw new HttpError(405, 'POST only', { code: 'method-not-allowed' })
      const body = await readJsonBody(request, { limit: 1024 })
      response.end(JSON.stringify(body))
    } catch (error) {
      sendError(response, error)
    }
  })
  server.on('connection', (socket: Socket) => socket.on('close', () => (bytes += socket.bytesRead)))
  hardenServer(server, limits)
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return { server, port: (server.address() as AddressInfo).port, bytesRead: () => bytes }
}

/**
 * Sends `head` then an endless chunked body (1 KiB chunks) until the server closes the connection or
 * `maxMs` passes (a bound a loaded machine stays within: a server that closes ends it at once); returns what
 * came back, whether the server closed, and how many body bytes were written.
 */
async function endlessBody(port: number, head: string, maxMs = 20_000): Promise<{ answer: string; closed: boolean; written: number }> {
  const socket = connect(port, '127.0.0.1')
  await once(socket, 'connect')
  let answer = ''
  let closed = false
  let written = 0
  socket.on('data', (data) => (answer += data))
  socket.on('error', () => {})
  const done = new Promise<void>((resolve) => socket.on('close', () => resolve()))
  socket.write(head)
  const chunk = `400\r\n${'x'.repeat(1024)}\r\n`
  const deadline = Date.now() + maxMs
  while (!closed && Date.now() < deadline) {
    if (socket.destroyed || socket.writableEnded) break
    const ok = socket.write(chunk)
    written += 1024
    if (!ok) await Promise.race([once(socket, 'drain'), done, new Promise((r) => setTimeout(r, 50))])
    await new Promise((r) => setImmediate(r))
    if (socket.destroyed) closed = true
  }
  await Promise.race([done, new Promise((r) => setTimeout(r, 10_000).unref())])
  closed = socket.destroyed || closed
  socket.destroy()
  return { answer, closed, written }
}

const chunkedHead = (method: string, path: string, type = 'application/json') =>
  `${method} ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: ${type}\r\ntransfer-encoding: chunked\r\n\r\n`

for (const [status, head] of [
  [404, chunkedHead('POST', '/nowhere')],
  [405, chunkedHead('PUT', '/v1/x')],
  [415, chunkedHead('POST', '/v1/x', 'text/plain')],
  [413, chunkedHead('POST', '/v1/x')],
] as const) {
  test(`a ${status} sent before the body was read closes the connection: an endless body is not read on`, async (t) => {
    const { server, port, bytesRead } = await start()
    t.teardown(() => server.close())
    const { answer, closed } = await endlessBody(port, head)
    t.regex(answer, new RegExp(`^HTTP/1.1 ${status} `))
    t.regex(answer, /connection: close/i)
    t.true(closed, 'the server closed the connection')
    server.closeAllConnections()
    await new Promise((r) => setTimeout(r, 50))
    // What the server read is bounded (its socket buffers), however long the client would have gone on.
    t.true(bytesRead() < 2 * 1024 * 1024, `read ${bytesRead()} bytes`)
  })
}

test('a GET refused with 404 keeps a keep-alive connection: nothing was left unread', async (t) => {
  const { server, port } = await start()
  t.teardown(() => server.close())
  const socket = connect(port, '127.0.0.1')
  await once(socket, 'connect')
  let answer = ''
  socket.on('data', (d) => (answer += d))
  socket.write('GET /nowhere HTTP/1.1\r\nhost: x\r\n\r\nGET /nowhere HTTP/1.1\r\nhost: x\r\n\r\n')
  await until(() => (answer.match(/HTTP\/1.1 404/g) ?? []).length === 2)
  socket.destroy()
  t.is((answer.match(/HTTP\/1.1 404/g) ?? []).length, 2)
})

test("Node's own refusals come in OpenAI's error shape and close the connection: malformed HTTP, huge headers, a request too slow", async (t) => {
  // The default timeouts for what must not time out (a 300 ms one is within a loaded machine's pauses), short
  // ones for the request that must.
  const { server, port } = await start()
  t.teardown(() => server.close())
  const short = await start({ headersTimeoutMs: 300, requestTimeoutMs: 600 })
  t.teardown(() => short.server.close())
  const body = (answer: string) => JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))

  const malformed = await exchange(port, 'BREW /pot HTCPCP/1.0\r\n\r\n')
  t.regex(malformed.answer, /^HTTP\/1.1 400 /)
  t.deepEqual(body(malformed.answer).error.code, 'malformed_request')
  t.is(body(malformed.answer).error.type, 'invalid_request_error')

  const huge = await exchange(port, `GET /v1/x HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(40_000)}\r\n\r\n`)
  t.regex(huge.answer, /^HTTP\/1.1 431 /)
  t.is(body(huge.answer).error.code, 'headers_too_large')

  // Headers never finished: the headers timeout answers 408 and closes.
  const slow = await exchange(short.port, 'POST /v1/x HTTP/1.1\r\nhost: x\r\n')
  t.regex(slow.answer, /^HTTP\/1.1 408 /)
  t.is(body(slow.answer).error.code, 'request_timeout')
  t.true(slow.closed)
})

test('the timeouts are set, checked, and default to bounds tighter than Node’s', (t) => {
  const server = hardenServer(createServer())
  t.is(server.headersTimeout, DEFAULT_SERVER_LIMITS.headersTimeoutMs)
  t.is(server.requestTimeout, DEFAULT_SERVER_LIMITS.requestTimeoutMs)
  t.is(server.keepAliveTimeout, DEFAULT_SERVER_LIMITS.keepAliveTimeoutMs)
  t.true(DEFAULT_SERVER_LIMITS.headersTimeoutMs < 60_000 && DEFAULT_SERVER_LIMITS.requestTimeoutMs < 300_000)
  t.throws(() => hardenServer(createServer(), { headerTimeoutMs: 5 } as never), {
    instanceOf: TypeError,
    message: /did you mean 'headersTimeoutMs'/,
  })
  t.throws(() => hardenServer(createServer(), { requestTimeoutMs: 0 }), { instanceOf: RangeError })
})

test('serverOptions makes the timeouts act when they say: the gateway answers slow headers with a 408 at its limit, not at Node’s 30 s check', async (t) => {
  t.deepEqual(serverOptions({ headersTimeoutMs: 300, requestTimeoutMs: 600 }), { connectionsCheckingInterval: 30 })
  t.deepEqual(serverOptions(), { connectionsCheckingInterval: DEFAULT_SERVER_LIMITS.headersTimeoutMs / 10 })
  t.throws(() => serverOptions({ headersTimeout: 5 } as never), { instanceOf: TypeError, message: /headersTimeout/ })
  // Without it the check would come 30 s after the connection, past this test's own timeout.
  const server = createGateway({ replay: [[200002]], serverLimits: { headersTimeoutMs: 300, requestTimeoutMs: 600 } })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const slow = await exchange((server.address() as AddressInfo).port, 'POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n')
  t.regex(slow.answer, /^HTTP\/1.1 408 /)
  t.true(slow.closed)
})
