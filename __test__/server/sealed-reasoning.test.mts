/**
 * Reasoning for clients that keep nothing on the gateway (issue 29): `store: false` with `include:
 * ['reasoning.encrypted_content']`, as Codex CLI sends every turn. Each reasoning item carries its reasoning
 * sealed; sent back (even with its readable content dropped, as Codex sends it), it is rendered as the stored
 * conversation would be; content this gateway did not seal is a 400 naming the item.
 */
import test from 'ava'
import { renderResponsesRequest } from 'harmony-stream'
import { Compactor } from 'harmony-stream/server'
import OpenAI from 'openai'

import { recordingEngine, startGateway } from '../helpers/gateway.mjs'
import { ANSWER, CALL, TOOLS } from '../helpers/weather-loop.mjs'

const KEY = 'ab'.repeat(32)

type Item = Record<string, unknown>

/** The first turn, stateless, with sealed reasoning; then the request a stateless client sends next. */
async function firstTurn(client: OpenAI, stream: boolean): Promise<{ output: Item[]; next: Item[] }> {
  const body = {
    model: 'gpt-oss',
    input: 'Weather in Paris?',
    tools: TOOLS,
    store: false,
    include: ['reasoning.encrypted_content' as const],
  }
  let output: Item[]
  if (stream) {
    // A stateless client builds its history from the items as each is done.
    output = []
    for await (const event of await client.responses.create({ ...body, stream: true }))
      if (event.type === 'response.output_item.done') output.push(JSON.parse(JSON.stringify(event.item)))
  } else output = JSON.parse(JSON.stringify((await client.responses.create(body)).output))
  const call = output.find((item) => item.type === 'function_call')!
  const next = [
    { role: 'user', content: 'Weather in Paris?' },
    ...output,
    { type: 'function_call_output', call_id: call.call_id, output: '{"sky":"sunny"}' },
  ]
  return { output, next }
}

for (const stream of [false, true]) {
  for (const renderWorkers of [0, 1]) {
    const how = `${stream ? 'streamed' : 'whole'}, ${renderWorkers ? 'render worker' : 'inline'}`
    test(`${how}, no call id cache: sealed reasoning comes back as the reasoning it sealed`, async (t) => {
      const { engine, prompts } = recordingEngine([CALL, ANSWER])
      const options = { engine, renderWorkers, renderInlineBytes: 0, renderOptions: { currentDate: null }, callIdCache: null }
      const { client } = await startGateway(t, options)
      const { output, next } = await firstTurn(client, stream)
      const reasoning = output.find((item) => item.type === 'reasoning')!
      t.is(typeof reasoning.encrypted_content, 'string')
      t.false(String(reasoning.encrypted_content).includes('weather'), 'sealed, not readable')
      // Codex sends the item back with its readable parts emptied: the sealed text is what is rendered.
      const stripped = next.map((item) => (item.type === 'reasoning' ? { ...item, content: null, summary: [] } : item))
      const second = await client.responses.create({ model: 'gpt-oss', input: stripped as never, tools: TOOLS, store: false })
      t.is(second.output_text, 'It is sunny in Paris.')
      const whole = renderResponsesRequest(
        { model: 'gpt-oss', input: next.map(({ encrypted_content: _, ...item }) => item), tools: TOOLS },
        { currentDate: null },
      )
      t.deepEqual(prompts[1], Array.from(whole.tokens))
      t.true(whole.tokens.length > 0)
    })

    test(`${how}, by default: Codex's second request is the first prompt, the ids generated, then the result`, async (t) => {
      const { engine, prompts } = recordingEngine([CALL, ANSWER])
      const diagnostics: string[] = []
      const options = {
        engine,
        renderWorkers,
        renderInlineBytes: 0,
        renderOptions: { currentDate: null },
        onDiagnostic: (d: { code: string }) => diagnostics.push(d.code),
      }
      const { client } = await startGateway(t, options)
      const { next } = await firstTurn(client, stream)
      const stripped = next.map((item) => (item.type === 'reasoning' ? { ...item, content: null, summary: [] } : item))
      const second = await client.responses.create({ model: 'gpt-oss', input: stripped as never, tools: TOOLS, store: false })
      t.is(second.output_text, 'It is sunny in Paris.')
      const plain = (items: Item[]) => items.map(({ encrypted_content: _, ...item }) => item)
      const render = (items: Item[]) =>
        Array.from(renderResponsesRequest({ model: 'gpt-oss', input: plain(items), tools: TOOLS }, { currentDate: null }).tokens)
      // What the result adds: the re-render's tokens after the history up to the call (which ends with `<|start|>assistant`).
      const result = render(next).slice(render(next.slice(0, -1)).length - 2)
      t.deepEqual(prompts[1], [...prompts[0]!, ...CALL, ...result])
      t.notDeepEqual(prompts[1], render(next), 'the re-render differs: the model wrote the call header otherwise')
      t.false(diagnostics.includes('prompt-re-rendered'))
    })
  }
}

