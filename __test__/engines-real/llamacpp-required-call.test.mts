/**
 * A required call on a real llama-server: the bigram model, which ends its turn after "Hello world" wherever it
 * starts, is held to a named function all the same. Its reasoning ends at its `<|return|>` (ended as `<|end|>`),
 * the gateway writes the call's header, and the server continues from it, serving that second prompt from the
 * first's cache (its own cached-token count says so).
 */
import test from 'ava'
import { LlamaCppEngine } from 'harmony-stream/engines'

import { startGateway } from '../helpers/gateway.mjs'
import { llamaBuildOrSkip, llamaServerForFile } from '../helpers/llama-server.mjs'

const build = llamaBuildOrSkip()
const real = build ? test : test.skip
const server = llamaServerForFile(test, build)

const TOOLS = [
  {
    type: 'function' as const,
    function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
  },
]

real('a named tool_choice: the model reasons, then the call is completed by the server from its header', async (t) => {
  const diagnostics: { code: string }[] = []
  const { client } = await startGateway(t, {
    engine: new LlamaCppEngine({ url: server().url }),
    onDiagnostic: (d: { code: string }) => diagnostics.push(d),
  })
  const messages = [{ role: 'user' as const, content: 'Weather in Paris?' }]
  const plain = await client.chat.completions.create({ model: 'gpt-oss', messages, tools: TOOLS, max_tokens: 40 })
  t.is(plain.choices[0]!.finish_reason, 'stop', 'left alone, the model answers without a call')
  const held = await client.chat.completions.create({
    model: 'gpt-oss',
    messages,
    tools: TOOLS,
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
    max_tokens: 40,
  })
  const choice = held.choices[0]!
  t.is((choice.message.tool_calls?.[0] as { function?: { name: string } } | undefined)?.function?.name, 'get_weather')
  t.is(choice.finish_reason, 'tool_calls')
  t.is((choice.message as { reasoning_content?: string }).reasoning_content, 'Hello world')
  // The second request's prompt came from the server's cache: the first prompt and the reasoning at least.
  t.true((held.usage?.prompt_tokens_details?.cached_tokens ?? 0) >= plain.usage!.prompt_tokens, JSON.stringify(held.usage))
})

real("a named strict function: the server's grammar holds the arguments the gateway asks for to its schema", async (t) => {
  const { client } = await startGateway(t, { engine: new LlamaCppEngine({ url: server().url }) })
  const parameters = {
    type: 'object',
    properties: { city: { enum: ['Paris', 'Rome'] } },
    required: ['city'],
    additionalProperties: false,
  }
  const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters, strict: true } }]
  const messages = [{ role: 'user' as const, content: 'Weather in Paris?' }]
  const tool_choice = { type: 'function' as const, function: { name: 'get_weather' } }
  const held = await client.chat.completions.create({ model: 'gpt-oss', messages, tools, tool_choice, max_tokens: 60 })
  const call = held.choices[0]!.message.tool_calls?.[0] as { function: { name: string; arguments: string } } | undefined
  t.is(call?.function.name, 'get_weather')
  // The bigram model writes "Hello world" wherever it starts; held to the schema, it writes one of its cities.
  const args = JSON.parse(call?.function.arguments ?? 'null') as { city?: string }
  t.true(args.city === 'Paris' || args.city === 'Rome', JSON.stringify(call))
  t.deepEqual(Object.keys(args), ['city'])
  // Without strict, the same call's arguments are the model's own (not JSON): the schema made the difference.
  const free = [{ type: 'function' as const, function: { name: 'get_weather', parameters } }]
  const loose = await client.chat.completions.create({ model: 'gpt-oss', messages, tools: free, tool_choice, max_tokens: 60 })
  const looseArgs = (loose.choices[0]!.message.tool_calls?.[0] as { function: { arguments: string } } | undefined)?.function.arguments
  t.notDeepEqual(looseArgs, call?.function.arguments)
})
