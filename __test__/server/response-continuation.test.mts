/**
 * The Responses API's memory through the example gateway (issue 21): `store` (default true),
 * `previous_response_id`, `GET`/`DELETE /v1/responses/{id}` and `/input_items`, with the official openai
 * client. A continuation must give the engine the prompt the whole conversation sent statelessly would (the
 * stored input, then the stored output, then the new input; the old instructions not carried over), on the
 * inline path and through render workers, on the memory, SQLite and Redis stores; two gateways sharing one
 * Redis continue each other's responses.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import test, { type ExecutionContext } from 'ava'
import { renderChatCompletionRequest, renderResponsesRequest } from 'harmony-stream'
import type { Engine, GenerateRequest } from 'harmony-stream/engines'
import { MemoryResponseStore, RedisResponseStore, type ResponseStore, SqliteResponseStore, StreamLog } from 'harmony-stream/server'
import OpenAI from 'openai'

import { failingEngine, recordingEngine, startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { redisForFile } from '../helpers/redis-server.mjs'
import { until } from '../helpers/until.mjs'
import { ANSWER, CALL, TOOLS } from '../helpers/weather-loop.mjs'

const redis = redisForFile(test)
const redisHere = redis.here

/** A response's `store` (OpenAI's field, which the pinned openai types do not list). */
const stored = (response: object) => (response as { store?: boolean }).store

function temporaryFile(t: ExecutionContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'harmony-continuation-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return join(dir, 'responses.sqlite')
}

const STORES: { name: string; make: (t: ExecutionContext) => ResponseStore; here: boolean }[] = [
  { name: 'memory', make: () => new MemoryResponseStore(), here: true },
  { name: 'sqlite', make: (t) => new SqliteResponseStore({ path: temporaryFile(t) }), here: true },
  { name: 'redis', make: () => new RedisResponseStore({ url: redis.url(), keyPrefix: `continuation:${Math.random()}:` }), here: redisHere },
]

for (const { name, make, here } of STORES) {
  for (const renderWorkers of [0, 1]) {
    ;(here ? test : test.skip)(
      `${name} store, ${renderWorkers ? 'render worker' : 'inline'}: a continuation prompts as the whole conversation would`,
      async (t) => {
        const store = make(t)
        t.teardown(() => store.close())
        const { engine, prompts } = recordingEngine([CALL, ANSWER])
        const { client } = await startGateway(t, {
          engine,
          responseStore: store,
          renderWorkers,
          renderInlineBytes: 0,
          renderOptions: { currentDate: null },
        })
        const first = await client.responses.create({
          model: 'gpt-oss',
          instructions: 'Be brief.',
          input: 'Weather in Paris?',
          tools: TOOLS,
        })
        t.true(stored(first))
        const call = first.output.find((item) => item.type === 'function_call')
        t.truthy(call, JSON.stringify(first.output))
        // Kept: the same object comes back.
        t.deepEqual(JSON.parse(JSON.stringify(await client.responses.retrieve(first.id))), JSON.parse(JSON.stringify(first)))

        const output = { type: 'function_call_output' as const, call_id: (call as { call_id: string }).call_id, output: '{"sky":"sunny"}' }
        const second = await client.responses.create({ model: 'gpt-oss', previous_response_id: first.id, input: [output], tools: TOOLS })
        t.is(second.previous_response_id, first.id)
        t.is(second.output_text, 'It is sunny in Paris.')
        // The prompt of the whole conversation sent at once: the first input, the first output, the new input
        // (the first request's instructions are not carried over).
        const whole = renderResponsesRequest(
          {
            model: 'gpt-oss',
            input: [{ role: 'user', content: 'Weather in Paris?' }, ...JSON.parse(JSON.stringify(first.output)), output],
            tools: TOOLS,
          },
          { currentDate: null },
        )
        t.deepEqual(prompts[1], Array.from(whole.tokens))

        // Its input items: every item it was generated from, newest first by default, a page at a time.
        const page = await client.responses.inputItems.list(second.id, { limit: 2 })
        t.deepEqual(
          page.data.map((item) => item.type),
          ['function_call_output', 'function_call'],
        )
        t.true(page.has_more)
        const all: string[] = []
        for await (const item of client.responses.inputItems.list(second.id, { order: 'asc', limit: 1 })) all.push(item.type ?? 'message')
        t.deepEqual(all, ['message', 'reasoning', 'function_call', 'function_call_output'])

        // Deleted: gone, and a continuation of it is OpenAI's 400 previous_response_not_found, naming the field.
        await client.responses.delete(first.id)
        await t.throwsAsync(client.responses.retrieve(first.id), { instanceOf: OpenAI.NotFoundError })
        const missing = await t.throwsAsync(
          client.responses.create({ model: 'gpt-oss', previous_response_id: first.id, input: 'and now?' } as never),
          {
            instanceOf: OpenAI.BadRequestError,
          },
        )
        t.like(missing as unknown as { param: string; code: string }, {
          param: 'previous_response_id',
          code: 'previous_response_not_found',
        })
      },
    )
  }
}

