/**
 * Exact prompts by default (issue 45): a client that sends its tool loop's history back is prompted with the ids
 * the engine generated where the history is what those ids followed, and with a re-render from the first change
 * where it is not (never a wrong prompt), counted by `harmony_exact_prompts_total{face,outcome}` and said by a
 * `prompt-re-rendered` diagnostic. The records live in the response store: two gateways sharing a store share
 * them; another API key's calls are not found.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import test, { type ExecutionContext } from 'ava'
import { renderChatCompletionRequest } from 'harmony-stream'
import { CallIdCache, MemoryResponseStore, SqliteResponseStore } from 'harmony-stream/server'
import OpenAI from 'openai'

import { recordingEngine, startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { ANSWER } from '../helpers/weather-loop.mjs'

/** The model reasons, then calls with its header written otherwise than a re-render writes it, JSON spaced. */
const CALL = harmony(
  '<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris", "unit": "C"}<|call|>',
)
const TOOLS = [
  {
    type: 'function' as const,
    function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } } } },
  },
]
const USER = { role: 'user' as const, content: 'Weather in Paris?' }
type Message = Record<string, unknown>

/** A gateway over `completions` whose diagnostics are kept; `options` added. */
async function gateway(t: ExecutionContext, completions: number[][], options: Record<string, unknown> = {}) {
  const { engine, prompts } = recordingEngine(completions)
  const diagnostics: { code: string; message: string }[] = []
  const started = await startGateway(t, {
    engine,
    renderOptions: { currentDate: null },
    onDiagnostic: (d: { code: string; message: string }) => diagnostics.push(d),
    ...options,
  })
  return { ...started, prompts, diagnostics }
}

/** The first step of a Chat tool loop, and the messages that answer its call. */
async function firstStep(client: OpenAI, extra: Message = {}): Promise<{ assistant: Message; next: Message[] }> {
  const first = await client.chat.completions.create({ model: 'gpt-oss', messages: [USER], tools: TOOLS })
  const assistant = JSON.parse(JSON.stringify(first.choices[0]!.message)) as Message
  const call = (assistant.tool_calls as { id: string }[])[0]!
  return {
    assistant: { ...assistant, ...extra },
    next: [USER, { ...assistant, ...extra }, { role: 'tool', tool_call_id: call.id, content: 'sunny' }],
  }
}

const render = (messages: Message[]) =>
  Array.from(renderChatCompletionRequest({ model: 'gpt-oss', messages, tools: TOOLS } as never, { currentDate: null }).tokens)

/** Whether `prompt` is `first` + the generated ids + what a re-render of `messages` has after the call. */
function isExact(prompt: number[], first: number[], messages: Message[]): boolean {
  const tail = render(messages).slice(render(messages.slice(0, -1)).length - 2)
  return JSON.stringify(prompt) === JSON.stringify([...first, ...CALL, ...tail])
}

test('arguments re-serialised (spacing, key order) and reasoning left out: still the exact ids', async (t) => {
  const { client, prompts, diagnostics } = await gateway(t, [CALL, ANSWER])
  const { assistant, next } = await firstStep(client)
  const call = (assistant.tool_calls as { id: string; type: string; function: { name: string; arguments: string } }[])[0]!
  t.is(call.function.arguments, '{"city": "Paris", "unit": "C"}', 'as the model wrote it')
  const resent = { ...call, function: { ...call.function, arguments: '{"unit":"C","city":"Paris"}' } }
  const { reasoning_content: _dropped, ...withoutReasoning } = next[1] as Message
  const messages = [USER, { ...withoutReasoning, tool_calls: [resent] }, next[2]!]
  await client.chat.completions.create({ model: 'gpt-oss', messages, tools: TOOLS } as never)
  t.true(isExact(prompts[1]!, prompts[0]!, messages))
  t.deepEqual(diagnostics, [])
})

