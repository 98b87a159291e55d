/**
 * The clients people point at an OpenAI-compatible server, each with its default settings, against the gateway
 * with its defaults: the OpenAI Agents SDK with no model set (its default model settings send
 * `text.verbosity` and `reasoning.effort: 'none'`), and the Vercel AI SDK's default OpenAI provider (the
 * Responses API, store on: a tool loop's second step names the first step's items by `item_reference`), and
 * LangChain's `ChatOpenAI` on Chat Completions and on the Responses API.
 * docs/CLIENTS.md has a recipe per client.
 */
import type { AddressInfo } from 'node:net'

import { createAnthropic } from '@ai-sdk/anthropic'
import { createOpenAI } from '@ai-sdk/openai'
import { ChatOpenAI } from '@langchain/openai'
import { Agent, run, setDefaultOpenAIClient, setTracingDisabled } from '@openai/agents'
import { generateText, stepCountIs, streamText, tool } from 'ai'
import test from 'ava'
import { createGateway } from 'harmony-stream/server'
import OpenAI from 'openai'
import { z } from 'zod'

import { exampleReplay, recordingEngine } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { decodeTokens } from '../helpers/token-bytes.mjs'

const CALL = harmony(
  '<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
)
const ANSWER = harmony(
  '<|channel|>analysis<|message|>It is clear.<|end|><|start|>assistant<|channel|>final<|message|>It is sunny in Paris.<|return|>',
)

