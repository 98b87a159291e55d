/**
 * The Conversations API (issue 47), driven with the official openai client: a conversation made with items and
 * metadata, continued by responses that name it (`conversation`), its items paged, read, added and deleted, its
 * metadata changed, deleted (then a 404). A tool turn of a conversation is prompted with the ids the engine saw
 * and generated, as a `previous_response_id` continuation is; a conversation changed since is re-rendered. It is
 * kept in the response store (memory, SQLite, Redis), under the store's bounds and expiry, shared by gateways
 * sharing the store, as one API key's: another key gets 404s. Bad input is a 400 naming the field.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import test, { type ExecutionContext } from 'ava'
import { renderResponsesRequest } from 'harmony-stream'
import { MemoryResponseStore, RedisResponseStore, type ResponseStore, SqliteResponseStore } from 'harmony-stream/server'
import OpenAI from 'openai'

import { recordingEngine, startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { redisForFile } from '../helpers/redis-server.mjs'
import { connect, responseOf } from '../helpers/responses-socket.mjs'
import { decodeTokens } from '../helpers/token-bytes.mjs'
import { until } from '../helpers/until.mjs'
import { ANSWER, CALL, TOOLS } from '../helpers/weather-loop.mjs'

/** The stores' clock (seconds), a field the tests may move: the module the package entry uses. */
const { clock } = createRequire(import.meta.url)(join(import.meta.dirname, '..', '..', 'src', 'server', 'stores', 'store.ts')) as {
  clock: { now: () => number }
}

const redis = redisForFile(test)

/** A call whose header the model wrote otherwise than the reference renders it (recipient first, ` json`). */
const OFF_FORM_CALL = harmony(' to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Paris"}<|call|>')
const final = (text: string) => harmony(`<|channel|>final<|message|>${text}<|return|>`)
const MODEL = 'gpt-oss'
const FIRST = { type: 'message' as const, role: 'user' as const, content: 'I am in Paris.' }

type Json = Record<string, unknown>
const plain = (value: unknown) => JSON.parse(JSON.stringify(value)) as Json

/** The prompt of a whole conversation sent at once (the same tools, no date), as ids. */
const whole = (input: unknown[]) =>
  Array.from(renderResponsesRequest({ model: MODEL, input, tools: TOOLS } as never, { currentDate: null }).tokens)

/** What an openai client raised: status, code and param; or 'ok'. */
async function refusal(promise: Promise<unknown>): Promise<string> {
  try {
    await promise
    return 'ok'
  } catch (error) {
    const { status, code, param } = error as { status?: number; code?: string; param?: string | null }
    return `${status} ${code} ${param ?? null}`
  }
}

/** Every item of a conversation, in order (the client's auto-pagination over pages of `limit`). */
async function allItems(client: OpenAI, id: string, limit = 20): Promise<Json[]> {
  const items: Json[] = []
  for await (const item of client.conversations.items.list(id, { order: 'asc', limit })) items.push(plain(item))
  return items
}

