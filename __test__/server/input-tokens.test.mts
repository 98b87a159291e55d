/**
 * `POST /v1/responses/input_tokens` (issue 47) through the official openai client's
 * `responses.inputTokens.count`: the count is the length of the prompt the engine gets for the same request
 * through `responses.create` (a plain input, tools and instructions, a continuation by `previous_response_id`
 * within a turn and after it), inline and in a render worker; the route is not taken for a response id; what
 * the Responses API refuses, it refuses; one key cannot count from another's response; a count is not metered or
 * said as a prompt the engine got.
 */
import test from 'ava'
import OpenAI from 'openai'

import { recordingEngine, startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { startMcpServer } from '../helpers/mcp-server.mjs'
import { ANSWER, CALL, TOOLS } from '../helpers/weather-loop.mjs'

const HELLO = harmony('<|channel|>analysis<|message|>Greet.<|end|><|start|>assistant<|channel|>final<|message|>Hello.<|return|>')

/** The status, code and param an openai client raised. */
async function refusal(promise: Promise<unknown>): Promise<{ status?: number; code?: string; param?: string }> {
  try {
    await promise
  } catch (error) {
    const { status, code, param } = error as { status?: number; code?: string; param?: string }
    return { status, code, param }
  }
  throw new Error('the request was answered')
}

for (const renderWorkers of [0, 1]) {
  test(`the count is the prompt the engine gets for the same request: plain, with tools and instructions, continued (${renderWorkers ? 'render worker' : 'inline'})`, async (t) => {
    const { engine, prompts } = recordingEngine([HELLO, CALL, ANSWER, HELLO])
    // renderInlineBytes 0: every body goes to the worker when there is one. No date in the prompt: a count and its
    // request a midnight apart would render two days.
    const { client } = await startGateway(t, { engine, renderWorkers, renderInlineBytes: 0, renderOptions: { currentDate: null } })
    const counts: number[] = []
    const count = async (request: OpenAI.Responses.InputTokenCountParams) => {
      const counted = await client.responses.inputTokens.count(request)
      t.is(counted.object, 'response.input_tokens')
      counts.push(counted.input_tokens)
    }

    const plain = { model: 'gpt-oss', input: 'Hi there' }
    await count(plain)
    const hello = await client.responses.create(plain)
    t.is(hello.usage?.input_tokens, counts[0])

    const withTools = { model: 'gpt-oss', instructions: 'Be brief.', input: 'Weather in Paris?', tools: TOOLS }
    await count(withTools)
    const first = await client.responses.create(withTools)
    const call = first.output.find((item) => item.type === 'function_call')!
    t.truthy(call, JSON.stringify(first.output))

    // Within a turn: the engine is prompted with the ids it saw and generated, then the result.
    const output = { type: 'function_call_output' as const, call_id: call.call_id, output: '{"sky":"sunny"}' }
    const continued = { model: 'gpt-oss', instructions: 'Be brief.', previous_response_id: first.id, input: [output], tools: TOOLS }
    await count(continued)
    const second = await client.responses.create(continued)
    t.is(second.output_text, 'It is sunny in Paris.')

    // After it: a new user turn, re-rendered after the stored conversation.
    const next = { previous_response_id: second.id, input: 'And in Rome?', tools: TOOLS }
    // Without `model`, as OpenAI's count takes it.
    await count(next)
    await client.responses.create({ model: 'gpt-oss', ...next })

    t.deepEqual(
      counts,
      prompts.map((prompt) => prompt.length),
    )
    // What the tools and instructions add, and what each continuation stands on, is counted.
    t.true(counts[1]! > counts[0]!)
    t.true(counts[2]! > counts[1]! && counts[3]! > counts[2]!)
    t.deepEqual(prompts[2]!.slice(0, prompts[1]!.length), prompts[1], 'the continuation within a turn was exact')
  })
}

test('the route is answered before /v1/responses/{id}: GET is a 405 naming POST, a gateway that keeps nothing counts too', async (t) => {
  const { engine, prompts } = recordingEngine([HELLO])
  const { client, port } = await startGateway(t, { engine, responseStore: null, renderOptions: { currentDate: null } })
  const got = await fetch(`http://127.0.0.1:${port}/v1/responses/input_tokens`)
  t.is(got.status, 405)
  t.is(got.headers.get('allow'), 'POST')
  const counted = await client.responses.inputTokens.count({ model: 'gpt-oss', input: 'Hi there' })
  await client.responses.create({ model: 'gpt-oss', input: 'Hi there' })
  t.is(counted.input_tokens, prompts[0]!.length)
  t.like(await refusal(client.responses.inputTokens.count({ previous_response_id: 'resp_1', input: 'And?' })), {
    status: 400,
    code: 'previous_response_not_found',
    param: 'previous_response_id',
  })
})

test('a count in a conversation counts its items before the input, and adds nothing to it', async (t) => {
  const { engine, prompts } = recordingEngine([HELLO])
  // No date in the prompt: a count and its request a midnight apart would render two days.
  const { client } = await startGateway(t, { engine, renderOptions: { currentDate: null } })
  const conversation = await client.conversations.create({ items: [{ type: 'message', role: 'user', content: 'My name is Ada.' }] })
  const alone = await client.responses.inputTokens.count({ model: 'gpt-oss', input: 'Hi there' })
  const counted = await client.responses.inputTokens.count({ model: 'gpt-oss', input: 'Hi there', conversation: conversation.id })
  t.true(counted.input_tokens > alone.input_tokens)
  t.is((await client.conversations.items.list(conversation.id)).data.length, 1, 'a count adds nothing to the conversation')
  // As the response would be prompted: the same request made, its prompt the count.
  await client.responses.create({ model: 'gpt-oss', input: 'Hi there', conversation: conversation.id })
  t.is(prompts[0]!.length, counted.input_tokens)
})

test('what a count cannot take is a 400 naming the field, what gpt-oss cannot do is said; a gateway that ignores unknown fields takes them without them', async (t) => {
  const { engine } = recordingEngine([HELLO])
  const { client } = await startGateway(t, { engine })
  const body = { model: 'gpt-oss', input: 'Hi there' }
  // A field of POST /v1/responses that a count does not take.
  t.like(await refusal(client.responses.inputTokens.count({ ...body, stream: true } as never)), { status: 400, param: 'stream' })
  t.like(await refusal(client.responses.inputTokens.count({ ...body, conversation: 'conv_1' })), { status: 404, param: 'conversation' })
  t.like(await refusal(client.responses.inputTokens.count({ ...body, truncation: 'auto' })), { status: 400, param: 'truncation' })
  t.like(await refusal(client.responses.inputTokens.count({ model: 'gpt-oss' })), { status: 400, param: 'input' })
  t.like(await refusal(client.responses.inputTokens.count({ ...body, model: '' })), { status: 400, param: 'model' })
  t.like(await refusal(client.responses.inputTokens.count({ ...body, previous_response_id: 'resp_missing' })), {
    status: 400,
    code: 'previous_response_not_found',
  })
  const counted = (await client.responses.inputTokens.count(body)).input_tokens
  // 'none': the tools are left out of the prompt.
  const none = await client.responses.inputTokens.count({ ...body, tools: TOOLS, tool_choice: 'none' })
  const auto = await client.responses.inputTokens.count({ ...body, tools: TOOLS })
  t.true(auto.input_tokens > none.input_tokens)
  // A preference gpt-oss has no control for is taken, and said as a response says it.
  const said = await client.responses.inputTokens.count({ ...body, text: { verbosity: 'low' } }).withResponse()
  t.is(said.response.headers.get('x-harmony-not-applied'), 'text.verbosity')
  t.is(said.data.input_tokens, counted)
  const ignoring = await startGateway(t, { engine, unknownFields: 'ignore' })
  const taken = await ignoring.client.responses.inputTokens.count({ ...body, stream: true, store: false, max_output_tokens: 5 } as never)
  t.is(taken.input_tokens, counted)
})

test("one key cannot count from another key's response", async (t) => {
  const keys = [
    { key: 'sk-alpha-0123456789', name: 'alpha' },
    { key: 'sk-beta-0123456789', name: 'beta' },
  ]
  const { engine, prompts } = recordingEngine([HELLO, HELLO])
  const { port } = await startGateway(t, { engine, apiKeys: keys, renderOptions: { currentDate: null } })
  const client = (apiKey: string) => new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey, maxRetries: 0 })
  const [alpha, beta] = [client(keys[0]!.key), client(keys[1]!.key)]
  const kept = await alpha.responses.create({ model: 'gpt-oss', input: 'Remember: slate.' })
  const request = { model: 'gpt-oss', previous_response_id: kept.id, input: 'The word?' }
  t.like(await refusal(beta.responses.inputTokens.count(request)), { status: 400, code: 'previous_response_not_found' })
  const counted = await alpha.responses.inputTokens.count(request)
  await alpha.responses.create(request)
  t.is(counted.input_tokens, prompts[1]!.length)
})

