/**
 * The example gateway against the request shapes of the bounded attack run that found its weak spots (on
 * 127.0.0.1 only, every loop bounded): bodies that used to stall every stream or end in a 500 are now 400s
 * naming the field; refusals close the connection; a client that leaves is counted, not logged; a large honest
 * request is rendered off the event loop. Timing is left to `npm run bench:stall`: here, only outcomes.
 */
import { once } from 'node:events'
import { request as httpRequest } from 'node:http'
import { type AddressInfo, connect } from 'node:net'

import test from 'ava'

// @ts-expect-error the example gateway is plain JavaScript
import { createGateway } from '../../examples/gateway/server.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { exchange } from '../helpers/raw-http.mjs'
import { until } from '../helpers/until.mjs'

const COMPLETION = harmony('<|channel|>final<|message|>Hello there, this is a longer answer.<|return|>')

async function startGateway(options: Record<string, unknown> = {}) {
  const errors: unknown[] = []
  const server = createGateway({
    replay: [COMPLETION],
    onDiagnostic: () => {},
    onError: (error: unknown) => errors.push(error),
    renderWorkers: 1,
    ...options,
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const port = (server.address() as AddressInfo).port
  return { server, port, errors }
}

/** POSTs `body` (a string) and returns the status and parsed JSON answer. */
function post(
  port: number,
  path: string,
  body: string,
): Promise<{ status: number; json: { error?: { param: string | null; code: string; message: string } } }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (d) => (text += d))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, json: text.startsWith('{') ? JSON.parse(text) : {} }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

/** `{"a":{"a":…}}` nested `depth` deep, as JSON text (JSON.stringify would recurse). */
function deepJson(depth: number, key: string): string {
  return `${`{"${key}":`.repeat(depth)}{}${'}'.repeat(depth)}`
}

test('the bodies that stalled the gateway or ended in a 500 are 400s naming the field, and the gateway serves on', async (t) => {
  const { server, port, errors } = await startGateway()
  t.teardown(() => server.close())
  const user = '{"role":"user","content":"hi"}'
  const cases: [string, string, string | RegExp][] = [
    ['/v1/responses', `{"model":"m","input":[${user}${',{"role":"assistant","content":""}'.repeat(118_000)}]}`, 'input'],
    ['/v1/responses', `{"model":"m","input":"${'x'.repeat(3_900_000)}"}`, 'input'],
    ['/v1/chat/completions', `{"model":"m","messages":[{"role":"user","content":"a${' '.repeat(1_000_000)}b"}]}`, 'messages[0].content'],
    ['/v1/chat/completions', `{"model":"m","messages":[${Array(125_000).fill(user).join(',')}]}`, 'messages'],
    ['/v1/chat/completions', `{"model":"m","messages":[${user}],"tool_choice":${deepJson(5000, 'function')}}`, /^tool_choice/],
    [
      '/v1/chat/completions',
      `{"model":"m","messages":[${user}],"tools":[{"type":"function","function":{"name":"f","parameters":${deepJson(5000, 'items')}}}]}`,
      /^tools\[0\]\.function\.parameters/,
    ],
    ['/v1/chat/completions', `{"model":"${'m'.repeat(1_000_000)}","messages":[${user}]}`, 'model'],
  ]
  for (const [path, body, param] of cases) {
    const { status, json } = await post(port, path, body)
    t.is(status, 400, `${path} ${body.slice(0, 60)}`)
    if (typeof param === 'string') t.is(json.error?.param, param)
    else t.regex(String(json.error?.param), param)
  }
  // Still serving, with nothing logged as a gateway error.
  const ok = await post(port, '/v1/chat/completions', `{"model":"m","messages":[${user}]}`)
  t.is(ok.status, 200)
  t.deepEqual(errors, [])
})

test('the same attacks on the Messages routes are 400s in Anthropic shape naming the field, and the gateway serves on', async (t) => {
  const { server, port, errors } = await startGateway()
  t.teardown(() => server.close())
  const user = '{"role":"user","content":"hi"}'
  const cases: [string, string, RegExp][] = [
    ['/v1/messages', `{"model":"m","max_tokens":5,"messages":[${Array(125_000).fill(user).join(',')}]}`, /^messages/],
    [
      '/v1/messages',
      `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"a${' '.repeat(1_000_000)}b"}]}`,
      /^messages\[0\]\.content/,
    ],
    [
      '/v1/messages',
      `{"model":"m","max_tokens":5,"messages":[${user}],"tools":[{"name":"f","input_schema":${deepJson(5000, 'items')}}]}`,
      /^tools\[0\]\.input_schema\.items/,
    ],
    [
      '/v1/messages/count_tokens',
      `{"model":"m","messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":${deepJson(5000, 'a')}}]}]}`,
      /messages/,
    ],
  ]
  for (const [path, body, message] of cases) {
    const { status, json } = await post(port, path, body)
    t.is(status, 400, `${path} ${body.slice(0, 60)}`)
    const answer = json as { type?: string; error?: { type?: string; message?: string } }
    t.is(answer.type, 'error')
    t.is(answer.error?.type, 'invalid_request_error')
    t.regex(String(answer.error?.message), message)
  }
  const ok = await post(port, '/v1/messages', `{"model":"m","max_tokens":5,"messages":[${user}]}`)
  t.is(ok.status, 200)
  t.deepEqual(errors, [])
})

test('a large honest request is rendered in a worker and answered', async (t) => {
  const { server, port } = await startGateway({ renderInlineBytes: 1024 })
  t.teardown(() => server.close())
  const text = 'All work and no play makes Jack a dull boy. '.repeat(40_000)
  const { status } = await post(port, '/v1/chat/completions', JSON.stringify({ model: 'm', messages: [{ role: 'user', content: text }] }))
  t.is(status, 200)
})

test('clients that leave before the first step are counted, not logged as errors', async (t) => {
  // An engine that sends no step until its request is aborted, so every client leaves while it waits.
  let started = 0
  const slow = {
    name: 'slow',
    async *generate(request: { signal?: AbortSignal }) {
      started++
      await new Promise((resolve) => request.signal?.addEventListener('abort', resolve, { once: true }))
      throw Object.assign(new Error('aborted'), { name: 'AbortError' })
    },
  }
  const { server, port, errors } = await startGateway({ engine: slow })
  t.teardown(() => server.close())
  const body = '{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'
  for (let i = 0; i < 20; i++) {
    const socket = connect(port, '127.0.0.1')
    await once(socket, 'connect')
    socket.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
    )
    // Gone once the gateway has the request and its engine waits: not a fixed time later.
    t.true(await until(() => started === i + 1, 10_000), 'the engine has the request')
    socket.destroy()
  }
  await until(() => server.outcomes.clientClosed === 20)
  t.is(server.outcomes.clientClosed, 20)
  t.deepEqual(errors, [])
})

test("Node's own refusals and refusals before the body come from the gateway in OpenAI's shape, closing the connection", async (t) => {
  const { server, port } = await startGateway()
  t.teardown(() => server.close())
  const malformed = await exchange(port, 'GARBAGE\r\n\r\n')
  t.regex(malformed.answer, /^HTTP\/1.1 400 [\s\S]*"code":"malformed_request"/)
  t.true(malformed.closed)
  // A 404 for a request with a body it will never read: answered at once, connection closed.
  const notFound = await exchange(
    port,
    'POST /v2/nothing HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n',
  )
  t.regex(notFound.answer, /^HTTP\/1.1 404 [\s\S]*connection: close/i)
  t.true(notFound.closed)
})