test('openai client: a conversation made with items, continued by responses, paged, changed, deleted', async (t) => {
  const { engine, prompts } = recordingEngine([OFF_FORM_CALL, ANSWER])
  const { client } = await startGateway(t, { engine, renderOptions: { currentDate: null } })

  const conversation = await client.conversations.create({ items: [FIRST], metadata: { topic: 'weather' } })
  t.deepEqual(Object.keys(conversation).sort(), ['created_at', 'id', 'metadata', 'object'])
  t.is(conversation.object, 'conversation')
  t.regex(conversation.id, /^conv_[0-9a-f]{48}$/)
  t.true(Number.isSafeInteger(conversation.created_at))
  t.deepEqual(conversation.metadata, { topic: 'weather' })
  t.deepEqual(plain(await client.conversations.retrieve(conversation.id)), plain(conversation))

  // A response in the conversation: the conversation's items come before its input.
  const first = await client.responses.create({ model: MODEL, conversation: conversation.id, input: 'Weather here?', tools: TOOLS })
  t.deepEqual(first.conversation, { id: conversation.id })
  t.deepEqual(prompts[0], whole([FIRST, { role: 'user', content: 'Weather here?' }]))
  const call = first.output.find((item) => item.type === 'function_call') as { call_id: string }
  t.truthy(call)

  // The tool turn, naming the conversation as `{ id }`: the ids the engine saw and generated, then the result.
  const output = { type: 'function_call_output' as const, call_id: call.call_id, output: 'sunny' }
  const second = await client.responses.create({ model: MODEL, conversation: { id: conversation.id }, input: [output], tools: TOOLS })
  t.is(second.output_text, 'It is sunny in Paris.')
  const generated = [...prompts[0]!, ...OFF_FORM_CALL]
  t.deepEqual(prompts[1]!.slice(0, generated.length), generated)
  const rerendered = whole([FIRST, { role: 'user', content: 'Weather here?' }, ...(plain(first).output as unknown[]), output])
  t.notDeepEqual(prompts[1], rerendered, 'the model wrote its call otherwise than a re-render does')
  t.deepEqual(prompts[1]!.slice(generated.length), rerendered.slice(rerendered.length - (prompts[1]!.length - generated.length)))

  // Its items: the first one, each request's input, each response's output, in order, in OpenAI's shapes.
  const items = await allItems(client, conversation.id, 2)
  const expected = [FIRST.content, 'Weather here?', 'function_call', 'function_call_output', 'It is sunny in Paris.']
  t.deepEqual(
    items.map((item) => (item.type === 'message' ? (item.content as { text: string }[])[0]!.text : item.type)),
    expected,
  )
  t.like(items[0], { type: 'message', role: 'user', status: 'completed', content: [{ type: 'input_text', text: FIRST.content }] })
  t.regex(items[0]!.id as string, /^msg_[0-9a-f]{48}$/)
  t.is(items[2]!.id, first.output.find((item) => item.type === 'function_call')!.id)
  t.is(items[4]!.id, second.output.at(-1)!.id)

  // Pages: `limit`, `order` (default desc), `after`.
  const newest = await client.conversations.items.list(conversation.id, { limit: 2 })
  t.deepEqual(
    newest.data.map((item) => item.id),
    [items[4]!.id, items[3]!.id],
  )
  t.true(newest.has_more)
  const next = await newest.getNextPage()
  t.deepEqual(
    next.data.map((item) => item.id),
    [items[2]!.id, items[1]!.id],
  )
  const last = await client.conversations.items.list(conversation.id, { limit: 2, order: 'desc', after: items[1]!.id as string })
  t.deepEqual(
    last.data.map((item) => item.id),
    [items[0]!.id],
  )
  t.false(last.has_more)
  // The list object itself, as OpenAI's ConversationItemList.
  const list = (await (await fetch(`${client.baseURL}/conversations/${conversation.id}/items?limit=2&order=asc`)).json()) as Json
  t.deepEqual(list, { object: 'list', data: items.slice(0, 2), first_id: items[0]!.id, last_id: items[1]!.id, has_more: true })

  // One item, read; the metadata replaced; an item added and deleted.
  t.deepEqual(plain(await client.conversations.items.retrieve(items[3]!.id as string, { conversation_id: conversation.id })), items[3])
  const updated = await client.conversations.update(conversation.id, { metadata: { topic: 'sun', city: 'Paris' } })
  t.deepEqual(updated.metadata, { topic: 'sun', city: 'Paris' })
  t.deepEqual((await client.conversations.retrieve(conversation.id)).metadata, { topic: 'sun', city: 'Paris' })
  const added = await client.conversations.items.create(conversation.id, { items: [{ role: 'assistant', content: 'Anything else?' }] })
  t.is(added.data.length, 1)
  t.like(plain(added), { object: 'list', has_more: false, first_id: added.data[0]!.id, last_id: added.data[0]!.id })
  t.like(plain(added.data[0]), {
    type: 'message',
    role: 'assistant',
    status: 'completed',
    content: [{ type: 'output_text', text: 'Anything else?' }],
  })
  t.is((await allItems(client, conversation.id)).length, 6)
  const addedId = added.data[0]!.id as string
  const afterDelete = await client.conversations.items.delete(addedId, { conversation_id: conversation.id })
  t.deepEqual(plain(afterDelete), plain(updated), 'a deleted item is answered with its conversation')
  t.deepEqual(await allItems(client, conversation.id), items)
  t.is(await refusal(client.conversations.items.retrieve(addedId, { conversation_id: conversation.id })), '404 not_found null')

  // Deleted: OpenAI's deleted shape, then 404 on every route and on a response that names it.
  t.deepEqual(plain(await client.conversations.delete(conversation.id)), {
    id: conversation.id,
    object: 'conversation.deleted',
    deleted: true,
  })
  t.is(await refusal(client.conversations.retrieve(conversation.id)), '404 not_found null')
  t.is(await refusal(client.conversations.items.list(conversation.id)), '404 not_found null')
  t.is(await refusal(client.conversations.delete(conversation.id)), '404 not_found null')
  t.is(await refusal(client.conversations.update(conversation.id, { metadata: {} })), '404 not_found null')
  t.is(await refusal(client.responses.create({ model: MODEL, conversation: conversation.id, input: 'Hi' })), '404 not_found conversation')
})

