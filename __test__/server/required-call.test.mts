/**
 * A required call (`tool_choice: 'required'` or a named function), which no engine enforces: the renderer reads
 * every shape and refuses what names no offered function; the gateway lets the model reason, stops reading at the
 * end of its reasoning, and has the engine continue from the call's header (two engine requests, the second's
 * prompt exactly the first's plus the reasoning and the header), on Chat and Responses, streamed or not,
 * inline and from a render worker.
 */
import test from 'ava'
import { HarmonyRequestError, renderChatCompletionRequest, renderResponsesRequest } from 'harmony-stream'
import type { Engine, GenerateRequest } from 'harmony-stream/engines'
import OpenAI from 'openai'

import { recordingEngine, startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { decodeTokens } from '../helpers/token-bytes.mjs'

const weather = (name: string) => ({
  type: 'function' as const,
  function: { name, parameters: { type: 'object', properties: { city: { type: 'string' } } } },
})
const CHAT_TOOLS = [weather('get_weather'), weather('get_time')]
const RESPONSES_TOOLS = CHAT_TOOLS.map(({ function: f }) => ({ type: 'function' as const, ...f, strict: null }))
const messages = [{ role: 'user' as const, content: 'Weather in Paris?' }]

test('the renderer reads every shape of a required call, and refuses what names no offered function', (t) => {
  const chat = (tool_choice: unknown, tools: unknown = CHAT_TOOLS) =>
    renderChatCompletionRequest({ model: 'm', messages, tools, tool_choice }, { currentDate: null })
  t.is(chat({ type: 'function', function: { name: 'get_time' } }).requiredCall?.name, 'get_time')
  t.is(chat('required').requiredCall?.name, null, 'any of two')
  t.is(chat('required', [weather('get_weather')]).requiredCall?.name, 'get_weather', 'the only one')
  t.is(chat('auto').requiredCall, undefined)
  const responses = renderResponsesRequest(
    { model: 'm', input: 'Hi', tools: RESPONSES_TOOLS, tool_choice: { type: 'function', name: 'get_weather' } },
    { currentDate: null },
  )
  t.is(decodeTokens(Array.from(responses.requiredCall!.reasoning)), '<|channel|>analysis<|message|>')
  t.is(
    decodeTokens(Array.from(responses.requiredCall!.call)),
    '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>',
  )
  t.is(decodeTokens(Array.from(chat('required').requiredCall!.call)), '<|start|>assistant<|channel|>commentary to=functions.')
  for (const [choice, tools, param] of [
    [{ type: 'function', function: { name: 'nope' } }, CHAT_TOOLS, 'tool_choice.function.name'],
    ['required', [], 'tool_choice'],
    [{ type: 'allowed_tools', mode: 'auto', tools: [] }, CHAT_TOOLS, 'tool_choice'],
  ] as const) {
    t.is(t.throws(() => chat(choice, tools), { instanceOf: HarmonyRequestError }).param, param, JSON.stringify(choice))
  }
  const unknown = t.throws(
    () => renderResponsesRequest({ model: 'm', input: 'Hi', tools: RESPONSES_TOOLS, tool_choice: { type: 'function', name: 'nope' } }),
    { instanceOf: HarmonyRequestError },
  )
  t.is(unknown.param, 'tool_choice.name')
})

/** The reasoning the model writes after `<|channel|>analysis<|message|>`, then a final answer it is not let write. */
const REASONING = harmony('Need the weather.<|end|><|start|>assistant<|channel|>final<|message|>Sunny.<|return|>')
/** What the engine writes after the call's header. */
const ARGUMENTS = harmony('{"city":"Paris"}<|call|>')

for (const renderWorkers of [0, 1]) {
  test(`the gateway holds a required call: the model reasons, then completes the call (render workers: ${renderWorkers})`, async (t) => {
    for (const stream of [false, true]) {
      const { engine, prompts } = recordingEngine([REASONING, ARGUMENTS, REASONING, ARGUMENTS])
      const { client } = await startGateway(t, { engine, renderWorkers, renderInlineBytes: 0 })
      const request = {
        model: 'gpt-oss',
        messages,
        tools: CHAT_TOOLS,
        tool_choice: { type: 'function' as const, function: { name: 'get_weather' } },
      }
      let call: { name?: string; arguments?: string } = {}
      let reasoning = ''
      let finish: string | null = null
      if (stream) {
        for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
          const delta = chunk.choices[0]?.delta as {
            tool_calls?: { function?: { name?: string; arguments?: string } }[]
            reasoning_content?: string
          }
          reasoning += delta?.reasoning_content ?? ''
          const f = delta?.tool_calls?.[0]?.function
          if (f?.name) call.name = f.name
          if (f?.arguments) call.arguments = (call.arguments ?? '') + f.arguments
          finish = chunk.choices[0]?.finish_reason ?? finish
        }
      } else {
        const completion = await client.chat.completions.create(request)
        const message = completion.choices[0]!.message as { tool_calls?: { function: typeof call }[]; reasoning_content?: string }
        call = message.tool_calls![0]!.function
        reasoning = message.reasoning_content ?? ''
        finish = completion.choices[0]!.finish_reason
      }
      t.deepEqual(call, { name: 'get_weather', arguments: '{"city":"Paris"}' }, `stream ${stream}`)
      t.is(reasoning, 'Need the weather.')
      t.is(finish, 'tool_calls')
      t.is(prompts.length, 2, 'two engine requests')
      const [first, second] = prompts.map((p) => decodeTokens(p))
      t.true(first!.endsWith('<|start|>assistant<|channel|>analysis<|message|>'))
      t.is(
        second,
        `${first}Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>`,
      )
    }
    // Responses, 'required' with one tool.
    const { engine, prompts } = recordingEngine([REASONING, ARGUMENTS])
    const { client } = await startGateway(t, { engine, renderWorkers, renderInlineBytes: 0 })
    const response = await client.responses.create({
      model: 'gpt-oss',
      input: 'Weather in Paris?',
      tools: [RESPONSES_TOOLS[0]!],
      tool_choice: 'required',
    })
    const items = response.output.map((item) => item.type)
    t.deepEqual(items, ['reasoning', 'function_call'])
    t.like(response.output[1], { name: 'get_weather', arguments: '{"city":"Paris"}' })
    t.is(prompts.length, 2)
  })
}

