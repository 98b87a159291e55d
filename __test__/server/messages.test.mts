/**
 * Anthropic's Messages API on the gateway, through the official `@anthropic-ai/sdk` client: a whole message and a
 * streamed one (the same message), a tool loop with the thinking blocks sent back, count_tokens, what Claude Code
 * sends by default, errors in Anthropic's shape; and one conversation through Messages, Chat and Responses
 * renders the same prompt tokens.
 */
import Anthropic from '@anthropic-ai/sdk'
import test from 'ava'

import { type AnthropicEvent, AnthropicMessagesStream, renderChatCompletionRequest, renderResponsesRequest } from 'harmony-stream'
import { EngineError } from 'harmony-stream/engines'
import { renderMessagesRequest } from 'harmony-stream/server'

import { failingEngine, recordingEngine, startGateway } from '../helpers/gateway.mjs'
import { harmony, IMPLEMENTATIONS } from '../helpers/harmony.mjs'
import { decodeTokens } from '../helpers/token-bytes.mjs'

const CALL = harmony(
  '<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
)
const ANSWER = harmony(
  '<|channel|>analysis<|message|>It says sunny.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny in Paris.<|return|>',
)

const WEATHER = {
  name: 'get_weather',
  description: 'The weather in a city.',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] },
}

async function anthropicGateway(
  t: Parameters<typeof startGateway>[0],
  completions: number[][],
  options: Record<string, unknown> = {},
): Promise<{ client: Anthropic; prompts: number[][]; port: number }> {
  const { engine, prompts } = recordingEngine(completions)
  const { port } = await startGateway(t, { engine, ...options })
  const client = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'sk-test', maxRetries: 0 })
  return { client, prompts, port }
}

for (const implementation of IMPLEMENTATIONS) {
  test(`a whole message and a streamed one are the same message: thinking, then the tool call (${implementation})`, async (t) => {
    const { client } = await anthropicGateway(t, [CALL, CALL], { implementation })
    const request = {
      model: 'gpt-oss-120b',
      max_tokens: 1000,
      messages: [{ role: 'user' as const, content: 'Weather in Paris?' }],
      tools: [WEATHER],
    }
    const whole = await client.messages.create(request)
    t.regex(whole.id, /^msg_/)
    t.is(whole.model, 'gpt-oss-120b')
    t.is(whole.stop_reason, 'tool_use')
    t.deepEqual(
      whole.content.map((block) => block.type),
      ['thinking', 'tool_use'],
    )
    t.like(whole.content[0], { type: 'thinking', thinking: 'Need the weather.' })
    t.like(whole.content[1], { type: 'tool_use', name: 'get_weather', input: { city: 'Paris' } })
    t.regex((whole.content[1] as { id: string }).id, /^toolu_/)
    t.is(whole.usage.output_tokens, CALL.length)
    t.true(whole.usage.input_tokens > 0)

    const events: string[] = []
    const stream = client.messages.stream(request)
    stream.on('streamEvent', (event) => events.push(event.type))
    const streamed = await stream.finalMessage()
    // The same message but for its ids and signatures (new each time: a seal has a nonce), and what the SDK adds.
    const same = (message: Anthropic.Message) => ({
      content: message.content.map((block) =>
        block.type === 'tool_use' ? { ...block, id: 'toolu' } : block.type === 'thinking' ? { ...block, signature: 'sealed' } : block,
      ),
      stop_reason: message.stop_reason,
      stop_sequence: message.stop_sequence,
      usage: message.usage,
      model: message.model,
    })
    t.deepEqual(same(streamed), same(whole), 'the same message either way')
    t.is(events[0], 'message_start')
    t.is(events.at(-1), 'message_stop')
    t.true(events.includes('content_block_delta'))
  })
}