/** What input items are, in order: a message's text, or another item's type. */
function itemTexts(items: readonly object[]): string[] {
  return items.map((item) => {
    const { type, content } = item as { type?: string; content?: { text?: string }[] | string }
    if (typeof content === 'string') return content
    return content?.[0]?.text ?? type ?? 'message'
  })
}

/** Every input item of response `id`, oldest first. */
async function inputItems(client: OpenAI, id: string): Promise<string[]> {
  const items: object[] = []
  for await (const item of client.responses.inputItems.list(id, { order: 'asc', limit: 100 })) items.push(item)
  return itemTexts(items)
}

for (const { name, make, here } of STORES) {
  ;(here ? test : test.skip)(
    `${name} store: a deleted response's items leave the responses that continued it (their input items, their continuations' prompts)`,
    async (t) => {
      const store = make(t)
      t.teardown(() => store.close())
      const ONE = harmony('<|channel|>final<|message|>One.<|return|>')
      const TWO = harmony('<|channel|>final<|message|>Two.<|return|>')
      const FIVE = harmony('<|channel|>final<|message|>Five.<|return|>')
      const { engine, prompts } = recordingEngine([ONE, TWO, CALL, ANSWER, FIVE])
      const { client } = await startGateway(t, { engine, responseStore: store, renderOptions: { currentDate: null } })
      const render = (input: unknown[], tools = true) =>
        Array.from(
          renderResponsesRequest({ model: 'gpt-oss', input, ...(tools ? { tools: TOOLS } : {}) } as never, { currentDate: null }).tokens,
        )
      const plain = (output: unknown) => JSON.parse(JSON.stringify(output)) as unknown[]

      const a = await client.responses.create({ model: 'gpt-oss', input: 'alpha' })
      const b = await client.responses.create({ model: 'gpt-oss', previous_response_id: a.id, input: 'bravo' })
      const c = await client.responses.create({ model: 'gpt-oss', previous_response_id: b.id, input: 'Weather in Paris?', tools: TOOLS })
      t.deepEqual(await inputItems(client, c.id), ['alpha', 'One.', 'bravo', 'Two.', 'Weather in Paris?'])

      // The first deleted: its input and its output leave what continued it, directly (b) or not (c).
      await client.responses.delete(a.id)
      t.deepEqual(await inputItems(client, b.id), ['bravo'])
      t.deepEqual(await inputItems(client, c.id), ['bravo', 'Two.', 'Weather in Paris?'])
      // Answering c's call, within a turn: the prompt is the render of what is left, not the engine's ids of c
      // (which held a's items).
      const call = c.output.find((item) => item.type === 'function_call') as { call_id: string }
      const result = { type: 'function_call_output' as const, call_id: call.call_id, output: '{"sky":"sunny"}' }
      const d = await client.responses.create({ model: 'gpt-oss', previous_response_id: c.id, input: [result], tools: TOOLS })
      t.deepEqual(
        prompts[3],
        render([
          { role: 'user', content: 'bravo' },
          ...plain(b.output),
          { role: 'user', content: 'Weather in Paris?' },
          ...plain(c.output),
          result,
        ]),
      )
      t.deepEqual(await inputItems(client, d.id), [
        'bravo',
        'Two.',
        'Weather in Paris?',
        'Need the weather.',
        'function_call',
        'function_call_output',
      ])

      // One in the middle deleted: only its own items go; a continuation kept after a deletion holds none either.
      await client.responses.delete(b.id)
      t.deepEqual(await inputItems(client, d.id), ['Weather in Paris?', 'Need the weather.', 'function_call', 'function_call_output'])
      const e = await client.responses.create({ model: 'gpt-oss', previous_response_id: d.id, input: 'echo', tools: TOOLS })
      t.is(e.output_text, 'Five.')
      t.deepEqual(
        prompts[4],
        render([
          { role: 'user', content: 'Weather in Paris?' },
          ...plain(c.output),
          result,
          ...plain(d.output),
          { role: 'user', content: 'echo' },
        ]),
      )
      t.deepEqual(await inputItems(client, e.id), [
        'Weather in Paris?',
        'Need the weather.',
        'function_call',
        'function_call_output',
        'It is sunny in Paris.',
        'echo',
      ])

      // A deleted response is continued by nobody: OpenAI's 400, naming the field.
      const missing = await t.throwsAsync(client.responses.create({ model: 'gpt-oss', previous_response_id: b.id, input: 'and now?' }), {
        instanceOf: OpenAI.BadRequestError,
      })
      t.like(missing as unknown as { param: string; code: string }, { param: 'previous_response_id', code: 'previous_response_not_found' })
      // Deleting one twice, or a response that continued others, is as before.
      await t.throwsAsync(client.responses.delete(b.id), { instanceOf: OpenAI.NotFoundError })
      await client.responses.delete(e.id)
      t.deepEqual(await inputItems(client, d.id), ['Weather in Paris?', 'Need the weather.', 'function_call', 'function_call_output'])
    },
  )
}