test('through render workers: a conversation is rendered after its items, its tool turn made of the same ids', async (t) => {
  const { engine, prompts } = recordingEngine([OFF_FORM_CALL, ANSWER])
  const { client } = await startGateway(t, { engine, renderWorkers: 1, renderInlineBytes: 0, renderOptions: { currentDate: null } })
  const conversation = await client.conversations.create({ items: [FIRST] })
  const first = await client.responses.create({ model: MODEL, conversation: conversation.id, input: 'Weather here?', tools: TOOLS })
  t.deepEqual(prompts[0], whole([FIRST, { role: 'user', content: 'Weather here?' }]))
  const call = first.output.find((item) => item.type === 'function_call') as { call_id: string }
  const output = { type: 'function_call_output' as const, call_id: call.call_id, output: 'sunny' }
  await client.responses.create({ model: MODEL, conversation: conversation.id, input: [output], tools: TOOLS })
  t.deepEqual(prompts[1]!.slice(0, prompts[0]!.length + OFF_FORM_CALL.length), [...prompts[0]!, ...OFF_FORM_CALL])
})

test('a conversation changed since its last response is re-rendered as it is now, never prompted with the old ids', async (t) => {
  const { engine, prompts } = recordingEngine([OFF_FORM_CALL, ANSWER])
  const { client } = await startGateway(t, { engine, renderOptions: { currentDate: null } })
  const aside = { role: 'user' as const, content: 'An aside.' }
  const conversation = await client.conversations.create({ items: [aside, FIRST] })
  const first = await client.responses.create({ model: MODEL, conversation: conversation.id, input: 'Weather here?', tools: TOOLS })
  const call = first.output.find((item) => item.type === 'function_call') as { call_id: string }
  // The aside deleted: what the engine saw no longer is the conversation.
  const [asideItem] = await allItems(client, conversation.id)
  await client.conversations.items.delete(asideItem!.id as string, { conversation_id: conversation.id })
  const output = { type: 'function_call_output' as const, call_id: call.call_id, output: 'sunny' }
  await client.responses.create({ model: MODEL, conversation: conversation.id, input: [output], tools: TOOLS })
  t.deepEqual(prompts[1], whole([FIRST, { role: 'user', content: 'Weather here?' }, ...(plain(first).output as unknown[]), output]))
})