test('a tool loop with the SDK, no call id cache: tool_result answered, the thinking sent back and re-rendered, the model goes on', async (t) => {
  const { client, prompts } = await anthropicGateway(t, [CALL, ANSWER], { callIdCache: null })
  const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }]
  const first = await client.messages.create({ model: 'gpt-oss', max_tokens: 500, messages, tools: [WEATHER] })
  const call = first.content.find((block) => block.type === 'tool_use')!
  messages.push({ role: 'assistant', content: first.content })
  messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'sunny, 24 C' }] })
  const second = await client.messages.create({ model: 'gpt-oss', max_tokens: 500, messages, tools: [WEATHER] })
  t.is(second.stop_reason, 'end_turn')
  t.deepEqual(
    second.content.map((block) => block.type),
    ['thinking', 'text'],
  )
  t.like(second.content[1], { type: 'text', text: 'It is sunny in Paris.' })
  // The second prompt holds the thinking sent back, the call and its result, as gpt-oss reads a tool loop.
  t.regex(
    decodeTokens(prompts[1]!),
    /<\|start\|>assistant<\|channel\|>analysis<\|message\|>Need the weather\.<\|end\|><\|start\|>assistant to=functions\.get_weather<\|channel\|>commentary <\|constrain\|>json<\|message\|>\{"city":"Paris"\}<\|call\|><\|start\|>functions\.get_weather to=assistant<\|channel\|>commentary<\|message\|>sunny, 24 C<\|end\|><\|start\|>assistant$/,
  )
})

test('by default, the tool loop continues from the exact ids the engine generated', async (t) => {
  const { client, prompts } = await anthropicGateway(t, [CALL, ANSWER])
  const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }]
  const first = await client.messages.create({ model: 'gpt-oss', max_tokens: 500, messages, tools: [WEATHER] })
  const call = first.content.find((block) => block.type === 'tool_use')!
  messages.push({ role: 'assistant', content: first.content })
  messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'sunny, 24 C' }] })
  await client.messages.create({ model: 'gpt-oss', max_tokens: 500, messages, tools: [WEATHER] })
  // The model wrote `{"city": "Paris"}`, which a re-render writes without the space: the cache keeps its ids.
  const [before, after] = prompts as [number[], number[]]
  t.deepEqual(after.slice(0, before.length + CALL.length), [...before, ...CALL])
  t.regex(
    decodeTokens(after.slice(before.length + CALL.length)),
    /^<\|start\|>functions\.get_weather to=assistant<\|channel\|>commentary<\|message\|>sunny, 24 C<\|end\|><\|start\|>assistant$/,
  )
})

test("thinking shown 'omitted' (Claude Code's default): a signature only, which brings the reasoning back into the next prompt", async (t) => {
  const { client, prompts } = await anthropicGateway(t, [CALL, ANSWER])
  const thinking = { type: 'adaptive' as const, display: 'omitted' as const }
  const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Weather in Paris?' }]
  const first = await client.messages.stream({ model: 'gpt-oss', max_tokens: 500, messages, tools: [WEATHER], thinking }).finalMessage()
  const [block, call] = first.content as [Anthropic.ThinkingBlock, Anthropic.ToolUseBlock]
  t.is(block.type, 'thinking')
  t.is(block.thinking, '', 'no text shown')
  t.true(block.signature.length > 20, 'a sealed signature')
  messages.push({ role: 'assistant', content: first.content })
  messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'sunny' }] })
  await client.messages.create({ model: 'gpt-oss', max_tokens: 500, messages, tools: [WEATHER], thinking })
  t.regex(decodeTokens(prompts[1]!), /<\|channel\|>analysis<\|message\|>Need the weather\.<\|end\|>/)
  // A signature this gateway did not make: the block is read by its text, which is not what the model wrote, so
  // the history is re-rendered from it (the ids behind the call stand for the model's own reasoning).
  const foreign = structuredClone(messages)
  ;(foreign[1]!.content as Anthropic.ContentBlockParam[])[0] = { type: 'thinking', thinking: 'Elsewhere.', signature: 'EqQBforeign' }
  await client.messages.create({ model: 'gpt-oss', max_tokens: 500, messages: foreign, tools: [WEATHER] })
  t.regex(decodeTokens(prompts[2]!), /<\|channel\|>analysis<\|message\|>Elsewhere\.<\|end\|>/)
})

