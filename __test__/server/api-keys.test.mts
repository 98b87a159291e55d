/**
 * API keys (issue 31): a gateway with keys answers nothing without one (401 in OpenAI's shape, HTTP and the
 * WebSocket upgrade), and what one key's requests keep, no other key can see, continue, cancel or delete, by any
 * route or transport: stored responses, input items, previous_response_id, item references, background runs,
 * compactions and sealed reasoning. Driven with the official openai client.
 */
import test from 'ava'
import OpenAI from 'openai'
import WebSocket from 'ws'

import { startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'

const ANSWER = harmony('<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hello there.<|return|>')
const KEYS = [
  { key: 'sk-alpha-0123456789', name: 'alpha' },
  { key: 'sk-beta-0123456789', name: 'beta' },
]

async function keyedGateway(t: Parameters<typeof startGateway>[0]) {
  const { port } = await startGateway(t, { replay: [ANSWER], apiKeys: KEYS })
  const client = (apiKey: string) => new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0 })
  return { port, alpha: client(KEYS[0]!.key), beta: client(KEYS[1]!.key), stranger: client('sk-nobody') }
}

/** The status and code an openai client raised, or 'ok'. */
async function outcome(promise: Promise<unknown>): Promise<string> {
  try {
    await promise
    return 'ok'
  } catch (error) {
    const { status, code } = error as { status?: number; code?: string }
    return `${status} ${code}`
  }
}

test('without a key, or with an unknown one, every route but the public ones is a 401 in OpenAI shape', async (t) => {
  const { port, stranger } = await keyedGateway(t)
  t.is(
    await outcome(stranger.chat.completions.create({ model: 'gpt-oss', messages: [{ role: 'user', content: 'Hi' }] })),
    '401 invalid_api_key',
  )
  const none = await fetch(`http://127.0.0.1:${port}/v1/models`)
  t.is(none.status, 401)
  t.like(await none.json(), { error: { type: 'invalid_request_error', code: 'missing_api_key', param: null } })
  const wrong = await fetch(`http://127.0.0.1:${port}/v1/responses/resp_x`, { headers: { authorization: 'Bearer sk-nobody' } })
  t.is(wrong.status, 401)
  t.false(JSON.stringify(await wrong.json()).includes('sk-nobody'), 'the key is not echoed')
  t.is((await fetch(`http://127.0.0.1:${port}/health`)).status, 200)
  t.is((await fetch(`http://127.0.0.1:${port}/metrics`)).status, 200)
  // x-api-key, as Anthropic's clients send a key.
  t.is((await fetch(`http://127.0.0.1:${port}/v1/models`, { headers: { 'x-api-key': KEYS[0]!.key } })).status, 200)
  // The WebSocket upgrade too.
  const refused = await new Promise<number>((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/responses`)
    ws.on('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0))
    ws.on('open', () => resolve(101))
    ws.on('error', () => {})
  })
  t.is(refused, 401)
})

test("one key never sees another's responses: retrieve, input items, delete, continue, reference, compact, cancel, follow", async (t) => {
  const { alpha, beta } = await keyedGateway(t)
  const kept = await alpha.responses.create({ model: 'gpt-oss', input: 'Remember: slate.' })
  const item = kept.output.find((entry) => entry.type === 'message')!
  t.is(await outcome(alpha.responses.retrieve(kept.id)), 'ok')
  t.is(await outcome(beta.responses.retrieve(kept.id)), '404 not_found')
  t.is(await outcome(beta.responses.inputItems.list(kept.id)), '404 not_found')
  t.is(await outcome(beta.responses.delete(kept.id)), '404 not_found')
  t.is(
    await outcome(beta.responses.create({ model: 'gpt-oss', previous_response_id: kept.id, input: 'And?' })),
    '400 previous_response_not_found',
  )
  t.is(
    await outcome(
      beta.responses.create({
        model: 'gpt-oss',
        input: [
          { type: 'item_reference', id: item.id! },
          { role: 'user', content: 'And?' },
        ],
      }),
    ),
    '404 not_found',
  )
  t.is(await outcome(beta.responses.compact({ model: 'gpt-oss', previous_response_id: kept.id })), '400 previous_response_not_found')
  // A background run of alpha's: beta can neither poll, follow, cancel nor delete it.
  const running = await alpha.responses.create({ model: 'gpt-oss', input: 'Hi', background: true })
  t.is(await outcome(beta.responses.retrieve(running.id)), '404 not_found')
  t.is(await outcome(beta.responses.cancel(running.id)), '404 not_found')
  t.is(
    await outcome(
      beta.responses.retrieve(running.id, { stream: true }).then(async (stream) => {
        for await (const _ of stream);
      }),
    ),
    '404 not_found',
  )
  t.is(await outcome(beta.responses.delete(running.id)), '404 not_found')
  // Alpha still has all of it.
  t.is(await outcome(alpha.responses.create({ model: 'gpt-oss', previous_response_id: kept.id, input: 'And?' })), 'ok')
  t.is(await outcome(alpha.responses.delete(kept.id)), 'ok')
})

test('compactions and sealed reasoning open for the key they were made for, and for no other', async (t) => {
  const { alpha, beta } = await keyedGateway(t)
  const compacted = await alpha.responses.compact({ model: 'gpt-oss', input: [{ role: 'user', content: 'Remember: slate.' }] })
  const items = compacted.output as OpenAI.Responses.ResponseInputItem[]
  t.is(
    await outcome(alpha.responses.create({ model: 'gpt-oss', store: false, input: [...items, { role: 'user', content: 'Word?' }] })),
    'ok',
  )
  t.is(
    await outcome(beta.responses.create({ model: 'gpt-oss', store: false, input: [...items, { role: 'user', content: 'Word?' }] })),
    '400 invalid_encrypted_content',
  )
  const sealed = await alpha.responses.create({ model: 'gpt-oss', input: 'Hi', store: false, include: ['reasoning.encrypted_content'] })
  const reasoning = sealed.output.find((entry) => entry.type === 'reasoning')!
  t.truthy((reasoning as { encrypted_content?: string }).encrypted_content)
  const next = [
    { role: 'user' as const, content: 'Hi' },
    reasoning,
    { role: 'user' as const, content: 'More?' },
  ] as OpenAI.Responses.ResponseInputItem[]
  t.is(await outcome(alpha.responses.create({ model: 'gpt-oss', store: false, input: next })), 'ok')
  t.is(await outcome(beta.responses.create({ model: 'gpt-oss', store: false, input: next })), '400 invalid_encrypted_content')
})

test('a WebSocket connection is its key holder’s: another key’s response is not found on it', async (t) => {
  const { port, alpha } = await keyedGateway(t)
  const kept = await alpha.responses.create({ model: 'gpt-oss', input: 'Remember: slate.' })
  const turn = (key: string) =>
    new Promise<string>((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/responses`, { headers: { authorization: `Bearer ${key}` } })
      ws.on('error', reject)
      ws.on('open', () =>
        ws.send(JSON.stringify({ type: 'response.create', model: 'gpt-oss', previous_response_id: kept.id, input: 'And?' })),
      )
      ws.on('message', (data) => {
        const event = JSON.parse(String(data)) as { type: string; error?: { code?: string } }
        if (event.type === 'error' || event.type === 'response.completed') {
          ws.close()
          resolve(event.type === 'error' ? String(event.error?.code) : 'completed')
        }
      })
    })
  t.is(await turn(KEYS[0]!.key), 'completed')
  t.is(await turn(KEYS[1]!.key), 'previous_response_not_found')
})

