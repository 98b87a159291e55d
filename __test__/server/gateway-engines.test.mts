/**
 * End to end: the official `openai` client → the example gateway → a local server speaking vLLM's, SGLang's
 * or llama.cpp's wire format. The prompt ids the engine receives must be the renderer's for the request, and
 * the client must assemble the completion the engine generated.
 */
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'

import test from 'ava'
import { renderChatCompletionRequest, renderResponsesRequest } from 'harmony-stream'
import {
  type Engine,
  EngineGroup,
  type GenerateRequest,
  LlamaCppEngine,
  SglangEngine,
  TrtllmEngine,
  VllmEngine,
} from 'harmony-stream/engines'
import OpenAI from 'openai'

import { fakeLlamaCpp, fakeSglang, fakeTrtllm, fakeVllm } from '../helpers/fake-engines.mjs'
import { startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'

const root = join(import.meta.dirname, '..', '..')
const { createGateway } = (await import(join(root, 'examples/gateway/server.mjs'))) as {
  createGateway(options: Record<string, unknown>): import('node:http').Server
}

const COMPLETION = harmony(
  '<|channel|>analysis<|message|>Check the tool.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
)
const TOOLS = [
  {
    type: 'function' as const,
    function: {
      name: 'get_weather',
      description: 'Weather now.',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
]
const RENDER = { currentDate: '2025-06-01' }

const KINDS = [
  {
    name: 'vllm',
    start: fakeVllm,
    engine: (url: string) => new VllmEngine({ url, model: 'gpt-oss' }),
    prompt: (b: Record<string, unknown>) => b.prompt,
    limit: (b: Record<string, unknown>) => b.max_tokens,
  },
  {
    name: 'sglang',
    start: fakeSglang,
    engine: (url: string) => new SglangEngine({ url }),
    prompt: (b: Record<string, unknown>) => b.input_ids,
    limit: (b: Record<string, unknown>) => (b.sampling_params as Record<string, unknown>).max_new_tokens,
  },
  {
    name: 'llamacpp',
    start: fakeLlamaCpp,
    engine: (url: string) => new LlamaCppEngine({ url }),
    prompt: (b: Record<string, unknown>) => b.prompt,
    limit: (b: Record<string, unknown>) => b.n_predict,
  },
  {
    name: 'trtllm',
    start: fakeTrtllm,
    engine: (url: string) => new TrtllmEngine({ url, model: 'gpt-oss' }),
    prompt: (b: Record<string, unknown>) => b.prompt,
    limit: (b: Record<string, unknown>) => b.max_tokens,
  },
]

for (const kind of KINDS) {
  test(`${kind.name}: openai client → gateway → engine: the renderer's prompt ids, the engine's answer`, async (t) => {
    const fake = await kind.start({ completion: COMPLETION, chunk: 2 })
    const server = createGateway({ engine: kind.engine(fake.url), renderOptions: RENDER, onDiagnostic: () => {} })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    t.teardown(async () => {
      server.close()
      await fake.close()
    })
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: 'x', maxRetries: 0 })
    const chatBody = {
      model: 'gpt-oss',
      messages: [
        { role: 'system' as const, content: 'Be brief.' },
        { role: 'user' as const, content: 'Weather in Paris?' },
      ],
      tools: TOOLS,
      max_tokens: 300,
    }

    const stream = await client.chat.completions.create({ ...chatBody, stream: true, stream_options: { include_usage: true } })
    let reasoning = ''
    const calls: { name?: string; arguments: string }[] = []
    let finish: string | null = null
    let usage: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta as
        | { reasoning_content?: string; tool_calls?: OpenAI.Chat.Completions.ChatCompletionChunk.Choice.Delta.ToolCall[] }
        | undefined
      reasoning += delta?.reasoning_content ?? ''
      for (const call of delta?.tool_calls ?? []) {
        calls[call.index] ??= { arguments: '' }
        calls[call.index].name ??= call.function?.name
        calls[call.index].arguments += call.function?.arguments ?? ''
      }
      finish = chunk.choices[0]?.finish_reason ?? finish
      usage = chunk.usage ?? usage
    }
    t.is(reasoning, 'Check the tool.')
    t.deepEqual(calls, [{ name: 'get_weather', arguments: '{"city":"Paris"}' }])
    t.is(finish, 'tool_calls')
    const expected = renderChatCompletionRequest(chatBody, RENDER)
    t.deepEqual(kind.prompt(fake.bodies[0]), Array.from(expected.tokens), 'the engine got the rendered prompt')
    t.is(kind.limit(fake.bodies[0]), 300, 'max_tokens became the engine limit')
    t.is(usage?.prompt_tokens, expected.promptTokens)
    t.is(usage?.completion_tokens, COMPLETION.length)

    const response = await client.responses.create({
      model: 'gpt-oss',
      input: 'Weather in Paris?',
      tools: [{ type: 'function', name: 'get_weather', parameters: TOOLS[0].function.parameters, strict: false }],
    })
    t.deepEqual(
      response.output.filter((i) => i.type === 'function_call').map((i) => (i.type === 'function_call' ? [i.name, i.arguments] : null)),
      [['get_weather', '{"city":"Paris"}']],
    )
    const responsesPrompt = renderResponsesRequest(
      {
        model: 'gpt-oss',
        input: 'Weather in Paris?',
        tools: [{ type: 'function', name: 'get_weather', parameters: TOOLS[0].function.parameters, strict: false }],
      },
      RENDER,
    )
    t.deepEqual(kind.prompt(fake.bodies[1]), Array.from(responsesPrompt.tokens))
  })
}