test('one conversation through Messages, Chat Completions and Responses renders the same prompt tokens', (t) => {
  const messages = renderMessagesRequest({
    model: 'gpt-oss',
    max_tokens: 100,
    system: 'Be brief.',
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'Need the weather.', signature: '' },
          { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }] },
    ],
    tools: [WEATHER],
    thinking: { type: 'enabled', budget_tokens: 20_000 },
  })
  const chat = renderChatCompletionRequest({
    model: 'gpt-oss',
    reasoning_effort: 'high',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Weather in Paris?' },
      {
        role: 'assistant',
        content: null,
        reasoning_content: 'Need the weather.',
        tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
      },
      { role: 'tool', tool_call_id: 'toolu_1', content: 'sunny' },
    ],
    tools: [{ type: 'function', function: { name: WEATHER.name, description: WEATHER.description, parameters: WEATHER.input_schema } }],
  })
  const responses = renderResponsesRequest({
    model: 'gpt-oss',
    instructions: 'Be brief.',
    reasoning: { effort: 'high' },
    input: [
      { role: 'user', content: 'Weather in Paris?' },
      { type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text: 'Need the weather.' }] },
      { type: 'function_call', call_id: 'toolu_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { type: 'function_call_output', call_id: 'toolu_1', output: 'sunny' },
    ],
    tools: [{ type: 'function', name: WEATHER.name, description: WEATHER.description, parameters: WEATHER.input_schema, strict: false }],
  })
  t.deepEqual(Array.from(messages.tokens), Array.from(chat.tokens))
  t.deepEqual(Array.from(messages.tokens), Array.from(responses.tokens))
  t.regex(decodeTokens(Array.from(messages.tokens)), /Reasoning: high/)
})

test('count_tokens is the prompt the message request renders', async (t) => {
  const { client, prompts } = await anthropicGateway(t, [ANSWER])
  const request = { model: 'gpt-oss', messages: [{ role: 'user' as const, content: 'Hello there' }], tools: [WEATHER] }
  const counted = await client.messages.countTokens(request)
  await client.messages.create({ ...request, max_tokens: 50 })
  t.is(counted.input_tokens, prompts[0]!.length)
})

test('what Claude Code sends by default is served: adaptive thinking, context_management, output_config, a system message, $schema and defer_loading, any model', async (t) => {
  const { client, prompts, port } = await anthropicGateway(t, [ANSWER])
  const body = {
    model: 'claude-sonnet-4-6',
    max_tokens: 32_000,
    stream: true,
    system: [
      { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1.332.0b8; cc_entrypoint=sdk-cli;' },
      { type: 'text', text: 'You are Claude Code.', cache_control: { type: 'ephemeral' } },
    ],
    messages: [
      { role: 'system', content: 'Project instructions.', output_config: { effort: 'high' } },
      { role: 'system', content: [] },
      { role: 'user', content: [{ type: 'text', text: 'say hi', cache_control: { type: 'ephemeral' } }] },
    ],
    tools: [
      {
        name: 'Bash',
        description: 'Runs a command.',
        input_schema: {
          $schema: 'https://json-schema.org/draft/2020-12/schema',
          type: 'object',
          properties: { command: { type: 'string' } },
          required: ['command'],
          additionalProperties: false,
        },
        defer_loading: false,
      },
    ],
    thinking: { type: 'adaptive', display: 'omitted' },
    context_management: { edits: [{ type: 'clear_thinking_20251015', keep: 'all' }] },
    output_config: { effort: 'medium' },
    metadata: { user_id: 'user_abc' },
  }
  const response = await fetch(`http://127.0.0.1:${port}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'sk-test', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify(body),
  })
  t.is(response.status, 200)
  t.regex(response.headers.get('request-id') ?? '', /\S/)
  t.regex(response.headers.get('x-harmony-not-applied') ?? '', /context_management/)
  const text = await response.text()
  t.regex(text, /^event: message_start\n/)
  const answer = [...text.matchAll(/"text_delta","text":("(?:[^"\\]|\\.)*")/g)].map((match) => JSON.parse(match[1]!)).join('')
  t.is(answer, 'It is sunny in Paris.')
  const prompt = decodeTokens(prompts[0]!)
  t.regex(prompt, /# Instructions\n\nYou are Claude Code\.\n\nProject instructions\./)
  t.notRegex(prompt, /billing/, "the client's billing header is not an instruction")
  t.regex(prompt, /Reasoning: high/, "the system message's effort is the turn's")
  t.regex(prompt, /type Bash = \(_: \{\ncommand: string,\n\}\) => any;/)
  t.truthy(client)
})

test('errors in Anthropic shape: the SDK raises its typed errors', async (t) => {
  const { client, port } = await anthropicGateway(t, [ANSWER])
  const missing = await t.throwsAsync(client.messages.create({ model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }] } as never))
  t.true(missing instanceof Anthropic.BadRequestError)
  t.regex(missing!.message, /max_tokens/)
  const image = await t.throwsAsync(
    client.messages.create({
      model: 'gpt-oss',
      max_tokens: 10,
      messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://a.example/x.png' } }] }],
    }),
  )
  t.true(image instanceof Anthropic.BadRequestError)
  t.regex(image!.message, /messages\[0\]\.content\[0\] is a 'image' block; gpt-oss reads text only/)
  // Inside a tool's result, an image is what the tool gave: the model reads that it was left out, and it is said.
  const { client: tools, prompts } = await anthropicGateway(t, [ANSWER])
  await tools.messages.create({
    model: 'gpt-oss',
    max_tokens: 10,
    messages: [
      { role: 'user', content: 'Look at the file.' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
      {
        role: 'user',
        content: [
          {
            type: 'tool_result',
            tool_use_id: 'toolu_1',
            content: [
              { type: 'text', text: 'A chart:' },
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } },
            ],
          },
        ],
      },
    ],
    tools: [WEATHER],
  })
  t.regex(decodeTokens(prompts[0]!), /<\|message\|>A chart:\n\n\[image left out: this model reads text only\]<\|end\|>/)
  const unknown = await fetch(`http://127.0.0.1:${port}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }], tempertaure: 1 }),
  })
  t.is(unknown.status, 400)
  t.deepEqual(await unknown.json(), {
    type: 'error',
    error: { type: 'invalid_request_error', message: 'Unrecognized request argument supplied: tempertaure' },
  })
})