test('a turn is added once it completed: one that failed adds nothing, so it can be sent again', async (t) => {
  const { engine } = recordingEngine([final('One.')])
  const failing = {
    name: 'failing-once',
    calls: 0,
    generate(request: Parameters<typeof engine.generate>[0]) {
      if (this.calls++ === 0) throw new Error('engine down')
      return engine.generate(request)
    },
  }
  const errors: unknown[] = []
  const { client } = await startGateway(t, { engine: failing, onError: (error: unknown) => errors.push(error) })
  const conversation = await client.conversations.create()
  t.is(await refusal(client.responses.create({ model: MODEL, conversation: conversation.id, input: 'Count.' })), '500 internal_error null')
  t.deepEqual(await allItems(client, conversation.id), [])
  await client.responses.create({ model: MODEL, conversation: conversation.id, input: 'Count.' })
  t.deepEqual(
    (await allItems(client, conversation.id)).map((item) => (item.content as { text: string }[])[0]!.text),
    ['Count.', 'One.'],
  )
  t.is(errors.length, 1)
})

test('streamed, stored or not, in the background, and over the WebSocket mode: each turn is added', async (t) => {
  const { engine, prompts } = recordingEngine([final('One.'), final('Two.'), final('Three.'), final('Four.')])
  const { client, port } = await startGateway(t, { engine, renderOptions: { currentDate: null } })
  const conversation = await client.conversations.create()
  const stream = await client.responses.create({ model: MODEL, conversation: conversation.id, input: 'Count.', stream: true })
  let completed: Json | null = null
  for await (const event of stream) if (event.type === 'response.completed') completed = plain(event.response)
  t.deepEqual(completed?.conversation, { id: conversation.id })
  // Not stored: the response is not kept, its items are.
  const unstored = await client.responses.create({ model: MODEL, conversation: conversation.id, input: 'Go on.', store: false })
  t.is(await refusal(client.responses.retrieve(unstored.id)), '404 not_found null')
  const queued = await client.responses.create({ model: MODEL, conversation: conversation.id, input: 'More.', background: true })
  t.true(await until(() => prompts.length === 3))
  for (let status = queued.status; status === 'queued' || status === 'in_progress'; )
    status = (await client.responses.retrieve(queued.id)).status
  const ws = await connect(t, port)
  ws.send({ type: 'response.create', model: MODEL, conversation: conversation.id, input: 'Last.' })
  const turn = responseOf(await ws.turn())
  t.is(turn.status, 'completed')
  t.deepEqual(turn.conversation, { id: conversation.id })
  const texts = (await allItems(client, conversation.id)).map((item) => (item.content as { text: string }[])[0]!.text)
  t.deepEqual(texts, ['Count.', 'One.', 'Go on.', 'Two.', 'More.', 'Three.', 'Last.', 'Four.'])
  // Each prompt held the conversation so far.
  t.regex(decodeTokens(prompts[3]!), /Count\..*One\..*Go on\..*Two\..*More\..*Three\..*Last\./s)
})

test('include: reasoning sealed for the caller (sent back, it is opened), and only what is asked', async (t) => {
  const { engine, prompts } = recordingEngine([CALL, ANSWER])
  const { client, port } = await startGateway(t, { engine, renderOptions: { currentDate: null } })
  const conversation = await client.conversations.create()
  await client.responses.create({ model: MODEL, conversation: conversation.id, input: 'Weather in Paris?', tools: TOOLS })
  const [, reasoning, call] = await allItems(client, conversation.id)
  t.is(reasoning!.type, 'reasoning')
  t.is(reasoning!.encrypted_content, undefined)
  const sealed = plain(
    await client.conversations.items.retrieve(reasoning!.id as string, {
      conversation_id: conversation.id,
      include: ['reasoning.encrypted_content'],
    }),
  )
  t.is(typeof sealed.encrypted_content, 'string')
  // The Python client writes `include=…` where the JS client writes `include[]=…`: both are read.
  const url = `http://127.0.0.1:${port}/v1/conversations/${conversation.id}/items?order=asc&include=reasoning.encrypted_content`
  const listed = (await (await fetch(url)).json()) as { data: Json[] }
  t.is(listed.data[1]!.encrypted_content !== undefined, true)
  // Sent back stateless within the turn, the sealed reasoning is rendered as the reasoning it is.
  const { id: _id, status: _status, ...sentCall } = call!
  await client.responses.create({
    model: MODEL,
    store: false,
    tools: TOOLS,
    input: [
      { role: 'user', content: 'Weather in Paris?' },
      { type: 'reasoning', id: 'rs_x', summary: [], encrypted_content: sealed.encrypted_content as string },
      sentCall as never,
      { type: 'function_call_output', call_id: call!.call_id as string, output: 'sunny' },
    ],
  })
  t.regex(decodeTokens(prompts[1]!), /analysis<\|message\|>Need the weather\.<\|end\|>/)
})