test('apiKeys is checked: names differ, a key is listed once, a bad key is named by its place and never shown', async (t) => {
  const start = (apiKeys: unknown) => startGateway(t, { replay: [ANSWER], apiKeys })
  await t.throwsAsync(start([]), { instanceOf: TypeError, message: /apiKeys/ })
  await t.throwsAsync(
    start([
      { key: 'sk-one', name: 'a' },
      { key: 'sk-two', name: 'a' },
    ]),
    { message: /name "a" is taken/ },
  )
  await t.throwsAsync(start(['sk-same', 'sk-same']), { message: /listed twice/ })
  const error = await t.throwsAsync(start([{ key: 'sk-secret-value', name: 'a', limits: { requestsPerMinute: 0 } }]), {
    instanceOf: RangeError,
  })
  t.false(error.message.includes('sk-secret-value'))
  await t.throwsAsync(start([{ sha256: 'abc', name: 'a' }]), { message: /64 hex digits/ })
  await t.throwsAsync(start([{ key: 'sk-x', name: 'a', limit: {} }]), { message: /limit/ })
})

/** An engine whose generations each wait for `release()` before they end: streams held open on purpose. */
function heldEngine() {
  const waiting: (() => void)[] = []
  let started!: () => void
  let startedOnce = new Promise<void>((resolve) => (started = resolve))
  const engine = {
    name: 'held',
    async *generate(request: { signal?: AbortSignal }) {
      yield { tokens: Uint32Array.from(ANSWER.slice(0, 4)) }
      started()
      await new Promise<void>((resolve) => {
        waiting.push(resolve)
        request.signal?.addEventListener('abort', () => resolve())
      })
      yield { tokens: Uint32Array.from(ANSWER.slice(4)) }
    },
  }
  return {
    engine,
    /** Resolves once a generation has sent its first step. */
    nextStart: () =>
      startedOnce.then(() => {
        startedOnce = new Promise<void>((resolve) => (started = resolve))
      }),
    releaseAll: () => {
      for (const resolve of waiting.splice(0)) resolve()
    },
  }
}

