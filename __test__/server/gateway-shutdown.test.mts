/**
 * A gateway's shutdown in the process that made it (`closeGracefully`, `GatewayServer.shutdown`): it stops
 * accepting at once; what runs may finish within the grace period; what still runs then ends with its API's
 * error (`gateway_shutdown`) rather than being cut: an SSE stream's error event, a WebSocket turn's
 * `response.failed`, a background response kept failed; WebSocket connections close with 1001. The same shutdown
 * through `harmony-stream serve` and the real clients: serve-shutdown.test.mts. A suite of its own: the
 * command-line suite (server.test.mts) blocks its event loop on synchronous child processes, which would hold
 * these servers' answers back.
 */
import { request } from 'node:http'
import type { AddressInfo } from 'node:net'

import test from 'ava'
import { closeGracefully, createGateway, MemoryResponseStore } from 'harmony-stream/server'

import { connect } from '../helpers/responses-socket.mjs'
import { until } from '../helpers/until.mjs'

/** An engine that sends the start of an answer, then waits for `release()` before its end: a stream held open on purpose. */
function heldEngine() {
  let release!: () => void
  const released = new Promise<void>((resolve) => (release = resolve))
  let aborted = false
  let started = 0
  const engine = {
    name: 'held',
    async *generate(request: { signal?: AbortSignal }) {
      started++
      // Aborted while it runs (an engine client stops listening once its request is over, as http.ts does).
      const onAbort = () => (aborted = true)
      request.signal?.addEventListener('abort', onAbort)
      try {
        yield { tokens: Uint32Array.of(200005, 17196, 200008, 12194) }
        await Promise.race([released, new Promise((resolve) => request.signal?.addEventListener('abort', resolve))])
        if (request.signal?.aborted) return
        yield { tokens: Uint32Array.of(200002) }
      } finally {
        request.signal?.removeEventListener('abort', onAbort)
      }
    },
  }
  return { engine, release, aborted: () => aborted, started: () => started }
}

/** A streamed Chat request; resolves with its first bytes and, later, how it ended. */
function streamedChat(port: number) {
  return streamedPost(port, '/v1/chat/completions', { model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }], stream: true })
}

/** A streamed POST; resolves with its first bytes and, later, how it ended. */
function streamedPost(
  port: number,
  path: string,
  json: object,
): Promise<{ first: string; ended: Promise<{ text: string; complete: boolean }> }> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify(json)
    const req = request({ host: '127.0.0.1', port, path, method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let text = ''
      let resolveEnd!: (value: { text: string; complete: boolean }) => void
      const ended = new Promise<{ text: string; complete: boolean }>((r) => (resolveEnd = r))
      res.setEncoding('utf8')
      res.once('data', (chunk: string) => {
        text += chunk
        resolve({ first: chunk, ended })
        res.on('data', (more: string) => (text += more))
      })
      res.once('end', () => resolveEnd({ text, complete: res.complete }))
      res.once('error', () => resolveEnd({ text, complete: false }))
      res.once('close', () => resolveEnd({ text, complete: res.complete }))
    })
    req.once('error', reject)
    req.end(body)
  })
}

test('closeGracefully: the server stops accepting at once, and a running stream finishes within the grace period', async (t) => {
  const held = heldEngine()
  const server = createGateway({ engine: held.engine, responseStore: null })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const running = await streamedChat(port)
  t.regex(running.first, /^data: /)
  const closed = closeGracefully(server, 60_000)
  // No new connection is taken.
  await t.throwsAsync(fetch(`http://127.0.0.1:${port}/health`))
  held.release()
  const { text, complete } = await running.ended
  t.true(complete)
  t.regex(text, /data: \[DONE\]\n\n$/)
  await closed
  t.false(held.aborted())
})