test("a history that changed is re-rendered from the change, said and counted, never the ids' prompt", async (t) => {
  const { client, prompts, diagnostics, port } = await gateway(t, [CALL, ANSWER, CALL, ANSWER, CALL, ANSWER])
  // The reasoning sent back with other text than the model wrote.
  const edited = await firstStep(client, { reasoning_content: 'I will guess.' })
  await client.chat.completions.create({ model: 'gpt-oss', messages: edited.next, tools: TOOLS } as never)
  t.deepEqual(prompts[1], render(edited.next))
  // An earlier message changed (another system message before the user's).
  const { next } = await firstStep(client)
  const changed = [{ role: 'system', content: 'Be brief.' }, ...next]
  await client.chat.completions.create({ model: 'gpt-oss', messages: changed, tools: TOOLS } as never)
  t.deepEqual(prompts[3], render(changed))
  // Calls this gateway never returned.
  const foreign = [
    USER,
    {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'call_elsewhere', type: 'function', function: { name: 'get_weather', arguments: '{}' } }],
    },
    { role: 'tool', tool_call_id: 'call_elsewhere', content: 'sunny' },
  ]
  await client.chat.completions.create({ model: 'gpt-oss', messages: foreign, tools: TOOLS } as never)
  t.deepEqual(prompts[4], render(foreign))
  t.deepEqual(
    diagnostics.map((d) => d.code),
    ['prompt-re-rendered', 'prompt-re-rendered', 'prompt-re-rendered'],
  )
  t.regex(diagnostics[2]!.message, /call_elsewhere.*does not hold/)
  const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
  t.regex(metrics, /harmony_exact_prompts_total\{face="chat",outcome="changed"\} 2/)
  t.regex(metrics, /harmony_exact_prompts_total\{face="chat",outcome="not-found"\} 1/)
})

test('two gateways sharing a SQLite store share the ids (as --workers do); a call id record is no response', async (t) => {
  const folder = mkdtempSync(join(tmpdir(), 'harmony-call-ids-'))
  t.teardown(() => rmSync(folder, { recursive: true, force: true }))
  const stores = [0, 1].map(() => new SqliteResponseStore({ path: join(folder, 'responses.sqlite') }))
  t.teardown(() => Promise.all(stores.map((store) => store.close())))
  const one = await gateway(t, [CALL], { responses: { store: stores[0] } })
  const two = await gateway(t, [ANSWER], { responses: { store: stores[1] } })
  const { next } = await firstStep(one.client)
  await two.client.chat.completions.create({ model: 'gpt-oss', messages: next, tools: TOOLS } as never)
  t.true(isExact(two.prompts[0]!, one.prompts[0]!, next))
  // Its record's id names no response.
  const listed = (await two.client.responses.retrieve('call-ids:x').catch((error: { status: number }) => error)) as { status: number }
  t.is(listed.status, 404)
})

test("with API keys, another key's request answering the same calls is re-rendered", async (t) => {
  const apiKeys = [
    { key: 'sk-one', name: 'one' },
    { key: 'sk-two', name: 'two' },
  ]
  const { client, prompts, port, diagnostics } = await gateway(t, [CALL, ANSWER, ANSWER], { access: { apiKeys } })
  const one = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'sk-one', maxRetries: 0 })
  const two = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'sk-two', maxRetries: 0 })
  t.truthy(client)
  const { next } = await firstStep(one)
  await two.chat.completions.create({ model: 'gpt-oss', messages: next, tools: TOOLS } as never)
  t.deepEqual(prompts[1], render(next))
  await one.chat.completions.create({ model: 'gpt-oss', messages: next, tools: TOOLS } as never)
  t.true(isExact(prompts[2]!, prompts[0]!, next))
  t.deepEqual(
    diagnostics.map((d) => d.code),
    ['prompt-re-rendered'],
  )
})

test('callIdCache: null turns it off; a cache given is used; bounds are checked', async (t) => {
  const off = await gateway(t, [CALL, ANSWER], { callIdCache: null })
  const { next } = await firstStep(off.client)
  await off.client.chat.completions.create({ model: 'gpt-oss', messages: next, tools: TOOLS } as never)
  t.deepEqual(off.prompts[1], render(next))
  t.deepEqual(off.diagnostics, [], 'off: nothing to say')

  const cache = new CallIdCache({ maxEntries: 10 })
  t.teardown(() => cache.close())
  const given = await gateway(t, [CALL, ANSWER], { callIdCache: cache, responses: { store: null } })
  const step = await firstStep(given.client)
  await given.client.chat.completions.create({ model: 'gpt-oss', messages: step.next, tools: TOOLS } as never)
  t.true(isExact(given.prompts[1]!, given.prompts[0]!, step.next))

  t.throws(() => new CallIdCache({ maxBytez: 1 } as never), { instanceOf: TypeError, message: /maxBytez.*maxBytes/ })
  t.throws(() => new CallIdCache({ store: new MemoryResponseStore(), maxBytes: 10 }), { instanceOf: TypeError, message: /store/ })
  await t.throwsAsync(() => gateway(t, [ANSWER], { callIdCache: new CallIdCache(), chat: { idCache: new CallIdCache() } }), {
    instanceOf: TypeError,
    message: /callIdCache.*chat\.idCache/,
  })
})