test('an MCP server is listed to count its tools; an approved call, which a count would have to run, is refused', async (t) => {
  const mcp = await startMcpServer(t)
  const { engine, prompts } = recordingEngine([
    harmony('<|channel|>commentary to=calc.add <|constrain|>json<|message|>{"a":2,"b":40}<|call|>'),
  ])
  const { client } = await startGateway(t, { engine, mcpServers: ['http://127.0.0.1:'], renderOptions: { currentDate: null } })
  const tools = [{ type: 'mcp' as const, server_label: 'calc', server_url: mcp.url }]
  const request = { model: 'gpt-oss', input: 'What is 2 + 40?', tools }
  const counted = await client.responses.inputTokens.count(request)
  const asked = await client.responses.create(request)
  t.is(counted.input_tokens, prompts[0]!.length)
  const approval = asked.output.find((item) => item.type === 'mcp_approval_request')!
  t.truthy(approval, JSON.stringify(asked.output))
  const approving = {
    model: 'gpt-oss',
    previous_response_id: asked.id,
    input: [{ type: 'mcp_approval_response' as const, approval_request_id: approval.id, approve: true }],
    tools,
  }
  t.like(await refusal(client.responses.inputTokens.count(approving)), { status: 400, param: 'input[0]' })
  t.deepEqual(mcp.calls, [], 'no call ran')
})