test('a gateway with keys takes the key as x-api-key or Bearer, and refuses others in Anthropic shape', async (t) => {
  const { engine } = recordingEngine([ANSWER, ANSWER])
  const { port } = await startGateway(t, { engine, apiKeys: ['sk-good'] })
  const request = { model: 'gpt-oss', max_tokens: 20, messages: [{ role: 'user' as const, content: 'hi' }] }
  const byKey = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'sk-good', maxRetries: 0 })
  t.is((await byKey.messages.create(request)).stop_reason, 'end_turn')
  const byToken = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, authToken: 'sk-good', apiKey: null, maxRetries: 0 })
  t.is((await byToken.messages.create(request)).stop_reason, 'end_turn')
  const wrong = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'sk-bad', maxRetries: 0 })
  const refused = await t.throwsAsync(wrong.messages.create(request))
  t.true(refused instanceof Anthropic.AuthenticationError)
})

test("an engine that fails mid-stream ends the stream with Anthropic's error event, which the SDK raises", async (t) => {
  const { port } = await startGateway(t, { engine: failingEngine, onError: () => {} })
  const client = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'x', maxRetries: 0 })
  const stream = client.messages.stream({ model: 'gpt-oss', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }] })
  const failed = await t.throwsAsync(stream.finalMessage())
  t.true(failed instanceof Anthropic.APIError)
  const raw = await fetch(`http://127.0.0.1:${port}/v1/messages`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-oss', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'hi' }] }),
  })
  const text = await raw.text()
  t.regex(text, /event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"[^"]+"\}\}\n\n$/)
})

test("GET /v1/models answers Anthropic's clients in their list's shape", async (t) => {
  const { client } = await anthropicGateway(t, [ANSWER], { model: 'gpt-oss-20b' })
  const models = []
  for await (const model of client.models.list()) models.push(model)
  t.deepEqual(
    models.map(({ type, id, display_name }) => ({ type, id, display_name })),
    [{ type: 'model', id: 'gpt-oss-20b', display_name: 'gpt-oss-20b' }],
  )
  t.false(Number.isNaN(Date.parse(models[0]!.created_at)))
})