test("an engine that refuses before streaming: the client gets a 502 in OpenAI's shape, and the gateway keeps serving", async (t) => {
  const refusing = await fakeVllm({ completion: COMPLETION, httpError: 400 })
  const logged: unknown[] = []
  const server = createGateway({
    engine: new VllmEngine({ url: refusing.url }),
    onDiagnostic: () => {},
    onError: (e: unknown) => logged.push(e),
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    server.close()
    await refusing.close()
  })
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: 'x', maxRetries: 0 })
  for (let i = 0; i < 2; i++) {
    const error = await t.throwsAsync(
      client.chat.completions.create({ model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }], stream: true }),
    )
    t.is((error as { status?: number }).status, 502)
    t.is((error as { code?: string }).code, 'engine_http_error')
    // The engine's own text and address go to the log, not to the client.
    t.notRegex(error!.message, /the prompt is too long|127\.0\.0\.1/)
  }
  t.is(logged.length, 2)
  t.regex(String((logged[0] as Error).message), /the prompt is too long for this model/)
})

test('prompt_cache_key of a Chat and a Responses body reaches the engine as affinityKey (inline and from a render worker), and pins requests to one engine of a group', async (t) => {
  const ANSWER = harmony('<|channel|>final<|message|>Done.<|return|>')
  const recording = (name: string, requests: GenerateRequest[]): Engine => ({
    name,
    async *generate(request: GenerateRequest) {
      requests.push(request)
      yield { tokens: Uint32Array.from(ANSWER), finishReason: 'stop' as const }
    },
  })
  for (const renderWorkers of [0, 1]) {
    const requests: GenerateRequest[] = []
    // renderInlineBytes 0: every body goes to the worker when there is one.
    const { client } = await startGateway(t, { engine: recording('one', requests), renderWorkers, renderInlineBytes: 0 })
    const messages = [{ role: 'user' as const, content: 'Hi' }]
    await client.chat.completions.create({ model: 'gpt-oss', messages, prompt_cache_key: 'chat-key' })
    await client.responses.create({ model: 'gpt-oss', input: 'Hi', prompt_cache_key: 'responses-key' })
    await client.chat.completions.create({ model: 'gpt-oss', messages })
    t.deepEqual(
      requests.map((r) => r.affinityKey),
      ['chat-key', 'responses-key', undefined],
      `renderWorkers ${renderWorkers}`,
    )
    const error = await t.throwsAsync(client.chat.completions.create({ model: 'gpt-oss', messages, prompt_cache_key: 7 } as never), {
      instanceOf: OpenAI.BadRequestError,
    })
    t.is(error?.param, 'prompt_cache_key')
  }
  // Two engines as one: conversations that share nothing but their key go to one engine.
  const a: GenerateRequest[] = []
  const b: GenerateRequest[] = []
  const { client } = await startGateway(t, { engine: new EngineGroup([recording('a', a), recording('b', b)]) })
  for (let i = 0; i < 4; i++) {
    await client.chat.completions.create({
      model: 'gpt-oss',
      messages: [{ role: 'user', content: `Question ${i}: ${'why '.repeat(20 * i)}` }],
      prompt_cache_key: 'agent-7',
    })
    await client.responses.create({ model: 'gpt-oss', input: `Task ${i}`, prompt_cache_key: 'agent-7' })
  }
  t.deepEqual([a.length, b.length].sort(), [0, 8], 'all eight on one engine')
})
