/**
 * harmony-stream/ai-sdk (issue 22) in front of a real llama-server: the real `ai` package's generateText,
 * streamText and a tool loop, the engine being the bigram model (its `final` chain writes "Hello world" after
 * `<|start|>assistant`; biased towards ` to` and `<|call|>`, its `tool` chain writes a call). The prompt's
 * cached tokens are the server's own count (llama.cpp `timings.cache_n`), the tool's arguments are held to a
 * strict schema by the server's grammar.
 */
import { generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai'
import test from 'ava'
import { renderChatCompletionRequest } from 'harmony-stream'
import { createHarmony } from 'harmony-stream/ai-sdk'
import { type Engine, type GenerateRequest, LlamaCppEngine } from 'harmony-stream/engines'
import type { JSONSchema7 } from 'json-schema'

import { harmony } from '../helpers/harmony.mjs'
import { llamaBuildOrSkip, llamaServerForFile } from '../helpers/llama-server.mjs'

const build = llamaBuildOrSkip()
const real = build ? test.serial : test.skip
const server = llamaServerForFile(test, build)

;(globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false

const TO = 316 // ' to', the first id of the bigram model's `tool` chain
const CHANNEL = 200_005
const CALL = 200_012
const RETURN = 200_002
const WEATHER: JSONSchema7 = {
  type: 'object',
  properties: { city: { enum: ['Paris', 'Rome'] }, days: { enum: [1, 2, 3] } },
  required: ['city', 'days'],
  additionalProperties: false,
}

real('generateText and streamText on a real llama-server: the answer, the usage, and the server’s own cached prompt tokens', async (t) => {
  const harmony = createHarmony({ engine: new LlamaCppEngine({ url: server().url }) })
  const first = await generateText({ model: harmony('bigram'), prompt: 'Say hello.', temperature: 0, maxOutputTokens: 32 })
  t.is(first.text, 'Hello world')
  t.is(first.finishReason, 'stop')
  const prompt = renderChatCompletionRequest({ model: 'bigram', messages: [{ role: 'user', content: 'Say hello.' }] })
  t.is(first.usage.inputTokens, prompt.promptTokens)
  // The same prompt again: the server serves all of it but the last id from its cache.
  const streamed = streamText({ model: harmony('bigram'), prompt: 'Say hello.', temperature: 0, maxOutputTokens: 32 })
  t.is(await streamed.text, 'Hello world')
  const usage = await streamed.usage
  t.is(usage.inputTokenDetails.cacheReadTokens, prompt.promptTokens - 1)
  t.is(usage.outputTokens, first.usage.outputTokens)
})

real('a tool loop on a real llama-server: the strict call is schema-valid, runs, and the next step carries its result', async (t) => {
  const llama = new LlamaCppEngine({ url: server().url })
  const prompts: number[][] = []
  // Biased to call (and never to answer): the loop ends by its step count.
  const calling: Engine = {
    name: 'llamacpp',
    generate: (request: GenerateRequest) => {
      prompts.push(Array.from(request.tokens))
      return llama.generate({ ...request, temperature: 0, logitBias: { [TO]: 10, [CALL]: 5, [CHANNEL]: -100, [RETURN]: -100 } })
    },
  }
  const calls: unknown[] = []
  const result = await generateText({
    model: createHarmony({ engine: calling })('bigram'),
    prompt: 'Weather?',
    tools: {
      get_weather: tool({
        inputSchema: jsonSchema<{ city: string; days: number }>(WEATHER),
        strict: true,
        execute: async (input) => {
          calls.push(input)
          return `sunny in ${input.city}`
        },
      }),
    },
    stopWhen: stepCountIs(2),
    maxOutputTokens: 64,
  })
  t.is(result.steps.length, 2)
  t.is(result.steps[0]!.finishReason, 'tool-calls')
  t.is(calls.length, 2, 'each step called the tool, and it ran')
  // The grammar held the model to the schema (the SDK checked the input against it before running the tool).
  const city = (calls[0] as { city: string }).city
  t.true(['Paris', 'Rome'].includes(city))
  // The second prompt holds the first call's result as a Harmony tool message.
  const message = harmony(`<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>sunny in ${city}<|end|>`)
  t.true(prompts[1]!.some((_, i) => message.every((id, j) => prompts[1]![i + j] === id)))
})