test('per-key limits: 429 with retry-after in OpenAI shape over requests per minute and over concurrent streams; a key under its limits is not held back', async (t) => {
  const held = heldEngine()
  const { port } = await startGateway(t, {
    engine: held.engine,
    apiKeys: [
      { key: 'sk-paced', name: 'paced', limits: { requestsPerMinute: 2 } },
      { key: 'sk-single', name: 'single', limits: { concurrentStreams: 1 } },
      { key: 'sk-free', name: 'free' },
    ],
  })
  const post = (
    key: string,
    body: object = { model: 'gpt-oss', messages: [{ role: 'user', content: 'Hi' }], stream: true },
    path = '/v1/chat/completions',
  ) =>
    fetch(`http://127.0.0.1:${port}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
  // Requests per minute: two pass, the third is refused (the clock is the machine's; a minute does not pass here).
  const first = post('sk-paced')
  await held.nextStart()
  held.releaseAll()
  await (await first).text()
  const second = post('sk-paced')
  await held.nextStart()
  held.releaseAll()
  await (await second).text()
  const third = await post('sk-paced')
  t.is(third.status, 429)
  t.like(await third.json(), { error: { type: 'requests', code: 'rate_limit_exceeded', param: null } })
  t.true(Number(third.headers.get('retry-after')) >= 1)
  t.is(third.headers.get('x-ratelimit-limit-requests'), '2')

  // Concurrent streams: while one runs, a second is refused; when it ends, the next is let in.
  const running = post('sk-single')
  await held.nextStart()
  const refused = await post('sk-single')
  t.is(refused.status, 429)
  t.is(refused.headers.get('retry-after'), '1')
  // A background request over the limit is refused, not queued to fail.
  const background = await post('sk-single', { model: 'gpt-oss', input: 'Hi', background: true }, '/v1/responses')
  t.is(background.status, 429)
  // Another key is not held back by this one.
  const other = post('sk-free')
  await held.nextStart()
  held.releaseAll()
  t.is((await other).status, 200)
  await (await running).text()
  const after = post('sk-single')
  await held.nextStart()
  held.releaseAll()
  t.is((await after).status, 200)
})

test('one key cannot take every WebSocket connection: over its limit a 429, and a closed connection gives its place back', async (t) => {
  const { port } = await startGateway(t, {
    replay: [ANSWER],
    apiKeys: [
      { key: 'sk-sockets', name: 'sockets', limits: { webSockets: 2 } },
      { key: 'sk-other', name: 'other' },
    ],
  })
  const open = (key: string) =>
    new Promise<{ status: number; ws: WebSocket }>((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/responses`, { headers: { authorization: `Bearer ${key}` } })
      ws.on('unexpected-response', (_request, response) => resolve({ status: response.statusCode ?? 0, ws }))
      ws.on('open', () => resolve({ status: 101, ws }))
      ws.on('error', () => {})
    })
  const first = await open('sk-sockets')
  const second = await open('sk-sockets')
  t.deepEqual([first.status, second.status], [101, 101])
  t.is((await open('sk-sockets')).status, 429)
  const other = await open('sk-other')
  t.is(other.status, 101, 'another key is not held back')
  const closed = new Promise((resolve) => first.ws.once('close', resolve))
  first.ws.close()
  await closed
  // The server counts the close when it sees it: wait for that (bounded by time, not by a count of tries).
  let again = await open('sk-sockets')
  for (const end = Date.now() + 10_000; again.status === 429 && Date.now() < end; again = await open('sk-sockets'))
    await new Promise((resolve) => setTimeout(resolve, 10))
  t.is(again.status, 101)
  for (const ws of [second.ws, other.ws, again.ws]) ws.close()
})

test('at the WebSocket cap only a connection the gateway takes closes an idle one: one without a key, or over its key’s limit, does not', async (t) => {
  const { port } = await startGateway(t, {
    replay: [ANSWER],
    apiKeys: [{ key: 'sk-one', name: 'one', limits: { webSockets: 1 } }, 'sk-other'],
    responses: { maxSockets: 1 },
  })
  const open = (key: string | null) =>
    new Promise<{ status: number; ws: WebSocket }>((resolve) => {
      const ws = new WebSocket(`ws://127.0.0.1:${port}/v1/responses`, key === null ? {} : { headers: { authorization: `Bearer ${key}` } })
      t.teardown(() => ws.terminate())
      ws.on('unexpected-response', (_request, response) => resolve({ status: response.statusCode ?? 0, ws }))
      ws.on('open', () => resolve({ status: 101, ws }))
      ws.on('error', () => {})
    })
  // Counted when it happens, before the refusal is written: read after it, it says whether one happened.
  const evictions = async () =>
    Number(/^harmony_websocket_evictions_total (\d+)$/m.exec(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text())?.[1])
  const idle = await open('sk-one')
  t.is(idle.status, 101)
  t.is((await open(null)).status, 401)
  t.is((await open('sk-bad')).status, 401)
  t.is((await open('sk-one')).status, 429)
  t.is(await evictions(), 0, 'no idle connection closed for a connection refused')
  const closed = new Promise<number>((resolve) => idle.ws.once('close', resolve))
  t.is((await open('sk-other')).status, 101)
  t.is(await closed, 1000)
  t.is(await evictions(), 1)
})