test('store: false keeps nothing; bad pages are 400s; a gateway without a store refuses previous_response_id', async (t) => {
  const { client, port } = await startGateway(t, { replay: [ANSWER] })
  const unkept = await client.responses.create({ model: 'gpt-oss', input: 'hi', store: false })
  t.false(stored(unkept))
  await t.throwsAsync(client.responses.retrieve(unkept.id), { instanceOf: OpenAI.NotFoundError })
  const kept = await client.responses.create({ model: 'gpt-oss', input: 'hi' })
  for (const [query, param] of [
    ['limit=0', 'limit'],
    ['limit=101', 'limit'],
    ['order=up', 'order'],
    ['after=nothing', 'after'],
  ]) {
    const answer = await fetch(`http://127.0.0.1:${port}/v1/responses/${kept.id}/input_items?${query}`)
    t.is(answer.status, 400, query)
    t.is(((await answer.json()) as { error: { param: string } }).error.param, param)
  }
  const put = await fetch(`http://127.0.0.1:${port}/v1/responses/${kept.id}`, { method: 'PUT' })
  t.is(put.status, 405)
  t.is(put.headers.get('allow'), 'GET, DELETE')

  const { client: stateless } = await startGateway(t, { replay: [ANSWER], responseStore: null })
  const refused = await t.throwsAsync(stateless.responses.create({ model: 'gpt-oss', previous_response_id: 'resp_x', input: 'hi' }), {
    instanceOf: OpenAI.BadRequestError,
  })
  t.is((refused as unknown as { param: string }).param, 'previous_response_id')
  const plain = await stateless.responses.create({ model: 'gpt-oss', input: 'hi' })
  t.false(stored(plain))
  await t.throwsAsync(stateless.responses.retrieve(plain.id), { instanceOf: OpenAI.NotFoundError })
})

;(redisHere ? test : test.skip)("two gateways sharing one Redis continue each other's responses", async (t) => {
  const prefix = `shared-gateways:${Math.random()}:`
  const stores = [0, 1].map(() => new RedisResponseStore({ url: redis.url(), keyPrefix: prefix }))
  t.teardown(() => Promise.all(stores.map((store) => store.close())))
  const a = await startGateway(t, { replay: [CALL, ANSWER], responseStore: stores[0] })
  const b = await startGateway(t, { replay: [ANSWER], responseStore: stores[1] })
  const first = await a.client.responses.create({ model: 'gpt-oss', input: 'Weather?', tools: TOOLS })
  const call = first.output.find((item) => item.type === 'function_call') as { call_id: string }
  const second = await b.client.responses.create({
    model: 'gpt-oss',
    previous_response_id: first.id,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: 'sunny' }],
    tools: TOOLS,
  })
  t.is(second.output_text, 'It is sunny in Paris.')
  t.is((await a.client.responses.retrieve(second.id)).id, second.id)
})