// With time limits the wait for the next step races a timer, which the shutdown wakes; without any, the
// engine's aborted request ends it (engines/time-limits.ts): both end the stream with the shutdown's error.
for (const [limits, engineTimeLimits] of [
  ['the default time limits', undefined],
  ['no time limit', { firstTokenMs: null, idleMs: null, deadlineMs: null }],
] as const) {
  test(`closeGracefully: a stream still running when the grace period ends ends with its error, and its engine request is aborted (${limits})`, async (t) => {
    const held = heldEngine()
    const errors: unknown[] = []
    const server = createGateway({
      engine: held.engine,
      responseStore: null,
      ...(engineTimeLimits === undefined ? {} : { engineTimeLimits }),
      observability: { onError: (error) => errors.push(error) },
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    const running = await streamedChat(port)
    await closeGracefully(server, 0)
    const { text, complete } = await running.ended
    // Not cut: the stream ends as one whose engine failed, with Chat's error chunk, and no [DONE].
    t.true(complete)
    t.false(text.includes('[DONE]'))
    const last = JSON.parse(text.trim().split('\n\n').at(-1)!.slice('data: '.length)) as { error: Record<string, unknown> }
    t.like(last.error, { type: 'server_error', code: 'gateway_shutdown' })
    t.true(held.aborted())
    t.like(errors, [{ code: 'gateway-shutdown' }])
  })
}

test('closeGracefully waits for the gateway to keep what it stopped (failed, saying why), so the store can be closed after it', async (t) => {
  const held = heldEngine()
  const store = new MemoryResponseStore()
  const server = createGateway({ engine: held.engine, responseStore: store, observability: { onError: () => {} } })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const running = await streamedPost(port, '/v1/responses', { model: 'gpt-oss', input: 'hi', stream: true })
  const id = /"id":"(resp_[0-9a-f]+)"/.exec(running.first)?.[1]
  t.truthy(id, running.first)
  await closeGracefully(server, 0)
  // The stopped response was kept before closeGracefully resolved: closing the store now loses nothing.
  const kept = await store.get(id!)
  await store.close()
  t.truthy(kept)
  t.like(kept!.response, { status: 'failed', error: { code: 'gateway_shutdown' } })
  // The client was told as much: the error event, then response.failed, the stream's end.
  const { text, complete } = await running.ended
  t.true(complete)
  t.regex(
    text,
    /event: error\ndata: [^\n]*"code":"gateway_shutdown"[^\n]*\n\nevent: response\.failed\ndata: [^\n]*"status":"failed"[^\n]*\n\n$/,
  )
})

test('closeGracefully and WebSockets: an idle connection closes at once (1001), a turn asked for is refused, the running turn may finish, then its connection closes', async (t) => {
  const held = heldEngine()
  const server = createGateway({ engine: held.engine, responseStore: null })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const idle = await connect(t, port)
  const busy = await connect(t, port)
  busy.send({ type: 'response.create', model: 'gpt-oss', input: 'hi', store: false })
  await until(() => busy.frames.some((frame) => frame.type === 'response.output_text.delta'))
  const closed = closeGracefully(server, 60_000)
  await until(() => idle.closed !== null)
  t.is(idle.closed?.code, 1001, 'going away')
  // A turn asked for now is refused, with the code of a shutdown.
  busy.send({ type: 'response.create', model: 'gpt-oss', input: 'again', store: false })
  await until(() => busy.frames.some((frame) => frame.type === 'error'))
  t.like(
    busy.frames.find((frame) => frame.type === 'error'),
    { status: 503, error: { code: 'gateway_shutdown' } },
  )
  // The running turn finishes within the grace period; then its connection closes too.
  held.release()
  await until(() => busy.frames.some((frame) => frame.type === 'response.completed'))
  await closed
  await until(() => busy.closed !== null)
  t.is(busy.closed?.code, 1001)
})

test('closeGracefully and WebSockets: a turn still running when the grace period ends ends with response.failed, then the connection closes (1001)', async (t) => {
  const held = heldEngine()
  const server = createGateway({ engine: held.engine, responseStore: null, observability: { onError: () => {} } })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const busy = await connect(t, port)
  busy.send({ type: 'response.create', model: 'gpt-oss', input: 'hi', store: false })
  await until(() => busy.frames.some((frame) => frame.type === 'response.output_text.delta'))
  await closeGracefully(server, 0)
  const turn = await busy.turn()
  t.is(turn.at(-1)!.type, 'response.failed')
  t.like(turn.at(-1)!.response, { status: 'failed', error: { code: 'gateway_shutdown' } })
  t.true(held.aborted())
  await until(() => busy.closed !== null)
  t.is(busy.closed?.code, 1001)
})

test('closeGracefully and background responses: one still running when the grace period ends is kept failed, saying why, and its follower told', async (t) => {
  const held = heldEngine()
  const store = new MemoryResponseStore()
  const server = createGateway({ engine: held.engine, responseStore: store, observability: { onError: () => {} } })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const following = await streamedPost(port, '/v1/responses', { model: 'gpt-oss', input: 'hi', background: true, stream: true })
  const id = /"id":"(resp_[0-9a-f]+)"/.exec(following.first)?.[1]
  t.truthy(id, following.first)
  await until(() => held.started() > 0)
  await closeGracefully(server, 0)
  t.like((await store.get(id!))?.response, { status: 'failed', error: { code: 'gateway_shutdown' } })
  const { text } = await following.ended
  t.regex(text, /event: response\.failed\ndata: [^\n]*"code":"gateway_shutdown"/)
  t.true(held.aborted())
})
