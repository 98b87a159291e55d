/**
 * Compaction (issue 21; Open Responses 2026-04-24 "Context Compaction"): `POST /v1/responses/compact` through
 * the example gateway with the official openai client (`client.responses.compact`). A new chain started from a
 * compaction's output must prompt the engine exactly as the whole conversation sent statelessly would; a
 * compaction item this gateway did not seal (another key, altered) is a 400 naming it; the compliance suite's
 * HTTP cases (a compaction item in the output, a missing model refused) hold.
 */
import test from 'ava'
import { HarmonyRequestError, renderResponsesRequest } from 'harmony-stream'
import { Compactor } from 'harmony-stream/server'
import type OpenAI from 'openai'

import { recordingEngine, startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'

const ANSWER = harmony('<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Noted: slate.<|return|>')
const MODEL = 'gpt-oss'

const CONVERSATION = [
  { type: 'message' as const, role: 'user' as const, content: [{ type: 'input_text' as const, text: 'Remember the code word: slate.' }] },
  {
    type: 'message' as const,
    role: 'assistant' as const,
    content: [{ type: 'output_text' as const, text: 'OK.', annotations: [] }],
    id: 'msg_a',
    status: 'completed' as const,
  },
  { type: 'message' as const, role: 'user' as const, content: 'Compress this conversation for later continuation.' },
]
const NEXT = { type: 'message' as const, role: 'user' as const, content: 'Continue from here. What is the code word?' }

/** A status error's status, param and code, as the openai client raises it. */
async function refusal(promise: Promise<unknown>): Promise<{ status: number; param: unknown; code: unknown }> {
  const error = (await promise.then(
    () => null,
    (caught: unknown) => caught,
  )) as InstanceType<typeof OpenAI.APIError> | null
  if (error === null) throw new Error('expected a refusal')
  return { status: error.status ?? 0, param: error.param, code: error.code }
}

for (const renderWorkers of [0, 1]) {
  test(`${renderWorkers ? 'render worker' : 'inline'}: a chain started from a compaction prompts as the whole conversation would`, async (t) => {
    const { engine, prompts } = recordingEngine([ANSWER])
    // renderInlineBytes 0: every body goes to the worker.
    const { client } = await startGateway(t, { engine, renderWorkers, renderInlineBytes: 0 })
    const compacted = await client.responses.compact({ model: MODEL, input: CONVERSATION })
    t.is(compacted.object, 'response.compaction')
    const types = compacted.output.map((item) => item.type)
    t.deepEqual(types, ['message', 'message', 'compaction'], 'the user messages, then one compaction item')
    for (const item of compacted.output.slice(0, 2)) {
      t.like(item, { role: 'user', status: 'completed' })
      t.regex((item as { id: string }).id, /^msg_/)
    }
    t.is(compacted.usage.input_tokens, renderResponsesRequest({ model: MODEL, input: CONVERSATION }).promptTokens)

    const answered = await client.responses.create({
      model: MODEL,
      store: false,
      input: [...(compacted.output as OpenAI.Responses.ResponseInputItem[]), NEXT],
    })
    t.is(answered.output_text, 'Noted: slate.')
    t.is(answered.previous_response_id, null)
    t.deepEqual(prompts[0], Array.from(renderResponsesRequest({ model: MODEL, input: [...CONVERSATION, NEXT] }).tokens))
  })
}

test('a compaction of a stored response holds its output too; the new chain prompts as the whole conversation would', async (t) => {
  const { engine, prompts } = recordingEngine([ANSWER])
  const { client } = await startGateway(t, { engine })
  const first = await client.responses.create({ model: MODEL, input: 'Remember the code word: slate.' })
  const compacted = await client.responses.compact({ model: MODEL, previous_response_id: first.id, input: 'Compress this.' })
  t.deepEqual(
    compacted.output.map((item) => item.type),
    ['message', 'message', 'compaction'],
  )
  await client.responses.create({ model: MODEL, input: [...(compacted.output as OpenAI.Responses.ResponseInputItem[]), NEXT] })
  // The whole conversation: the first input, the stored output (reasoning and answer), the compacted input, NEXT.
  const whole = [
    { role: 'user', content: 'Remember the code word: slate.' },
    ...first.output,
    { role: 'user', content: 'Compress this.' },
    NEXT,
  ]
  t.deepEqual(prompts[1], Array.from(renderResponsesRequest({ model: MODEL, input: whole }).tokens))
})

test('a compaction of a stored response stops opening once that response is deleted, and so does a compaction of that compaction', async (t) => {
  const { engine } = recordingEngine([ANSWER])
  const { client } = await startGateway(t, { engine })
  const first = await client.responses.create({ model: MODEL, input: 'Remember the code word: slate.' })
  const compacted = await client.responses.compact({ model: MODEL, previous_response_id: first.id, input: 'Compress this.' })
  const items = compacted.output as OpenAI.Responses.ResponseInputItem[]
  // Compacted again, statelessly: the second item still comes from the stored response.
  const again = await client.responses.compact({ model: MODEL, input: [...items, NEXT] })
  const againItems = again.output as OpenAI.Responses.ResponseInputItem[]
  // Kept: both open.
  await client.responses.create({ model: MODEL, store: false, input: [...items, NEXT] })
  await client.responses.create({ model: MODEL, store: false, input: [...againItems, NEXT] })
  // A compaction of input alone depends on nothing kept.
  const alone = await client.responses.compact({ model: MODEL, input: CONVERSATION })
  await client.responses.delete(first.id)
  const compactionAt = items.findIndex((item) => item.type === 'compaction')
  t.deepEqual(await refusal(client.responses.create({ model: MODEL, input: [...items, NEXT] })), {
    status: 400,
    param: `input[${compactionAt}].encrypted_content`,
    code: 'compaction_source_not_found',
  })
  t.like(await refusal(client.responses.create({ model: MODEL, input: [...againItems, NEXT] })), {
    status: 400,
    code: 'compaction_source_not_found',
  })
  t.like(await refusal(client.responses.compact({ model: MODEL, input: [...items, NEXT] })), {
    status: 400,
    code: 'compaction_source_not_found',
  })
  const fresh = await client.responses.create({
    model: MODEL,
    store: false,
    input: [...(alone.output as OpenAI.Responses.ResponseInputItem[]), NEXT],
  })
  t.is(fresh.status, 'completed')
})

test('compact: a missing model, an unknown field, an empty conversation and an unknown previous response are refused', async (t) => {
  const { client } = await startGateway(t, { engine: recordingEngine([ANSWER]).engine })
  const post = (body: Record<string, unknown>) => client.post('/responses/compact', { body })
  t.like(await refusal(post({ input: CONVERSATION })), { status: 400, param: 'model' })
  t.like(await refusal(post({ model: MODEL, input: CONVERSATION, summary: 'short' })), { status: 400, param: 'summary' })
  t.like(await refusal(post({ model: MODEL, input: [] })), { status: 400, param: 'input' })
  t.like(await refusal(post({ model: MODEL, input: 'x', previous_response_id: 'resp_nothing' })), {
    status: 400,
    param: 'previous_response_id',
    code: 'previous_response_not_found',
  })
  // Taken: the fields of the openai package's ResponseCompactParams.
  const taken = (await post({
    model: MODEL,
    input: CONVERSATION,
    prompt_cache_key: 'k',
    prompt_cache_retention: '24h',
    instructions: 'Be brief.',
  })) as {
    object: string
  }
  t.is(taken.object, 'response.compaction')
})

test('a compaction item sealed with another key, or altered, is a 400 naming it; gateways sharing a key open each other’s', async (t) => {
  const key = 'ab'.repeat(32)
  const one = await startGateway(t, { engine: recordingEngine([ANSWER]).engine, compactor: new Compactor({ key }) })
  const two = await startGateway(t, { engine: recordingEngine([ANSWER]).engine, compactor: new Compactor({ key }) })
  const other = await startGateway(t, { engine: recordingEngine([ANSWER]).engine })
  const compacted = await one.client.responses.compact({ model: MODEL, input: CONVERSATION })
  const output = compacted.output as (OpenAI.Responses.ResponseInputItem & { encrypted_content?: string })[]
  const shared = await two.client.responses.create({ model: MODEL, input: [...output, NEXT] })
  t.is(shared.status, 'completed')

  const refused = await refusal(other.client.responses.create({ model: MODEL, input: [...output, NEXT] }))
  t.deepEqual(refused, { status: 400, param: 'input[2].encrypted_content', code: 'invalid_encrypted_content' })
  const sealed = output[2]!.encrypted_content!
  const flipped = sealed.slice(0, -8) + (sealed.at(-8) === 'A' ? 'B' : 'A') + sealed.slice(-7)
  const altered = [...output.slice(0, 2), { ...output[2]!, encrypted_content: flipped }, NEXT]
  t.like(await refusal(one.client.responses.create({ model: MODEL, input: altered as OpenAI.Responses.ResponseInputItem[] })), {
    status: 400,
    param: 'input[2].encrypted_content',
  })
})

test('Compactor: options checked; a conversation over the bound is a 400; a renderer given a compaction item refuses it', (t) => {
  t.throws(() => new Compactor({ key: 'abc' }), { instanceOf: TypeError, message: /key/ })
  t.throws(() => new Compactor({ key: new Uint8Array(16) }), { instanceOf: TypeError })
  t.throws(() => new Compactor({ maxSealedLength: 0 }), { instanceOf: RangeError })
  t.throws(() => new Compactor({ keys: 'x' } as never), { instanceOf: TypeError, message: /keys/ })
  const small = new Compactor({ maxSealedLength: 200 })
  const long = [{ role: 'user', content: 'x'.repeat(5000) + Math.random().toString(36).repeat(200) }]
  t.throws(() => small.compaction(long, { inputTokens: 1 }), { message: /too large to compact/ })
  // Sealed and opened: the items as they went in (with the ids a compaction gives them).
  const compactor = new Compactor()
  const { output } = compactor.compaction(CONVERSATION, { inputTokens: 1 })
  const opened = compactor.expand({ input: [...output, NEXT] }).input as Record<string, unknown>[]
  t.is(opened.length, CONVERSATION.length + 1)
  t.like(opened[1], { role: 'assistant', id: 'msg_a' })
  t.deepEqual(opened.at(-1), NEXT)
  const error = t.throws(() => renderResponsesRequest({ model: MODEL, input: output }), { instanceOf: HarmonyRequestError })
  t.is((error as HarmonyRequestError & { param?: string }).param, 'input[2].type')
})

test('a compaction of a conversation that holds one, and a compaction beside previous_response_id, prompt as the whole conversation', async (t) => {
  const { engine, prompts } = recordingEngine([ANSWER])
  const { client } = await startGateway(t, { engine })
  const first = await client.responses.compact({ model: MODEL, input: CONVERSATION })
  const more = { type: 'message' as const, role: 'user' as const, content: 'And one more thing.' }
  // Compacting a window that holds a compaction: the new one holds the whole conversation.
  const second = await client.responses.compact({ model: MODEL, input: [...(first.output as OpenAI.Responses.ResponseInputItem[]), more] })
  await client.responses.create({ model: MODEL, input: [...(second.output as OpenAI.Responses.ResponseInputItem[]), NEXT] })
  t.deepEqual(prompts[0], Array.from(renderResponsesRequest({ model: MODEL, input: [...CONVERSATION, more, NEXT] }).tokens))
  // A stored response, then a request naming it and holding a compaction: the stored items come first.
  const stored = await client.responses.create({ model: MODEL, input: 'Before.' })
  await client.responses.create({
    model: MODEL,
    previous_response_id: stored.id,
    input: [...(first.output as OpenAI.Responses.ResponseInputItem[]), NEXT],
  })
  const whole = [{ role: 'user', content: 'Before.' }, ...stored.output, ...CONVERSATION, NEXT]
  t.deepEqual(prompts[2], Array.from(renderResponsesRequest({ model: MODEL, input: whole }).tokens))
})

test('Compactor: a conversation over maxOpenedBytes is not compacted; a bad key is refused without showing it', (t) => {
  const compactor = new Compactor({ maxOpenedBytes: 1000 })
  t.throws(() => compactor.compaction([{ role: 'user', content: 'x'.repeat(2000) }], { inputTokens: 1 }), {
    message: /too large to compact/,
  })
  t.notThrows(() => compactor.compaction([{ role: 'user', content: 'x'.repeat(100) }], { inputTokens: 1 }))
  // An item sealed by a gateway with a larger bound (the same key) stops inflating at this one's bound.
  const key = 'a'.repeat(64)
  const large = new Compactor({ key, maxOpenedBytes: 100_000 })
  const item = large.compaction([{ role: 'user', content: 'x'.repeat(50_000) }], { inputTokens: 1 }).output.at(-1)!
  t.true(String(item.encrypted_content).length < 1000, 'a small item')
  const small = new Compactor({ key, maxOpenedBytes: 10_000 })
  t.like(
    t.throws(() => small.expand({ model: 'm', input: [item, { role: 'user', content: 'Next.' }] })),
    { status: 400, param: 'input[0].encrypted_content', code: 'compaction-too-large' },
  )
  t.like(large.expand({ model: 'm', input: [item] }), { input: [{ role: 'user' }] })
  const secret = 'f'.repeat(63)
  const error = t.throws(() => new Compactor({ key: `${secret}\n` }), { instanceOf: TypeError })
  t.false(error.message.includes('fff'), error.message)
})