test("an overloaded engine is Anthropic's 529 overloaded_error, with the engine's Retry-After", async (t) => {
  const busy = {
    name: 'busy',
    // biome-ignore lint/correctness/useYield: an engine that fails before its first step
    async *generate() {
      throw new EngineError('engine-overloaded', 'the engine is busy', { engine: 'busy', status: 503, retryAfter: '2' })
    },
  }
  const { port } = await startGateway(t, { engine: busy, onError: () => {} })
  for (const stream of [false, true]) {
    const response = await fetch(`http://127.0.0.1:${port}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-oss', max_tokens: 5, stream, messages: [{ role: 'user', content: 'hi' }] }),
    })
    t.is(response.status, 529)
    t.is(response.headers.get('retry-after'), '2')
    t.like(await response.json(), { type: 'error', error: { type: 'overloaded_error' } })
  }
})

test('arguments that are not JSON: the stream sends `{}` at the close, which the SDK parses; the same as the whole message', async (t) => {
  const bad = harmony('<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>location=Paris<|call|>')
  const { client } = await anthropicGateway(t, [bad, bad])
  const request = { model: 'gpt-oss', max_tokens: 50, messages: [{ role: 'user' as const, content: 'Weather?' }], tools: [WEATHER] }
  const streamed = await client.messages.stream(request).finalMessage()
  const whole = await client.messages.create(request)
  t.like(streamed.content[0], { type: 'tool_use', name: 'get_weather', input: {} })
  t.like(whole.content[0], { type: 'tool_use', name: 'get_weather', input: {} })
})

test('a call recovered from the text ends the text block before it; text after it is a block of its own', (t) => {
  const stream = new AnthropicMessagesStream({
    model: 'gpt-oss',
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object' } } }],
    textToolCalls: 'recover',
  })
  const events: AnthropicEvent[] = [
    ...stream.push(
      harmony('<|channel|>final<|message|>Let me check. {"name": "get_weather", "arguments": {"city": "Paris"}} Done soon.<|return|>'),
    ),
    ...stream.finish(),
  ]
  // Blocks never interleave: each stops before the next starts.
  let open: number | null = null
  for (const event of events) {
    if (event.type === 'content_block_start') {
      t.is(open, null, `block ${event.index} started while ${open} was open`)
      open = event.index
    } else if (event.type === 'content_block_stop') {
      t.is(open, event.index)
      open = null
    } else if (event.type === 'content_block_delta') t.is(open, event.index)
  }
  t.deepEqual(
    stream.message().content.map((block) => block.type),
    ['text', 'tool_use', 'text'],
  )
  t.like(stream.message().content[1], { type: 'tool_use', name: 'get_weather', input: { city: 'Paris' } })
})

test('bounds and refusals: too many signatures, a bad thinking display, request-id on a refused key, the effort disabled thinking ran at', async (t) => {
  const { port } = await anthropicGateway(t, [ANSWER, ANSWER])
  const post = (body: object, headers: Record<string, string> = {}) =>
    fetch(`http://127.0.0.1:${port}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    })
  const turns = Array.from({ length: 1025 }, (_, i) => [
    { role: 'user', content: `q${i}` },
    {
      role: 'assistant',
      content: [
        { type: 'thinking', thinking: '', signature: `hsc1.fake${i}` },
        { type: 'text', text: 'a' },
      ],
    },
  ]).flat()
  const many = await post({ model: 'm', max_tokens: 5, messages: [...turns, { role: 'user', content: 'last' }] })
  t.is(many.status, 400)
  t.regex(((await many.json()) as { error: { message: string } }).error.message, /at most 1024 signed thinking blocks/)
  const display = await post({
    model: 'm',
    max_tokens: 5,
    messages: [{ role: 'user', content: 'hi' }],
    thinking: { type: 'adaptive', display: 'loud' },
  })
  t.is(display.status, 400)
  t.regex(((await display.json()) as { error: { message: string } }).error.message, /^thinking\.display must be/)
  const disabled = await post({
    model: 'm',
    max_tokens: 5,
    messages: [{ role: 'user', content: 'hi' }],
    thinking: { type: 'disabled' },
    output_config: { effort: 'high' },
  })
  t.is(disabled.status, 200)
  t.regex(disabled.headers.get('x-harmony-not-applied') ?? '', /thinking/)

  const { engine } = recordingEngine([ANSWER])
  const keyed = await startGateway(t, { engine, apiKeys: ['sk-good'] })
  const refused = await fetch(`http://127.0.0.1:${keyed.port}/v1/messages`, {
    method: 'POST',
    body: '{}',
    headers: { 'x-api-key': 'sk-bad' },
  })
  t.is(refused.status, 401)
  t.regex(refused.headers.get('request-id') ?? '', /\S/)
})

test('a document of text is read as text under its title; a PDF is a 400 naming its source', async (t) => {
  const { client, prompts } = await anthropicGateway(t, [ANSWER])
  await client.messages.create({
    model: 'gpt-oss',
    max_tokens: 20,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'document', title: 'Notes', source: { type: 'text', media_type: 'text/plain', data: 'Paris is sunny.' } },
          { type: 'text', text: 'What do the notes say?' },
        ],
      },
    ],
  })
  t.regex(decodeTokens(prompts[0]!), /<\|start\|>user<\|message\|>Notes\n\nParis is sunny\.\n\nWhat do the notes say\?<\|end\|>/)
  const pdf = await t.throwsAsync(
    client.messages.create({
      model: 'gpt-oss',
      max_tokens: 20,
      messages: [
        { role: 'user', content: [{ type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0=' } }] },
      ],
    }),
  )
  t.true(pdf instanceof Anthropic.BadRequestError)
  t.regex(pdf!.message, /messages\[0\]\.content\[0\] is a document of source type 'base64'/)
})

// stop_reason `max_tokens` and `stop_sequence` (src/wire/messages.ts): the adapter on its own, objects and SSE
// bytes, and the gateway's /v1/messages through the SDK, whole and streamed.
const FINAL_TEXT = 'It is sunny in Paris.'

for (const implementation of IMPLEMENTATIONS) {
  test(`the adapter: an answer cut at the token limit is max_tokens, one at a stop sequence stop_sequence naming it (${implementation})`, (t) => {
    const cut = ANSWER.slice(0, -3)
    const limited = new AnthropicMessagesStream({ model: 'gpt-oss', parser: { implementation } })
    const events = [...limited.push(cut), ...limited.finish({ truncated: true })]
    t.like(
      events.find((event) => event.type === 'message_delta'),
      { delta: { stop_reason: 'max_tokens', stop_sequence: null } },
    )
    t.like(limited.message(), { stop_reason: 'max_tokens', stop_sequence: null })
    const limitedSse = new AnthropicMessagesStream({ model: 'gpt-oss', parser: { implementation } })
    const limitedBytes = limitedSse.pushSse(cut) + limitedSse.finishSse({ truncated: true })
    t.regex(limitedBytes, /"stop_reason":"max_tokens","stop_sequence":null/)

    const stopped = new AnthropicMessagesStream({ model: 'gpt-oss', stop: ['sunny', 'Paris'], parser: { implementation } })
    const stoppedEvents = [...stopped.push(ANSWER), ...stopped.finish()]
    t.like(
      stoppedEvents.find((event) => event.type === 'message_delta'),
      { delta: { stop_reason: 'stop_sequence', stop_sequence: 'sunny' } },
    )
    t.like(stopped.message(), { stop_reason: 'stop_sequence', stop_sequence: 'sunny' })
    t.like(stopped.message().content.at(-1), { type: 'text', text: FINAL_TEXT.slice(0, FINAL_TEXT.indexOf('sunny')) })
    const stoppedSse = new AnthropicMessagesStream({ model: 'gpt-oss', stop: ['sunny', 'Paris'], parser: { implementation } })
    const stoppedBytes = stoppedSse.pushSse(ANSWER) + stoppedSse.finishSse()
    t.regex(stoppedBytes, /"stop_reason":"stop_sequence","stop_sequence":"sunny"/)
  })

  test(`/v1/messages: max_tokens reached is stop_reason max_tokens, a stop sequence stop_sequence naming it, whole and streamed (${implementation})`, async (t) => {
    const { client } = await anthropicGateway(t, [ANSWER, ANSWER, ANSWER, ANSWER], { implementation })
    const base = { model: 'gpt-oss', messages: [{ role: 'user' as const, content: 'Weather in Paris?' }] }
    const limited = { ...base, max_tokens: ANSWER.length - 3 }
    for (const message of [await client.messages.create(limited), await client.messages.stream(limited).finalMessage()]) {
      t.is(message.stop_reason, 'max_tokens')
      t.is(message.stop_sequence, null)
      t.is(message.usage.output_tokens, ANSWER.length - 3)
    }
    const stopped = { ...base, max_tokens: 1000, stop_sequences: ['Paris', 'sunny'] }
    for (const message of [await client.messages.create(stopped), await client.messages.stream(stopped).finalMessage()]) {
      t.is(message.stop_reason, 'stop_sequence')
      t.is(message.stop_sequence, 'sunny')
      t.like(message.content.at(-1), { type: 'text', text: FINAL_TEXT.slice(0, FINAL_TEXT.indexOf('sunny')) })
    }
  })
}