/** Polls a response until it leaves `queued` and `in_progress` (at most 30 s: a bound a loaded machine stays within). */
async function settled(client: OpenAI, id: string): Promise<{ status: string; output_text?: string; error?: unknown }> {
  const deadline = Date.now() + 30_000
  for (;;) {
    const response = (await client.responses.retrieve(id)) as unknown as { status: string }
    if ((response.status !== 'queued' && response.status !== 'in_progress') || Date.now() > deadline) return response
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** An engine that sends one id every 10 ms (`steps` of them, then `<|return|>`), and says when it was stopped. */
function slowEngine(steps = 500): { engine: Engine; stopped: () => boolean } {
  let stopped = false
  return {
    stopped: () => stopped,
    engine: {
      name: 'slow',
      async *generate(request: GenerateRequest) {
        request.signal?.addEventListener('abort', () => {
          stopped = true
        })
        yield { tokens: Uint32Array.from(harmony('<|channel|>final<|message|>')) }
        for (let i = 0; i < steps && !request.signal?.aborted; i++) {
          await new Promise((resolve) => setTimeout(resolve, 10))
          yield { tokens: Uint32Array.from(harmony(' more')) }
        }
        if (!request.signal?.aborted) yield { tokens: Uint32Array.from(harmony('<|return|>')) }
      },
    },
  }
}

/**
 * An engine that writes the start of an answer, then waits for its request's abort: it never ends on its own.
 * `started`: its first step was taken.
 */
function endlessEngine(): { engine: Engine; started: () => boolean; stopped: () => boolean } {
  let started = false
  let stopped = false
  return {
    started: () => started,
    stopped: () => stopped,
    engine: {
      name: 'endless',
      async *generate(request: GenerateRequest) {
        yield { tokens: Uint32Array.from(harmony('<|channel|>final<|message|>')) }
        started = true
        if (!request.signal?.aborted) await new Promise((resolve) => request.signal?.addEventListener('abort', resolve, { once: true }))
        stopped = true
      },
    },
  }
}

test('background: answered at once as queued, runs detached, is polled to its end', async (t) => {
  const { client } = await startGateway(t, { replay: [ANSWER] })
  const queued = (await client.responses.create({ model: 'gpt-oss', input: 'hi', background: true })) as unknown as {
    id: string
    status: string
    background: boolean
  }
  t.is(queued.status, 'queued')
  t.true(queued.background)
  const done = await settled(client, queued.id)
  t.is(done.status, 'completed')
  t.is(done.output_text, 'It is sunny in Paris.')
  // Cancelling what has ended is refused; an unknown id is a 404.
  await t.throwsAsync(client.responses.cancel(queued.id), { instanceOf: OpenAI.BadRequestError })
  await t.throwsAsync(client.responses.cancel('resp_unknown'), { instanceOf: OpenAI.NotFoundError })
})

test('background: cancel stops the engine and keeps the response as cancelled', async (t) => {
  // The run cannot end before the cancel, however slow the machine.
  const { engine, stopped } = endlessEngine()
  const { client } = await startGateway(t, { engine })
  const queued = await client.responses.create({ model: 'gpt-oss', input: 'hi', background: true })
  const cancelled = (await client.responses.cancel(queued.id)) as unknown as { status: string; output: unknown[] }
  t.is(cancelled.status, 'cancelled')
  t.true(stopped(), 'the engine request was aborted')
  t.is(((await client.responses.retrieve(queued.id)) as unknown as { status: string }).status, 'cancelled')
  // Cancelling again answers the same.
  t.is(((await client.responses.cancel(queued.id)) as unknown as { status: string }).status, 'cancelled')
})

test('background: a DELETE of a running response stops the engine, and the response stays deleted', async (t) => {
  const { engine, stopped } = endlessEngine()
  const { client } = await startGateway(t, { engine })
  const queued = await client.responses.create({ model: 'gpt-oss', input: 'hi', background: true })
  const deleted = (await client.responses.delete(queued.id)) as unknown as { deleted: boolean } | undefined
  t.not(deleted?.deleted, false)
  t.true(stopped(), 'the engine request was aborted')
  // The run has ended (the DELETE waited for it): what it ended as was not kept again.
  await t.throwsAsync(client.responses.retrieve(queued.id), { instanceOf: OpenAI.NotFoundError })
})

test('background with stream: the events stream; a client that left resumes after the last it read, while the run goes on', async (t) => {
  const { client } = await startGateway(t, { replay: [ANSWER] })
  const whole: { sequence_number: number; type: string }[] = []
  for await (const event of await client.responses.create({ model: 'gpt-oss', input: 'hi', background: true, stream: true }))
    whole.push(event)
  t.is(whole.at(-1)!.type, 'response.completed')
  t.deepEqual(
    whole.map((event) => event.sequence_number),
    whole.map((_, i) => i),
  )
  const id = (whole[0] as unknown as { response: { id: string } }).response.id
  t.is((await settled(client, id)).status, 'completed')

  // A slow run: read three events, leave, come back for the rest.
  const { engine, stopped } = slowEngine(40)
  const { client: slow } = await startGateway(t, { engine })
  const first: { sequence_number: number; type: string; delta?: string }[] = []
  const stream = await slow.responses.create({ model: 'gpt-oss', input: 'hi', background: true, stream: true })
  for await (const event of stream) {
    first.push(event)
    if (first.length === 6) break
  }
  t.false(stopped(), 'the run goes on without its client')
  const slowId = (first[0] as unknown as { response: { id: string } }).response.id
  const rest: typeof first = []
  const resumed = await slow.responses.retrieve(slowId, {
    stream: true,
    starting_after: first.at(-1)!.sequence_number,
  })
  for await (const event of resumed) rest.push(event)
  t.deepEqual(
    [...first, ...rest].map((event) => event.sequence_number),
    [...first, ...rest].map((_, i) => i),
    'no event lost or repeated',
  )
  t.is(rest.at(-1)!.type, 'response.completed')
  const text = [...first, ...rest]
    .filter((event) => event.type === 'response.output_text.delta')
    .map((event) => event.delta)
    .join('')
  t.is(text, (await slow.responses.retrieve(slowId)).output_text)
})

test('resuming a stream: refused for a response that did not stream in the background, and for events no longer kept', async (t) => {
  const { client, port } = await startGateway(t, { replay: [ANSWER] })
  const plain = await client.responses.create({ model: 'gpt-oss', input: 'hi' })
  const get = (path: string) => fetch(`http://127.0.0.1:${port}/v1/responses/${path}`)
  const refused = await get(`${plain.id}?stream=true`)
  t.is(refused.status, 400)
  t.like(((await refused.json()) as { error: object }).error, { param: 'stream', code: 'events_not_kept' })
  t.is((await get('resp_unknown?stream=true')).status, 404)
  t.is((await get(`${plain.id}?stream=true&starting_after=x`)).status, 400)

  const log = new StreamLog({ maxBytes: 20 })
  for (let i = 0; i < 5; i++) log.append(i, `data: ${i}\n\n`.padEnd(10, ' '))
  log.end()
  const read = async (after: number) => {
    let text = ''
    for await (const frames of log.follow(after)) text += frames
    return text
  }
  t.is((await read(2)).replaceAll(' ', ''), 'data: 3\n\ndata: 4\n\n'.replaceAll(' ', ''))
  await t.throwsAsync(read(0), { message: /no longer kept/ })
})

test('background: refused without store, and where no response is kept', async (t) => {
  const { client } = await startGateway(t, { replay: [ANSWER] })
  const param = async (request: Promise<unknown>) => ((await t.throwsAsync(request)) as unknown as { param: string }).param
  t.is(await param(client.responses.create({ model: 'gpt-oss', input: 'hi', background: true, store: false })), 'background')
  const { client: stateless } = await startGateway(t, { replay: [ANSWER], responseStore: null })
  t.is(await param(stateless.responses.create({ model: 'gpt-oss', input: 'hi', background: true })), 'background')
})

for (const shared of ['memory', 'redis'] as const) {
  ;(shared === 'memory' || redisHere ? test : test.skip)(
    `background: a cancel that reaches another gateway sharing the store (${shared}) stops the run`,
    async (t) => {
      // One store object for both (as processes sharing a store see it), or two clients of one Redis.
      const prefix = `shared-cancel:${Math.random()}:`
      const stores: ResponseStore[] =
        shared === 'memory'
          ? [new MemoryResponseStore()]
          : [0, 1].map(() => new RedisResponseStore({ url: redis.url(), keyPrefix: prefix }))
      t.teardown(() => Promise.all(stores.map((store) => store.close())))
      // A run that cannot end before the cancel, and has started its engine when the cancel comes.
      const { engine, started, stopped } = endlessEngine()
      const runner = await startGateway(t, { engine, responseStore: stores[0] })
      const other = await startGateway(t, { replay: [ANSWER], responseStore: stores.at(-1) })
      const queued = await runner.client.responses.create({ model: 'gpt-oss', input: 'hi', background: true })
      t.true(await until(started, 10_000), 'the run took its first step')
      const cancelled = (await other.client.responses.cancel(queued.id)) as unknown as { status: string }
      t.is(cancelled.status, 'cancelled')
      t.true(stopped(), 'the engine request in the other gateway was aborted')
      t.is(((await runner.client.responses.retrieve(queued.id)) as unknown as { status: string }).status, 'cancelled')
      // A cancel request is no response.
      await t.throwsAsync(other.client.responses.retrieve(`cancel-request:${queued.id}`), { instanceOf: OpenAI.NotFoundError })
    },
  )
}

test('background: a response no process runs any more (its process is gone) is kept as cancelled by a cancel', async (t) => {
  const store = new MemoryResponseStore()
  const { client } = await startGateway(t, { replay: [ANSWER], responseStore: store })
  const orphan = { id: 'resp_orphan', object: 'response', created_at: 1, status: 'in_progress', background: true, output: [] }
  await store.put({ id: orphan.id, createdAt: 1, response: orphan, input: [] })
  const cancelled = (await client.responses.cancel(orphan.id)) as unknown as { status: string }
  t.is(cancelled.status, 'cancelled')
  t.is((await store.get(orphan.id))?.response.status, 'cancelled')
})

test('background: polling a response no process runs any more (its process is gone, its lease lapsed) finds it failed, saying why', async (t) => {
  const store = new MemoryResponseStore()
  const { client } = await startGateway(t, { replay: [ANSWER], responseStore: store })
  const orphan = { id: 'resp_orphan', object: 'response', created_at: 1, status: 'in_progress', background: true, output: [] }
  await store.put({ id: orphan.id, createdAt: 1, response: orphan, input: [] })
  const polled = (await client.responses.retrieve(orphan.id)) as unknown as { status: string; error: { code: string } }
  t.is(polled.status, 'failed')
  t.is(polled.error.code, 'run_lost')
})

test('background: an engine that fails leaves the response failed, with its error', async (t) => {
  const { client } = await startGateway(t, { engine: failingEngine, onError: () => {} })
  const queued = await client.responses.create({ model: 'gpt-oss', input: 'hi', background: true })
  const done = await settled(client, queued.id)
  t.is(done.status, 'failed')
  // The same code as the error of a stream that failed (SSE, WebSocket): the engine's.
  t.like(done.error, { code: 'engine_connection_error' })
})

/** A call whose header the model wrote otherwise than the reference renders it (recipient first, ` json`). */
const OFF_FORM_CALL = harmony(' to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Paris"}<|call|>')

for (const exactContinuations of [true, false]) {
  test(`exactContinuations ${exactContinuations}: a continuation within a turn ${exactContinuations ? 'is the ids the engine saw and generated' : 're-renders the stored items'}`, async (t) => {
    const { engine, prompts } = recordingEngine([OFF_FORM_CALL, ANSWER])
    const { client } = await startGateway(t, { engine, exactContinuations, renderOptions: { currentDate: null } })
    const first = await client.responses.create({ model: 'gpt-oss', input: 'Weather in Paris?', tools: TOOLS })
    const call = first.output.find((item) => item.type === 'function_call') as { call_id: string }
    const output = { type: 'function_call_output' as const, call_id: call.call_id, output: 'sunny' }
    await client.responses.create({ model: 'gpt-oss', previous_response_id: first.id, input: [output], tools: TOOLS })
    const whole = renderResponsesRequest(
      {
        model: 'gpt-oss',
        input: [{ role: 'user', content: 'Weather in Paris?' }, ...JSON.parse(JSON.stringify(first.output)), output],
        tools: TOOLS,
      },
      { currentDate: null },
    )
    const generated = [...prompts[0]!, ...OFF_FORM_CALL]
    if (exactContinuations) {
      // The engine saw and generated these ids: the new prompt starts with all of them, then the result.
      t.deepEqual(prompts[1]!.slice(0, generated.length), generated)
      t.notDeepEqual(prompts[1], Array.from(whole.tokens))
      // After them: exactly what the re-render has after the call (the tool's result, then the next turn's start).
      const after = Array.from(whole.tokens).slice(whole.tokens.length - (prompts[1]!.length - generated.length))
      t.deepEqual(prompts[1]!.slice(generated.length), after)
    } else t.deepEqual(prompts[1], Array.from(whole.tokens))
  })
}

test('exact continuations only within a turn: other instructions, or input that is not a tool result, re-render', async (t) => {
  const { engine, prompts } = recordingEngine([OFF_FORM_CALL, ANSWER, OFF_FORM_CALL, ANSWER])
  const { client } = await startGateway(t, { engine, renderOptions: { currentDate: null } })
  const first = await client.responses.create({ model: 'gpt-oss', instructions: 'Be brief.', input: 'Weather?', tools: TOOLS })
  const call = first.output.find((item) => item.type === 'function_call') as { call_id: string }
  const output = { type: 'function_call_output' as const, call_id: call.call_id, output: 'sunny' }
  // No instructions this time (OpenAI does not carry them over): the developer message differs, so the stored
  // prompt is not a prefix of this one.
  await client.responses.create({ model: 'gpt-oss', previous_response_id: first.id, input: [output], tools: TOOLS })
  const whole = (input: unknown[], instructions?: string) =>
    Array.from(
      renderResponsesRequest(
        {
          model: 'gpt-oss',
          ...(instructions ? { instructions } : {}),
          input: [{ role: 'user', content: 'Weather?' }, ...JSON.parse(JSON.stringify(first.output)), ...input],
          tools: TOOLS,
        },
        { currentDate: null },
      ).tokens,
    )
  t.deepEqual(prompts[1], whole([output]))
  // A user message instead of a result: not within the turn.
  const third = await client.responses.create({ model: 'gpt-oss', instructions: 'Be brief.', input: 'Weather?', tools: TOOLS })
  await client.responses.create({
    model: 'gpt-oss',
    instructions: 'Be brief.',
    previous_response_id: third.id,
    input: 'Never mind.',
    tools: TOOLS,
  })
  t.deepEqual(prompts[3], whole([{ role: 'user', content: 'Never mind.' }], 'Be brief.'))
})

test('a store that cannot answer: 503 for what needs it, and an answer that says it was not kept', async (t) => {
  // Port 9 on 127.0.0.1: nothing listens there.
  const store = new RedisResponseStore({ url: 'redis://127.0.0.1:9', timeoutMs: 300 })
  t.teardown(() => store.close())
  const errors: unknown[] = []
  const { client } = await startGateway(t, { replay: [ANSWER], responseStore: store, onError: (error: unknown) => errors.push(error) })
  const answered = await client.responses.create({ model: 'gpt-oss', input: 'hi' })
  t.is(answered.output_text, 'It is sunny in Paris.')
  t.false(stored(answered))
  t.true(errors.length > 0, 'the store failure is logged')
  for (const request of [
    client.responses.retrieve('resp_x'),
    client.responses.create({ model: 'gpt-oss', input: 'hi', previous_response_id: 'resp_x' }),
    client.responses.create({ model: 'gpt-oss', input: 'hi', background: true }),
  ]) {
    const error = (await t.throwsAsync(request)) as unknown as { status: number; code: string }
    t.is(error.status, 503)
    t.is(error.code, 'store_unavailable')
  }
})

const CHAT_TOOLS = [
  {
    type: 'function' as const,
    function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
  },
]

for (const renderWorkers of [0, 1]) {
  test(`by default, ${renderWorkers ? 'render worker' : 'inline'}: a Chat request answering the calls this gateway returned is prompted with the ids`, async (t) => {
    const { engine, prompts } = recordingEngine([OFF_FORM_CALL, ANSWER, OFF_FORM_CALL, ANSWER])
    const { client } = await startGateway(t, {
      engine,
      renderWorkers,
      renderInlineBytes: 0,
      renderOptions: { currentDate: null },
    })
    const user = { role: 'user' as const, content: 'Weather in Paris?' }
    const first = await client.chat.completions.create({ model: 'gpt-oss', messages: [user], tools: CHAT_TOOLS })
    t.is(first.choices[0]!.finish_reason, 'tool_calls')
    const assistant = first.choices[0]!.message
    const call = assistant.tool_calls![0]! as { id: string; type: 'function'; function: { name: string; arguments: string } }
    const result = { role: 'tool' as const, tool_call_id: call.id, content: 'sunny' }
    await client.chat.completions.create({ model: 'gpt-oss', messages: [user, assistant, result], tools: CHAT_TOOLS })
    const generated = [...prompts[0]!, ...OFF_FORM_CALL]
    t.deepEqual(prompts[1]!.slice(0, generated.length), generated)
    const whole = Array.from(
      renderChatCompletionRequest({ model: 'gpt-oss', messages: [user, assistant, result], tools: CHAT_TOOLS }, { currentDate: null })
        .tokens,
    )
    t.deepEqual(prompts[1]!.slice(generated.length), whole.slice(whole.length - (prompts[1]!.length - generated.length)))
    // Arguments the client changed: not what the engine generated, so a re-render.
    const edited = { ...assistant, tool_calls: [{ ...call, function: { ...call.function, arguments: '{"city":"Rome"}' } }] }
    const third = await client.chat.completions.create({ model: 'gpt-oss', messages: [user], tools: CHAT_TOOLS })
    const thirdCall = third.choices[0]!.message.tool_calls![0]!
    const changed = [
      user,
      { ...edited, tool_calls: [{ ...edited.tool_calls[0]!, id: thirdCall.id }] },
      { ...result, tool_call_id: thirdCall.id },
    ]
    await client.chat.completions.create({ model: 'gpt-oss', messages: changed, tools: CHAT_TOOLS } as never)
    t.deepEqual(
      prompts[3],
      Array.from(
        renderChatCompletionRequest({ model: 'gpt-oss', messages: changed, tools: CHAT_TOOLS } as never, { currentDate: null }).tokens,
      ),
    )
  })
}

test('item_reference: a kept item named by its id is rendered as the item itself, inline and from a render worker; unknown ids are 404s', async (t) => {
  for (const renderWorkers of [0, 1]) {
    const { engine, prompts } = recordingEngine([CALL, ANSWER, ANSWER])
    const { client } = await startGateway(t, { engine, renderWorkers, renderInlineBytes: 0 })
    const first = await client.responses.create({ model: 'gpt-oss', input: 'Weather in Paris?', tools: TOOLS })
    const [reasoning, call] = first.output as { id: string; type: string; call_id?: string }[]
    t.is(reasoning?.type, 'reasoning')
    t.is(call?.type, 'function_call')
    const result = { type: 'function_call_output', call_id: call!.call_id!, output: '{"sky":"clear"}' }
    // What the AI SDK sends in a tool loop's second step: the history, kept items by reference.
    const byReference = [
      { role: 'user', content: 'Weather in Paris?' },
      { type: 'item_reference', id: reasoning!.id },
      { type: 'item_reference', id: call!.id },
      result,
    ]
    await client.responses.create({ model: 'gpt-oss', input: byReference, tools: TOOLS, store: false } as never)
    // The same conversation with the items themselves.
    const items = [{ role: 'user', content: 'Weather in Paris?' }, ...(first.output as object[]), result]
    await client.responses.create({ model: 'gpt-oss', input: items, tools: TOOLS, store: false } as never)
    t.deepEqual(prompts[1], prompts[2], `renderWorkers ${renderWorkers}`)
    const unknown = await t.throwsAsync(
      client.responses.create({
        model: 'gpt-oss',
        input: [{ type: 'item_reference', id: `rs_${'0'.repeat(32)}_0` }],
      } as never),
      { instanceOf: OpenAI.NotFoundError },
    )
    t.is((unknown as unknown as { param: string }).param, 'input[0].id')
    t.is(prompts.length, 3, 'nothing generated for the unknown reference')
    const many = Array.from({ length: 1001 }, () => ({ type: 'item_reference', id: reasoning!.id }))
    const tooMany = await t.throwsAsync(client.responses.create({ model: 'gpt-oss', input: many } as never), {
      instanceOf: OpenAI.BadRequestError,
    })
    t.is((tooMany as unknown as { param: string }).param, 'input')
  }
  const { client } = await startGateway(t, { engine: recordingEngine([ANSWER]).engine, responseStore: null })
  const noStore = await t.throwsAsync(
    client.responses.create({ model: 'gpt-oss', input: [{ type: 'item_reference', id: `rs_${'0'.repeat(32)}_0` }] } as never),
    { instanceOf: OpenAI.BadRequestError },
  )
  t.is((noStore as unknown as { param: string }).param, 'input[0].id')
})

test('store: true is a promise kept: a streamed response is in the store before response.completed says so, and says store: false when it could not be kept', async (t) => {
  const kept = new MemoryResponseStore()
  let putsDone = 0
  const counting: ResponseStore = {
    get: (id) => kept.get(id),
    put: async (record) => {
      await kept.put(record)
      putsDone++
    },
    delete: (id) => kept.delete(id),
    close: () => kept.close(),
  }
  const { client } = await startGateway(t, { engine: recordingEngine([ANSWER]).engine, responseStore: counting })
  let completed: { id: string; store?: boolean } | null = null
  for await (const event of await client.responses.create({ model: 'gpt-oss', input: 'Hi', stream: true })) {
    if (event.type !== 'response.completed') continue
    // Told kept: it is, already.
    t.is(putsDone, 1)
    completed = event.response as unknown as { id: string; store?: boolean }
  }
  t.true(completed?.store)
  t.is((await client.responses.retrieve(completed!.id)).id, completed!.id)
  const failing: ResponseStore = {
    get: async () => null,
    put: async () => {
      throw new Error('disk full')
    },
    delete: async () => false,
    close: async () => {},
  }
  const errors: unknown[] = []
  const other = await startGateway(t, {
    engine: recordingEngine([ANSWER]).engine,
    responseStore: failing,
    onError: (e: unknown) => errors.push(e),
  })
  let told: boolean | undefined
  for await (const event of await other.client.responses.create({ model: 'gpt-oss', input: 'Hi', stream: true }))
    if (event.type === 'response.completed') told = stored(event.response)
  t.is(told, false, 'a response the store could not keep says so in the event that ends it')
  t.is(errors.length, 1)
})
