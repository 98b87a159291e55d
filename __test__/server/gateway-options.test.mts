/**
 * `createGateway`'s grouped options: each group checked as the flat options are (a misspelt name is a TypeError
 * naming `group: option` and the name meant), each honoured where it configures, one setting given both ways
 * refused, and `harmony-stream serve` giving its settings in the grouped form.
 */

import test from 'ava'
import { ReplayEngine } from 'harmony-stream/engines'
import { createGateway, MemoryResponseStore, serveSettings } from 'harmony-stream/server'
import { startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'

const answer = harmony('<|channel|>final<|message|>hi<|return|>')
const engine = () => new ReplayEngine({ completions: [answer] })

test('a group is checked as the top level is: unknown names with the name meant, wrong types, ranges', (t) => {
  t.throws(() => createGateway({ engine: engine(), responses: { stroe: null } as never }), {
    instanceOf: TypeError,
    message: /createGateway: responses: unknown option 'stroe' \(did you mean 'store'\?\)/,
  })
  t.throws(() => createGateway({ engine: engine(), http: { bodyLimit: 0 } }), {
    instanceOf: RangeError,
    message: /http: option 'bodyLimit'/,
  })
  t.throws(() => createGateway({ engine: engine(), tools: { maxCalls: 'many' as never } }), {
    instanceOf: TypeError,
    message: /tools: option 'maxCalls' must be/,
  })
  t.throws(() => createGateway({ engine: engine(), observability: 'quiet' as never }), {
    instanceOf: TypeError,
    message: /option 'observability' must be an object/,
  })
  t.throws(() => createGateway({ engine: engine(), respones: {} } as never), {
    instanceOf: TypeError,
    message: /did you mean 'responses'\?/,
  })
})

test('one setting given flat and grouped is refused, naming both', (t) => {
  t.throws(() => createGateway({ engine: engine(), responseStore: null, responses: { store: null } }), {
    instanceOf: TypeError,
    message: /options 'responseStore' and 'responses.store' set the same thing/,
  })
  t.throws(() => createGateway({ engine: engine(), toolCalls: 2, tools: { maxCalls: 3 } }), {
    instanceOf: TypeError,
    message: /'toolCalls' and 'tools.maxCalls'/,
  })
})

test('each group configures what it names', async (t) => {
  const store = new MemoryResponseStore()
  const { port } = await startGateway(t, {
    engine: engine(),
    http: { bodyLimit: 200 },
    responses: { store },
    observability: { metrics: false },
    access: { apiKeys: ['sk-test'] },
  })
  const base = `http://127.0.0.1:${port}`
  const headers = { 'content-type': 'application/json', authorization: 'Bearer sk-test' }
  // access: a request without the key is refused.
  t.is((await fetch(`${base}/v1/responses`, { method: 'POST', body: '{}' })).status, 401)
  // http: a body over the limit is a 413.
  const big = await fetch(`${base}/v1/responses`, { method: 'POST', headers, body: JSON.stringify({ model: 'm', input: 'x'.repeat(500) }) })
  t.is(big.status, 413)
  // responses: the store given keeps the response.
  const kept = await fetch(`${base}/v1/responses`, { method: 'POST', headers, body: JSON.stringify({ model: 'm', input: 'hi' }) })
  t.is(kept.status, 200)
  const { id } = (await kept.json()) as { id: string }
  t.not(await store.get(id), null)
  // observability: no metrics route.
  t.is((await fetch(`${base}/metrics`)).status, 404)
})

test('harmony-stream serve gives the grouped options, no flat name', (t) => {
  const options = serveSettings({ CALL_ID_CACHE: '0', HARMONY_RESPONSE_STORE: 'memory' }).options() as Record<string, unknown>
  const flat = ['responseStore', 'chatIdCache', 'bodyLimit', 'metrics', 'toolCalls', 'apiKeys', 'frames']
  t.deepEqual(
    Object.keys(options).filter((name) => flat.includes(name)),
    [],
  )
  t.is(options.callIdCache, null, 'CALL_ID_CACHE=0: off')
  t.false('callIdCache' in serveSettings({ HARMONY_RESPONSE_STORE: 'memory' }).options(), 'on by default: the gateway makes it')
  t.is((serveSettings({ CHAT_ID_CACHE: '0', HARMONY_RESPONSE_STORE: 'memory' }).options() as Record<string, unknown>).callIdCache, null)
  t.true((options.responses as { store: unknown }).store instanceof MemoryResponseStore)
})