test('a required call whose reasoning reaches the token limit ends there, with one engine request; an engine failing at once is a 502', async (t) => {
  const cut = harmony('Need the wea')
  const requests: GenerateRequest[] = []
  const limited: Engine = {
    name: 'limited',
    async *generate(request: GenerateRequest) {
      requests.push(request)
      yield { tokens: Uint32Array.from(cut), finishReason: 'length' as const }
    },
  }
  const { client } = await startGateway(t, { engine: limited })
  const completion = await client.chat.completions.create({
    model: 'gpt-oss',
    messages,
    tools: CHAT_TOOLS,
    tool_choice: 'required',
    max_tokens: 5,
  })
  t.is(completion.choices[0]!.finish_reason, 'length')
  t.is(completion.choices[0]!.message.tool_calls, undefined)
  t.is(requests.length, 1)
  const failing: Engine = {
    name: 'failing',
    // biome-ignore lint/correctness/useYield: it fails before its first step
    async *generate() {
      throw Object.assign(new Error('refused'), { name: 'EngineError' })
    },
  }
  const { client: refused } = await startGateway(t, { engine: failing, onError: () => {} })
  const error = await t.throwsAsync(
    refused.chat.completions.create({ model: 'gpt-oss', messages, tools: CHAT_TOOLS, tool_choice: 'required', stream: true }),
    { instanceOf: OpenAI.APIError },
  )
  t.is((error as InstanceType<typeof OpenAI.APIError>).status, 500, 'answered before the status line, not as a 200 with an error frame')
})

test('a model that ends its turn in its reasoning, or ends the call with another stop id, still answers with the call', async (t) => {
  // As llama-server streams a stop: the stop id in one step, the finish in an empty one after it.
  const phases = [
    [harmony('Hello world'), harmony('<|return|>')],
    [harmony('{"city":"Paris"}'), [199_999]],
  ]
  const prompts: number[][] = []
  const engine: Engine = {
    name: 'stopping',
    async *generate(request: GenerateRequest) {
      const steps = phases[prompts.length]!
      prompts.push(Array.from(request.tokens))
      for (const tokens of steps) yield { tokens: Uint32Array.from(tokens) }
      yield { tokens: new Uint32Array(0), finishReason: 'stop' as const }
    },
  }
  const { client } = await startGateway(t, { engine })
  const tool_choice = { type: 'function' as const, function: { name: 'get_time' } }
  const completion = await client.chat.completions.create({ model: 'gpt-oss', messages, tools: CHAT_TOOLS, tool_choice })
  const choice = completion.choices[0]!
  t.is(choice.finish_reason, 'tool_calls')
  t.like((choice.message.tool_calls![0] as { function: object }).function, { name: 'get_time', arguments: '{"city":"Paris"}' })
  t.is((choice.message as { reasoning_content?: string }).reasoning_content, 'Hello world')
  t.true(
    decodeTokens(prompts[1]!).endsWith(
      'Hello world<|end|><|start|>assistant<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>',
    ),
  )
})

test("a required call of a strict function: the arguments' request holds them to its schema from the first token (callArguments)", async (t) => {
  const requests: GenerateRequest[] = []
  const phases = [REASONING, ARGUMENTS]
  const engine: Engine = {
    name: 'recording',
    async *generate(request: GenerateRequest) {
      requests.push(request)
      yield { tokens: Uint32Array.from(phases[requests.length - 1]!), finishReason: 'stop' as const }
    },
  }
  const { client } = await startGateway(t, { engine })
  const strict = CHAT_TOOLS.map((tool, i) => ({ ...tool, function: { ...tool.function, strict: i === 0 } }))
  for (const [tool_choice, constrained] of [
    [{ type: 'function' as const, function: { name: 'get_weather' } }, true],
    [{ type: 'function' as const, function: { name: 'get_time' } }, false],
  ] as const) {
    requests.length = 0
    const completion = await client.chat.completions.create({ model: 'gpt-oss', messages, tools: strict, tool_choice })
    t.is(completion.choices[0]!.finish_reason, 'tool_calls')
    t.is(requests.length, 2)
    // The reasoning is free but for the strict tools' calls it might write; the arguments are the schema's.
    t.truthy(requests[0]!.argumentSchemas)
    t.is(requests[1]!.argumentSchemas, undefined)
    t.deepEqual(requests[1]!.callArguments, constrained ? { schema: strict[0]!.function.parameters } : undefined)
  }
})