/** The gateway with its defaults on a free port, closed after the test; what it logged as not applied. */
async function gateway(t: { teardown(fn: () => Promise<void>): void }, engine: object, options: Record<string, unknown> = {}) {
  const notApplied: string[] = []
  const server = createGateway({
    ...options,
    engine: engine as never,
    onDiagnostic: (diagnostic) => {
      if (diagnostic.code === 'not-applied') notApplied.push(diagnostic.message.split(':')[0]!)
    },
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, notApplied }
}

/** The AI SDK tools of the weather loop: `get_weather`, which records its input in `calls` and says the sky is clear. */
function weatherTools(calls: unknown[]) {
  return {
    get_weather: tool({
      description: 'The weather in a city now.',
      inputSchema: z.object({ city: z.string() }),
      execute: async (input) => {
        calls.push(input)
        return { sky: 'clear' }
      },
    }),
  }
}

test.serial('OpenAI Agents SDK: an Agent with no model, its default settings, runs through the gateway', async (t) => {
  const [answer] = await exampleReplay()
  const { baseURL, notApplied } = await gateway(t, recordingEngine([answer!]).engine)
  setTracingDisabled(true)
  setDefaultOpenAIClient(new OpenAI({ baseURL, apiKey: 'x', maxRetries: 0 }) as never)
  const result = await run(new Agent({ name: 'Assistant', instructions: 'Be brief.' }), 'Capital of France?')
  t.is(result.finalOutput, 'The capital of France is **Paris**. 🇫🇷')
  // What its default model settings ask for and gpt-oss cannot do: taken, and said.
  t.deepEqual(notApplied.sort(), ['reasoning.effort', 'text.verbosity'])
})

test('Vercel AI SDK, the default OpenAI provider (Responses): a tool loop whose second step refers to kept items', async (t) => {
  const { engine, prompts } = recordingEngine([CALL, ANSWER])
  const { baseURL } = await gateway(t, engine)
  const openai = createOpenAI({ baseURL, apiKey: 'x' })
  const calls: unknown[] = []
  const result = await generateText({
    model: openai('gpt-oss'),
    prompt: 'Weather in Paris?',
    stopWhen: stepCountIs(3),
    tools: weatherTools(calls),
  })
  t.deepEqual(calls, [{ city: 'Paris' }])
  t.is(result.text, 'It is sunny in Paris.')
  t.is(result.steps.length, 2)
  // The second prompt holds the first step's reasoning and call (sent as item references), then the result.
  const second = decodeTokens(prompts[1]!)
  t.regex(
    second,
    /<\|channel\|>analysis<\|message\|>Need the weather\.<\|end\|>.*to=functions\.get_weather.*\{"city":"Paris"\}<\|call\|>.*functions\.get_weather to=assistant.*\{"sky":"clear"\}/s,
  )
  // Token for token, by default: the first prompt, the ids the engine generated (its call header written otherwise
  // than a re-render writes it), then the result. The provider sends the call whole, its arguments re-serialised.
  const [first, next] = prompts as [number[], number[]]
  t.deepEqual(next.slice(0, first.length + CALL.length), [...first, ...CALL])
  t.regex(decodeTokens(next.slice(first.length + CALL.length)), /^<\|start\|>functions\.get_weather to=assistant/)
})

test('Vercel AI SDK, the Anthropic provider (Messages): a tool loop, streamed, with the reasoning as reasoningText', async (t) => {
  const { engine, prompts } = recordingEngine([CALL, ANSWER])
  const { baseURL, notApplied } = await gateway(t, engine)
  const anthropic = createAnthropic({ baseURL, apiKey: 'x' })
  const calls: unknown[] = []
  const result = streamText({
    model: anthropic('claude-sonnet-4-5'),
    prompt: 'Weather in Paris?',
    stopWhen: stepCountIs(3),
    tools: weatherTools(calls),
  })
  t.is(await result.text, 'It is sunny in Paris.')
  t.deepEqual(calls, [{ city: 'Paris' }])
  t.is(await result.reasoningText, 'It is clear.')
  t.is((await result.steps).length, 2)
  // The second prompt: the first step's thinking and call sent back, then the result.
  t.regex(
    decodeTokens(prompts[1]!),
    /<\|channel\|>analysis<\|message\|>Need the weather\.<\|end\|>.*to=functions\.get_weather.*\{"city":"Paris"\}<\|call\|>.*functions\.get_weather to=assistant.*\{"sky":"clear"\}/s,
  )
  t.deepEqual(notApplied, [])
})

for (const [how, gatewayOptions, providerOptions] of [
  ['the gateway gives summaries always', { reasoningSummary: 'always' }, {}],
  ['the request asks for a summary', {}, { openai: { forceReasoning: true, reasoningSummary: 'auto' } }],
] as const) {
  test(`Vercel AI SDK, the default OpenAI provider: gpt-oss's reasoning reaches reasoningText when ${how}`, async (t) => {
    const { engine } = recordingEngine([ANSWER, ANSWER])
    const { baseURL } = await gateway(t, engine, gatewayOptions)
    const openai = createOpenAI({ baseURL, apiKey: 'x' })
    const whole = await generateText({ model: openai('gpt-oss'), prompt: 'Weather in Paris?', providerOptions })
    t.is(whole.reasoningText, 'It is clear.')
    t.is(whole.text, 'It is sunny in Paris.')
    const streamed = streamText({ model: openai('gpt-oss'), prompt: 'Weather in Paris?', providerOptions })
    t.is(await streamed.reasoningText, 'It is clear.')
    t.is(await streamed.text, 'It is sunny in Paris.')
  })
}

test('Vercel AI SDK, the default OpenAI provider, the gateway with its defaults: no summary asked, none given', async (t) => {
  const { baseURL } = await gateway(t, recordingEngine([ANSWER]).engine)
  const whole = await generateText({ model: createOpenAI({ baseURL, apiKey: 'x' })('gpt-oss'), prompt: 'Weather in Paris?' })
  t.is(whole.text, 'It is sunny in Paris.')
  t.falsy(whole.reasoningText)
})

test('LangChain ChatOpenAI: invoke and stream, on Chat Completions and on the Responses API', async (t) => {
  const [answer] = await exampleReplay()
  const { baseURL, notApplied } = await gateway(t, recordingEngine([answer!, answer!, answer!, answer!]).engine)
  for (const useResponsesApi of [false, true]) {
    const model = new ChatOpenAI({ model: 'gpt-oss', apiKey: 'x', configuration: { baseURL }, useResponsesApi, maxRetries: 0 })
    const invoked = await model.invoke('Capital of France?')
    t.is(invoked.text, 'The capital of France is **Paris**. 🇫🇷', `invoke, responses ${useResponsesApi}`)
    let streamed = ''
    for await (const chunk of await model.stream('Capital of France?')) streamed += chunk.text
    t.is(streamed, 'The capital of France is **Paris**. 🇫🇷', `stream, responses ${useResponsesApi}`)
  }
  t.deepEqual(notApplied, [])
})

test('LangChain ChatOpenAI: withStructuredOutput by function calling (a named tool_choice the gateway holds)', async (t) => {
  const reasoning = harmony('The user wants the city.<|end|><|start|>assistant<|channel|>final<|message|>Paris.<|return|>')
  const args = harmony('{"city":"Paris"}<|call|>')
  const { engine, prompts } = recordingEngine([reasoning, args])
  const { baseURL } = await gateway(t, engine)
  const model = new ChatOpenAI({ model: 'gpt-oss', apiKey: 'x', configuration: { baseURL }, maxRetries: 0 })
  const structured = model.withStructuredOutput(z.object({ city: z.string() }), { name: 'city', method: 'functionCalling' })
  t.deepEqual(await structured.invoke('Which city is the capital of France?'), { city: 'Paris' })
  t.is(prompts.length, 2, 'the model reasoned, then completed the call')
})