test('another API key does not see a conversation: 404 on every route, and on a response that names it', async (t) => {
  const keys = [
    { key: 'sk-alpha-0123456789', name: 'alpha' },
    { key: 'sk-beta-0123456789', name: 'beta' },
  ]
  const { port } = await startGateway(t, { replay: [final('Hi.')], apiKeys: keys })
  const client = (apiKey: string) => new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0 })
  const [alpha, beta] = [client(keys[0]!.key), client(keys[1]!.key)]
  const conversation = await alpha.conversations.create({ items: [FIRST] })
  const [item] = await allItems(alpha, conversation.id)
  const id = conversation.id
  const itemId = item!.id as string
  t.deepEqual(
    await Promise.all([
      refusal(beta.conversations.retrieve(id)),
      refusal(beta.conversations.update(id, { metadata: { x: 'y' } })),
      refusal(beta.conversations.items.list(id)),
      refusal(beta.conversations.items.create(id, { items: [FIRST] })),
      refusal(beta.conversations.items.retrieve(itemId, { conversation_id: id })),
      refusal(beta.conversations.items.delete(itemId, { conversation_id: id })),
      refusal(beta.conversations.delete(id)),
      refusal(beta.responses.create({ model: MODEL, conversation: id, input: 'Hi' })),
    ]),
    [...Array(7).fill('404 not_found null'), '404 not_found conversation'],
  )
  // Untouched, and still its holder's.
  t.deepEqual(await allItems(alpha, id), [item])
  t.deepEqual((await alpha.conversations.retrieve(id)).metadata, {})
})

