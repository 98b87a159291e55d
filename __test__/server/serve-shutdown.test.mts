/**
 * A shutdown that says so (issue 48): `harmony-stream serve` as a child process, in front of a stand-in vLLM that
 * stalls mid-stream, is sent SIGTERM once the client has its first delta, with a short grace period. The stream
 * still open when the grace period ends ends with its API's error, which the real clients raise (the `openai`
 * package for Chat Completions and Responses, Anthropic's SDK for Messages), the Responses record is kept
 * `failed`, and the process says when the shutdown starts and ends, and exits 0. Nothing here waits for a time:
 * the engine stalls for good, so whatever the grace period, the stream can only end by the shutdown.
 */
import { once } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import Anthropic from '@anthropic-ai/sdk'
import test, { type ExecutionContext } from 'ava'
import { SqliteResponseStore } from 'harmony-stream/server'
import OpenAI from 'openai'

import { type FakeEngine, fakeVllm } from '../helpers/fake-engines.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { serving } from '../helpers/serve-child.mjs'

const HEADER = harmony('<|channel|>final<|message|>')
const ANSWER = [...HEADER, ...harmony('Hello, this answer stalls here and never ends'), ...harmony('<|return|>')]

/** A vLLM that sends the answer's header and three of its ids, then nothing more (its connection held open). */
async function stallingEngine(t: ExecutionContext): Promise<FakeEngine> {
  const engine = await fakeVllm({ completion: ANSWER, stallAfter: HEADER.length + 3 })
  t.teardown(() => engine.close())
  return engine
}

/** `serve` in front of `engine`, with a grace period short enough that the stalled stream outlives it. */
async function gatewayBefore(t: ExecutionContext, engine: FakeEngine, args: string[] = []) {
  const gateway = await serving([
    '--engine',
    'vllm',
    '--engine-url',
    engine.url,
    '--engine-model',
    'gpt-oss',
    '--shutdown-grace-ms',
    '100',
    '--render-workers',
    '0',
    ...args,
  ])
  t.teardown(() => gateway.child.kill('SIGKILL'))
  // 'close', not 'exit': the last lines may still be in the pipe when the process has exited.
  const closed = once(gateway.child, 'close') as Promise<[number | null]>
  return { ...gateway, closed }
}

/** The shutdown's two lines on stdout, and exit status 0. */
async function saidAndExited(t: ExecutionContext, gateway: Awaited<ReturnType<typeof gatewayBefore>>): Promise<void> {
  const [code] = await gateway.closed
  t.is(code, 0, gateway.stderr())
  // The request log's line of the stream may come after them: pino writes asynchronously.
  t.regex(
    gateway.stdout(),
    /harmony-stream gateway: shutting down \(SIGTERM\): no new connections; running requests have 100 ms\n(.*\n)*harmony-stream gateway: shut down\n/,
  )
}

test('Chat Completions: a stream open when the grace period ends gets its error chunk, which the openai client raises', async (t) => {
  const engine = await stallingEngine(t)
  const gateway = await gatewayBefore(t, engine)
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${gateway.port}/v1`, apiKey: 'x', maxRetries: 0 })
  const stream = await client.chat.completions.create({ model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }], stream: true })
  let text = ''
  const failure = await (async () => {
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta.content ?? ''
      // The first delta is in: the operator stops the gateway.
      if (text === '' && delta !== '') gateway.child.kill('SIGTERM')
      text += delta
    }
  })().then(
    () => null,
    (error: unknown) => error,
  )
  t.true(failure instanceof OpenAI.APIError, String(failure))
  t.like(failure, { type: 'server_error', code: 'gateway_shutdown' })
  t.regex((failure as Error).message, /the gateway shut down before this response was complete/)
  t.is(text, 'Hello, this')
  await saidAndExited(t, gateway)
})

test('Responses: a stream open when the grace period ends gets response.failed, the openai client raises it, and the record is kept failed', async (t) => {
  const engine = await stallingEngine(t)
  const directory = mkdtempSync(join(tmpdir(), 'harmony-shutdown-'))
  t.teardown(() => rmSync(directory, { recursive: true, force: true }))
  const path = join(directory, 'responses.sqlite')
  const gateway = await gatewayBefore(t, engine, ['--response-store', `sqlite:${path}`])
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${gateway.port}/v1`, apiKey: 'x', maxRetries: 0 })
  const stream = client.responses.stream({ model: 'gpt-oss', input: 'hi' })
  let id = ''
  let text = ''
  stream.on('response.created', (event) => (id = event.response.id))
  stream.on('response.output_text.delta', (event) => {
    if (text === '') gateway.child.kill('SIGTERM')
    text += event.delta
  })
  const failure = await stream.finalResponse().then(
    () => null,
    (error: unknown) => error,
  )
  t.true(failure instanceof OpenAI.APIError, String(failure))
  t.like(failure, { type: 'server_error', code: 'gateway_shutdown' })
  t.is(text, 'Hello, this')
  await saidAndExited(t, gateway)
  // What a client polling it would have read: failed, saying why, with what it had said.
  const store = new SqliteResponseStore({ path })
  t.teardown(() => store.close())
  const kept = await store.get(id)
  t.like(kept?.response, { id, status: 'failed', error: { code: 'gateway_shutdown' } })
  t.regex(JSON.stringify(kept?.response.output), /Hello, this/)
})

test('Messages: a stream open when the grace period ends gets its error event, which the Anthropic client raises', async (t) => {
  const engine = await stallingEngine(t)
  const gateway = await gatewayBefore(t, engine)
  const client = new Anthropic({ baseURL: `http://127.0.0.1:${gateway.port}`, apiKey: 'x', maxRetries: 0 })
  const stream = client.messages.stream({ model: 'gpt-oss', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] })
  let text = ''
  stream.on('text', (delta) => {
    if (text === '') gateway.child.kill('SIGTERM')
    text += delta
  })
  const failure = await stream.finalMessage().then(
    () => null,
    (error: unknown) => error,
  )
  t.true(failure instanceof Anthropic.APIError, String(failure))
  // A 503 is Anthropic's 529 `overloaded_error`, which its clients retry elsewhere (wire/messages.ts).
  t.regex((failure as Error).message, /overloaded_error.*the gateway shut down before this response was complete/)
  t.is(text, 'Hello, this')
  await saidAndExited(t, gateway)
})
