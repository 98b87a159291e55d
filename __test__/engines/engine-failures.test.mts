/**
 * An engine that fails before its first step, as every caller meets it: `pipeSse` (the README's gateway) and
 * the example gateway answer with an HTTP error status in OpenAI's shape, not a 200 and an error frame: 502
 * for a failed engine, 503 with the engine's own `Retry-After` for an overloaded one (429 or 503). The
 * engine clients are the package's own (LlamaCppEngine), against a local server that answers as an
 * overloaded llama-server does (`{"error": {"code": 503, …}}`), and against a port nothing listens on.
 */
import { once } from 'node:events'
import { createServer, request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'

import test from 'ava'
import { ChatCompletionsStream, ResponsesStream, renderChatCompletionRequest } from 'harmony-stream'
import { EngineError, LlamaCppEngine } from 'harmony-stream/engines'
import { pipeSse, sendError } from 'harmony-stream/http'
import OpenAI from 'openai'

import { startGateway } from '../helpers/gateway.mjs'

async function listen(server: import('node:http').Server): Promise<number> {
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return (server.address() as AddressInfo).port
}

/** A llama-server stand-in that answers every request with `status`, its error body, and `headers`. */
async function refusingEngine(status: number, headers: Record<string, string> = {}) {
  const server = createServer((_request, response) => {
    response.writeHead(status, { 'content-type': 'application/json', ...headers })
    response.end(JSON.stringify({ error: { code: status, message: 'Loading model', type: 'unavailable_error' } }))
  })
  const port = await listen(server)
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

/** A port nothing listens on. */
async function deadUrl(): Promise<string> {
  const probe = createServer()
  const port = await listen(probe)
  await new Promise<void>((resolve) => probe.close(() => resolve()))
  return `http://127.0.0.1:${port}`
}

function get(port: number, path: string): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port, path }, (response) => {
      let body = ''
      response
        .setEncoding('utf8')
        .on('data', (chunk) => (body += chunk))
        .on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body }))
    })
      .on('error', reject)
      .end()
  })
}

const PROMPT = Array.from(renderChatCompletionRequest({ messages: [{ role: 'user', content: 'Hi' }] }).tokens)

const failures = [
  { name: 'an overloaded engine (503, Retry-After: 7)', status: 503, retryAfter: '7', code: 'engine-overloaded' },
  {
    name: 'a rate-limiting engine (429, an HTTP date)',
    status: 429,
    retryAfter: 'Wed, 25 Nov 2026 08:00:00 GMT',
    code: 'engine-overloaded',
  },
  { name: 'an engine with a Retry-After that is no delay or date', status: 503, retryAfter: '7; drop table', code: 'engine-overloaded' },
  { name: 'an engine that answers 500', status: 500, retryAfter: undefined, code: 'engine-http-error' },
  { name: 'nothing listening', status: null, retryAfter: undefined, code: 'engine-connection-error' },
] as const

for (const failure of failures) {
  test(`pipeSse: ${failure.name} before the first step is an HTTP error in OpenAI's shape, Chat and Responses`, async (t) => {
    const engine =
      failure.status === null
        ? { url: await deadUrl(), close: async () => {} }
        : await refusingEngine(failure.status, failure.retryAfter === undefined ? {} : { 'retry-after': failure.retryAfter })
    t.teardown(engine.close)
    const outcomes: string[] = []
    const errors: unknown[] = []
    const server = createServer(async (request, response) => {
      const adapter = request.url === '/chat' ? new ChatCompletionsStream({ model: 'm' }) : new ResponsesStream({ model: 'm' })
      const steps = new LlamaCppEngine({ url: engine.url }).generate({ tokens: PROMPT })
      const result = await pipeSse(response, adapter, steps).catch((error) => {
        sendError(response, error)
        return { outcome: 'threw', error }
      })
      outcomes.push(result.outcome)
      errors.push(result.error)
    })
    const port = await listen(server)
    t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
    const overloaded = failure.code === 'engine-overloaded'
    for (const path of ['/chat', '/responses']) {
      const answer = await get(port, path)
      t.is(answer.status, overloaded ? 503 : 502, path)
      t.regex(String(answer.headers['content-type']), /application\/json/)
      const validRetryAfter = failure.retryAfter !== undefined && !failure.retryAfter.includes(';')
      t.is(answer.headers['retry-after'], validRetryAfter ? failure.retryAfter : undefined)
      const body = JSON.parse(answer.body)
      t.is(body.error.type, 'server_error')
      t.is(body.error.code, failure.code.replaceAll('-', '_'))
      // Nothing of the engine's address or its own text reaches the client.
      t.false(answer.body.includes('127.0.0.1') || answer.body.includes('Loading model'))
    }
    t.deepEqual(outcomes, ['failed', 'failed'])
    for (const error of errors) {
      t.true(error instanceof EngineError)
      t.is((error as EngineError).code, failure.code)
    }
  })
}

test('the example gateway: an overloaded engine is a 503 with its Retry-After, streamed or not; the openai client raises it', async (t) => {
  const engine = await refusingEngine(503, { 'retry-after': '3' })
  t.teardown(engine.close)
  const errors: unknown[] = []
  const { client } = await startGateway(t, {
    engine: new LlamaCppEngine({ url: engine.url }),
    onError: (error: unknown) => errors.push(error),
  })
  const body = { model: 'gpt-oss', messages: [{ role: 'user' as const, content: 'Hi' }] }
  for (const stream of [false, true]) {
    const error = await t.throwsAsync(
      (async () => {
        const answer = await client.chat.completions.create({ ...body, stream })
        if (stream) for await (const _ of answer as AsyncIterable<unknown>);
      })(),
      { instanceOf: OpenAI.APIError },
    )
    t.is((error as InstanceType<typeof OpenAI.APIError>).status, 503, `stream: ${stream}`)
    t.is((error as InstanceType<typeof OpenAI.APIError>).headers?.get('retry-after'), '3')
    t.is((error as InstanceType<typeof OpenAI.APIError>).code, 'engine_overloaded')
  }
  const responses = await t.throwsAsync(client.responses.create({ model: 'gpt-oss', input: 'Hi', stream: true }), {
    instanceOf: OpenAI.APIError,
  })
  t.is((responses as InstanceType<typeof OpenAI.APIError>).status, 503)
  t.is(errors.length, 3, 'each failure reaches onError (the log)')
})