test('bad input is a 400 naming the field (or a 404, a 405), never a crash', async (t) => {
  const { client, port } = await startGateway(t, { replay: [final('Hi.')] })
  const conversation = await client.conversations.create({ items: [FIRST] })
  const id = conversation.id
  const [held] = await allItems(client, id)
  const many = Array.from({ length: 21 }, () => FIRST)
  const raw = async (method: string, path: string, body?: unknown) => {
    const response = await fetch(`http://127.0.0.1:${port}/v1${path}`, {
      method,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    })
    const { error } = (await response.json()) as { error: { code: string; param: string | null } }
    return `${response.status} ${error.code} ${error.param}`
  }
  const cases: [string, Promise<string>][] = [
    ['unknown field', refusal(client.conversations.create({ item: [] } as never))],
    ['21 items', refusal(client.conversations.create({ items: many as never }))],
    ['items.create: 21 items', refusal(client.conversations.items.create(id, { items: many as never }))],
    ['items.create: no items', refusal(client.conversations.items.create(id, {} as never))],
    ['items not an array', refusal(client.conversations.create({ items: 'hi' as never }))],
    ['an item not an object', refusal(client.conversations.create({ items: ['hi'] as never }))],
    ['a role no one has', refusal(client.conversations.create({ items: [{ role: 'narrator', content: 'x' }] as never }))],
    [
      'a result of no call',
      refusal(client.conversations.items.create(id, { items: [{ type: 'function_call_output', call_id: 'nope', output: 'x' }] })),
    ],
    ['an item already there', refusal(client.conversations.items.create(id, { items: [{ ...FIRST, id: held!.id } as never] }))],
    [
      '17 metadata pairs',
      refusal(client.conversations.create({ metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) })),
    ],
    ['a metadata value not a string', refusal(client.conversations.create({ metadata: { k: 1 } as never }))],
    ['update without metadata', refusal(client.conversations.update(id, {} as never))],
    ['limit 0', refusal(client.conversations.items.list(id, { limit: 0 }))],
    ['limit 101', refusal(client.conversations.items.list(id, { limit: 101 }))],
    ['limit not a number', raw('GET', `/conversations/${id}/items?limit=ten`)],
    ['order sideways', refusal(client.conversations.items.list(id, { order: 'sideways' as never }))],
    ['after no item', refusal(client.conversations.items.list(id, { after: 'msg_nope' }))],
    ['include unknown', refusal(client.conversations.items.list(id, { include: ['file_search_call.results'] }))],
    ['an unknown item', refusal(client.conversations.items.retrieve('msg_nope', { conversation_id: id }))],
    ['an id that is no conversation id', refusal(client.conversations.retrieve('resp_0123'))],
    [
      'conversation and previous_response_id',
      refusal(client.responses.create({ model: MODEL, conversation: id, previous_response_id: 'resp_x', input: 'Hi' })),
    ],
    ['conversation not an id', refusal(client.responses.create({ model: MODEL, conversation: 5 as never, input: 'Hi' }))],
    ['conversation.id not a string', refusal(client.responses.create({ model: MODEL, conversation: { id: 5 } as never, input: 'Hi' }))],
    [
      'an input item already in it',
      refusal(client.responses.create({ model: MODEL, conversation: id, input: [{ ...FIRST, id: held!.id } as never] })),
    ],
    ['GET /v1/conversations', raw('GET', '/conversations')],
    ['PUT a conversation', raw('PUT', `/conversations/${id}`, {})],
    ['POST an item', raw('POST', `/conversations/${id}/items/${held!.id}`, {})],
    ['a body that is no JSON object', raw('POST', '/conversations', [1])],
  ]
  const outcomes = Object.fromEntries(await Promise.all(cases.map(async ([name, outcome]) => [name, await outcome])))
  t.deepEqual(outcomes, {
    'unknown field': '400 invalid_parameter item',
    '21 items': '400 invalid_parameter items',
    'items.create: 21 items': '400 invalid_parameter items',
    'items.create: no items': '400 missing_required_parameter items',
    'items not an array': '400 invalid_parameter items',
    'an item not an object': '400 invalid_parameter items[0]',
    'a role no one has': '400 invalid_request items[0].role',
    'a result of no call': '400 invalid_request items[0].call_id',
    'an item already there': '400 invalid_parameter items[0].id',
    '17 metadata pairs': '400 invalid_parameter metadata',
    'a metadata value not a string': '400 invalid_parameter metadata',
    'update without metadata': '400 missing_required_parameter metadata',
    'limit 0': '400 invalid_parameter limit',
    'limit 101': '400 invalid_parameter limit',
    'limit not a number': '400 invalid_parameter limit',
    'order sideways': '400 invalid_parameter order',
    'after no item': '400 invalid_parameter after',
    'include unknown': '400 invalid_parameter include',
    'an unknown item': '404 not_found null',
    'an id that is no conversation id': '404 not_found null',
    'conversation and previous_response_id': '400 invalid_parameter previous_response_id',
    'conversation not an id': '400 invalid_parameter conversation',
    'conversation.id not a string': '400 invalid_parameter conversation.id',
    'an input item already in it': '400 invalid_parameter input',
    'GET /v1/conversations': '405 method_not_allowed null',
    'PUT a conversation': '405 method_not_allowed null',
    'POST an item': '405 method_not_allowed null',
    'a body that is no JSON object': '400 invalid_json null',
  })
  // Nothing was added by what was refused.
  t.deepEqual(await allItems(client, id), [held])
})