test('without include, reasoning items carry no encrypted_content', async (t) => {
  const { engine } = recordingEngine([CALL])
  const { client } = await startGateway(t, { engine })
  const response = await client.responses.create({ model: 'gpt-oss', input: 'Weather in Paris?', tools: TOOLS, store: false })
  const reasoning = response.output.find((item) => item.type === 'reasoning') as unknown as Item
  t.false('encrypted_content' in reasoning)
})

test('altered, foreign or another key sealed: a 400 naming the item', async (t) => {
  const { engine } = recordingEngine([CALL, CALL])
  const { client } = await startGateway(t, { engine, compactor: new Compactor({ key: KEY }) })
  const { next } = await firstTurn(client, false)
  const at = next.findIndex((item) => item.type === 'reasoning')
  const sealed = String(next[at]!.encrypted_content)
  const other = (await startGateway(t, { engine: recordingEngine([ANSWER]).engine, compactor: new Compactor({ key: 'cd'.repeat(32) }) }))
    .client
  const altered = `${sealed.slice(0, -4)}${sealed.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`
  for (const [to, content] of [
    [client, altered],
    [client, 'gAAAAABn-another-servers-reasoning'],
    [other, sealed],
  ] as const) {
    const input = next.map((item, i) => (i === at ? { ...item, encrypted_content: content } : item))
    const error = await t.throwsAsync(to.responses.create({ model: 'gpt-oss', input: input as never, tools: TOOLS, store: false }), {
      instanceOf: OpenAI.BadRequestError,
    })
    t.is(error?.param, `input[${at}].encrypted_content`)
    t.is(error?.code, 'invalid_encrypted_content')
  }
})

test('gateways sharing a key open each other\u2019s reasoning', async (t) => {
  const first = recordingEngine([CALL])
  const { client } = await startGateway(t, { engine: first.engine, compactor: new Compactor({ key: KEY }) })
  const { next } = await firstTurn(client, false)
  const second = recordingEngine([ANSWER])
  const other = (await startGateway(t, { engine: second.engine, compactor: new Compactor({ key: KEY }) })).client
  const answer = await other.responses.create({ model: 'gpt-oss', input: next as never, tools: TOOLS, store: false })
  t.is(answer.output_text, 'It is sunny in Paris.')
})

test('include takes only what the gateway can include, naming the entry', async (t) => {
  const { client } = await startGateway(t, { engine: recordingEngine([ANSWER]).engine })
  const error = await t.throwsAsync(
    client.responses.create({ model: 'gpt-oss', input: 'hi', include: ['reasoning.encrypted_content', 'file_search_call.results'] }),
    { instanceOf: OpenAI.BadRequestError },
  )
  t.is(error?.param, 'include[1]')
})

test('one sealed item sent many times does not open many times: a request opens at most the bound, then a 400', async (t) => {
  const { engine } = recordingEngine([CALL, ANSWER])
  // The bound of this gateway's seal: small enough that a few copies of one reasoning item pass it.
  const { client } = await startGateway(t, { engine, compactor: new Compactor({ key: KEY, maxOpenedBytes: 1000 }) })
  const { output, next } = await firstTurn(client, false)
  const reasoning = output.find((item) => item.type === 'reasoning')!
  const text = (reasoning.content as { text: string }[])[0]!.text
  const copies = Math.floor(1000 / text.length) + 1
  const error = await t.throwsAsync(
    client.responses.create({ model: 'gpt-oss', input: [...Array(copies).fill(reasoning), ...next] as never, tools: TOOLS, store: false }),
  )
  t.like(error, { status: 400, code: 'sealed_content_too_large' })
  // The request as the client sends it, the item once, opens.
  t.is(
    (await client.responses.create({ model: 'gpt-oss', input: next as never, tools: TOOLS, store: false })).output_text,
    'It is sunny in Paris.',
  )
})