test('a count is no prompt the engine got: the re-render of calls the gateway does not hold is neither said nor metered', async (t) => {
  const diagnostics: string[] = []
  const { engine } = recordingEngine([ANSWER])
  const { client, port } = await startGateway(t, { engine, onDiagnostic: ({ code }: { code: string }) => diagnostics.push(code) })
  // A stateless tool loop answering a call this gateway never made: its prompt is a re-render.
  const request = {
    model: 'gpt-oss',
    tools: TOOLS,
    store: false,
    input: [
      { role: 'user' as const, content: 'Weather in Paris?' },
      { type: 'function_call' as const, call_id: 'call_elsewhere', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { type: 'function_call_output' as const, call_id: 'call_elsewhere', output: '{"sky":"sunny"}' },
    ],
  }
  const metered = async () => {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
    return /^harmony_exact_prompts_total\{[^}]*outcome="not-found"[^}]*\} (\d+)/m.exec(text)?.[1] ?? '0'
  }
  const { store: _, ...countable } = request
  await client.responses.inputTokens.count(countable)
  t.deepEqual(diagnostics, [])
  t.is(await metered(), '0')
  await client.responses.create(request)
  t.deepEqual(diagnostics, ['prompt-re-rendered'])
  t.is(await metered(), '1')
})