test('a gateway that keeps no responses keeps no conversations: said, not a crash', async (t) => {
  const { client } = await startGateway(t, { replay: [final('Hi.')], responseStore: null })
  t.is(await refusal(client.conversations.create()), '404 not_found null')
  t.is(await refusal(client.responses.create({ model: MODEL, conversation: 'conv_x', input: 'Hi' })), '400 invalid_parameter conversation')
})

function temporaryFile(t: ExecutionContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'harmony-conversations-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return join(dir, 'responses.sqlite')
}

const STORES: { name: string; here: boolean; open: (t: ExecutionContext, shared: string) => ResponseStore }[] = [
  { name: 'sqlite', here: true, open: (_t, path) => new SqliteResponseStore({ path }) },
  { name: 'redis', here: redis.here, open: (_t, prefix) => new RedisResponseStore({ url: redis.url(), keyPrefix: prefix }) },
]

for (const { name, here, open } of STORES)
  (here ? test : test.skip)(`${name} store: two gateways share a conversation, which no response route shows`, async (t) => {
    const shared = name === 'sqlite' ? temporaryFile(t) : `conversations:${Math.random()}:`
    const [one, two] = [open(t, shared), open(t, shared)]
    t.teardown(async () => {
      await one.close()
      await two.close()
    })
    const a = await startGateway(t, { replay: [final('One.')], responseStore: one })
    const b = await startGateway(t, { replay: [final('Two.')], responseStore: two })
    const conversation = await a.client.conversations.create({ items: [FIRST] })
    await b.client.responses.create({ model: MODEL, conversation: conversation.id, input: 'Count.' })
    await a.client.responses.create({ model: MODEL, conversation: conversation.id, input: 'Again.' })
    const texts = (await allItems(b.client, conversation.id)).map((item) => (item.content as { text: string }[])[0]!.text)
    t.deepEqual(texts, [FIRST.content, 'Count.', 'Two.', 'Again.', 'One.'])
    // Its record is no response: neither its key nor its id is one.
    for (const id of [`conversation:${conversation.id}`, conversation.id]) {
      t.is(await refusal(a.client.responses.retrieve(id)), '404 not_found null')
      t.is(await refusal(a.client.responses.delete(id)), '404 not_found null')
      t.is(await refusal(a.client.responses.inputItems.list(id)), '404 not_found null')
    }
    t.is((await allItems(a.client, conversation.id)).length, 5)
  })

test.serial('memory store: a conversation expires with the store’s ttlSeconds, and grows only to its largest record', async (t) => {
  const store = new MemoryResponseStore({ ttlSeconds: 60, maxRecordBytes: 4096 })
  t.teardown(() => store.close())
  const now = clock.now
  const start = now()
  let offset = 0
  clock.now = () => start + offset
  t.teardown(() => {
    clock.now = now
  })
  const errors: unknown[] = []
  const { client } = await startGateway(t, {
    replay: [final('Hi.')],
    responseStore: store,
    onError: (error: unknown) => errors.push(error),
  })
  const conversation = await client.conversations.create({ items: [FIRST] })
  const big = { role: 'user' as const, content: 'x'.repeat(3000) }
  await client.conversations.items.create(conversation.id, { items: [big] })
  t.is(await refusal(client.conversations.items.create(conversation.id, { items: [big] })), '400 invalid_parameter items')
  // A response's items that would pass the bound are not added (logged); the response stands (its own record,
  // which holds the conversation it came from, is over the bound too: not kept, and said).
  const response = await client.responses.create({ model: MODEL, conversation: conversation.id, input: 'y'.repeat(1500) })
  t.is(response.output_text, 'Hi.')
  t.false((response as { store?: boolean }).store)
  t.is((await allItems(client, conversation.id)).length, 2)
  t.deepEqual(
    errors.map((error) => (error as { code?: string }).code),
    ['limit-exceeded', 'limit-exceeded'],
  )
  offset = 59
  t.is((await client.conversations.retrieve(conversation.id)).id, conversation.id)
  offset = 59 + 61
  t.is(await refusal(client.conversations.retrieve(conversation.id)), '404 not_found null')
})
