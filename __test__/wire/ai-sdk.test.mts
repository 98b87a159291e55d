/**
 * harmony-stream/ai-sdk (issue 22) with the real `ai` package (6.x, the line that runs on Node 20):
 * `generateText`, `streamText`, a multi-step tool loop whose second step is rendered the Harmony way, structured
 * output, abort, errors as the SDK's own, diagnostics never lost; on both parser implementations, against the
 * replay engine and stand-ins that fail.
 */
import {
  APICallError,
  InvalidArgumentError,
  InvalidPromptError,
  type LanguageModelV3StreamPart,
  NoSuchModelError,
  UnsupportedFunctionalityError,
} from '@ai-sdk/provider'
import { generateText, jsonSchema, Output, stepCountIs, streamText, tool } from 'ai'
import test from 'ava'
import { renderChatCompletionRequest } from 'harmony-stream'
import { createHarmony } from 'harmony-stream/ai-sdk'
import { type Engine, EngineError, type GenerateRequest, ReplayEngine } from 'harmony-stream/engines'
import type { JSONSchema7 } from 'json-schema'

import { failingEngine, recordingEngine } from '../helpers/gateway.mjs'
import { harmony, IMPLEMENTATIONS } from '../helpers/harmony.mjs'
import { until } from '../helpers/until.mjs'

// The SDK logs warnings to the console by default; the tests read them from the results.
;(globalThis as { AI_SDK_LOG_WARNINGS?: boolean }).AI_SDK_LOG_WARNINGS = false

const MODEL = 'gpt-oss'
const ANSWER = harmony(
  '<|channel|>analysis<|message|>Easy one.<|end|><|start|>assistant<|channel|>final<|message|>Paris is the capital. 🇫🇷<|return|>',
)
const CALL = harmony(
  '<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
)
const SUNNY = harmony('<|channel|>final<|message|>It is clear in Paris.<|return|>')
const WEATHER_SCHEMA: JSONSchema7 = {
  type: 'object',
  properties: { city: { type: 'string' } },
  required: ['city'],
  additionalProperties: false,
}

/** The parts of a stream, without what changes between runs (timestamps). */
function stable(parts: readonly LanguageModelV3StreamPart[]): unknown[] {
  return parts.map((part) => (part.type === 'response-metadata' ? { ...part, timestamp: null } : part))
}

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: generateText and streamText read the same completion, at any engine step size`, async (t) => {
    const results = []
    for (const interval of [1, 3, 64]) {
      const provider = createHarmony({ engine: new ReplayEngine({ completions: [ANSWER], interval }), implementation })
      const whole = await generateText({ model: provider(MODEL), prompt: 'Capital of France?' })
      const streamed = streamText({ model: provider(MODEL), prompt: 'Capital of France?' })
      const types = []
      for await (const part of streamed.fullStream) types.push(part.type)
      t.is(await streamed.text, whole.text)
      t.is(await streamed.reasoningText, whole.reasoningText)
      t.deepEqual(
        types.filter((type) => type.endsWith('-start') || type.endsWith('-end')),
        ['reasoning-start', 'reasoning-end', 'text-start', 'text-end'],
      )
      results.push({ text: whole.text, reasoning: whole.reasoningText, finish: whole.finishReason, usage: whole.usage })
    }
    t.deepEqual(results[1], results[0])
    t.deepEqual(results[2], results[0])
    const prompt = renderChatCompletionRequest({ model: MODEL, messages: [{ role: 'user', content: 'Capital of France?' }] })
    t.like(results[0], {
      text: 'Paris is the capital. 🇫🇷',
      reasoning: 'Easy one.',
      finish: 'stop',
      usage: {
        inputTokens: prompt.promptTokens,
        outputTokens: ANSWER.length,
        reasoningTokens: harmony('<|channel|>analysis<|message|>Easy one.<|end|>').length,
      },
    })
  })
}

test('both implementations give the same parts for the same steps', async (t) => {
  const parts = []
  for (const implementation of IMPLEMENTATIONS) {
    const model = createHarmony({ engine: new ReplayEngine({ completions: [CALL], interval: 2 }), implementation })(MODEL)
    const { stream } = await model.doStream({
      prompt: [{ role: 'user', content: [{ type: 'text', text: 'Weather?' }] }],
      tools: [{ type: 'function', name: 'get_weather', inputSchema: WEATHER_SCHEMA }],
      toolChoice: { type: 'auto' },
    })
    const read: LanguageModelV3StreamPart[] = []
    for await (const part of stream as unknown as AsyncIterable<LanguageModelV3StreamPart>) read.push(part)
    // Ids are random per completion: the same name for both.
    parts.push(stable(read).map((part) => JSON.parse(JSON.stringify(part).replaceAll(/"(id|toolCallId)":"[^"]*"/g, '"$1":"x"'))))
  }
  if (parts.length === 2) t.deepEqual(parts[1], parts[0])
  t.true(parts[0]!.some((part) => (part as { type: string }).type === 'tool-input-delta'))
})

test('a multi-step tool loop: the call streams as tool-input parts, runs, and the next step renders call and result the Harmony way', async (t) => {
  const { engine, prompts } = recordingEngine([CALL, SUNNY])
  const provider = createHarmony({ engine })
  const weather = tool({
    description: 'The weather in a city',
    inputSchema: jsonSchema<{ city: string }>(WEATHER_SCHEMA),
    execute: async ({ city }) => ({ city, sky: 'clear' }),
  })
  const streamed = streamText({
    model: provider(MODEL),
    prompt: 'Weather in Paris?',
    tools: { get_weather: weather },
    stopWhen: stepCountIs(3),
  })
  const types: string[] = []
  for await (const part of streamed.fullStream) types.push(part.type)
  t.is(await streamed.text, 'It is clear in Paris.')
  const steps = await streamed.steps
  t.is(steps.length, 2)
  t.is(steps[0]!.finishReason, 'tool-calls')
  t.deepEqual(
    steps[0]!.toolCalls.map((call) => [call.toolName, call.input]),
    [['get_weather', { city: 'Paris' }]],
  )
  t.true(types.indexOf('tool-input-start') < types.indexOf('tool-input-delta'))
  t.true(types.indexOf('tool-input-end') < types.indexOf('tool-call'))
  t.true(types.indexOf('tool-call') < types.indexOf('tool-result'))

  // The second step: the analysis, the call and its result, as the Chat request they stand for renders them.
  const callId = steps[0]!.toolCalls[0]!.toolCallId
  const chat = renderChatCompletionRequest({
    model: MODEL,
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      {
        role: 'assistant',
        content: null,
        reasoning_content: 'Need the weather.',
        tool_calls: [{ id: callId, type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
      },
      { role: 'tool', tool_call_id: callId, content: '{"city":"Paris","sky":"clear"}' },
    ],
    tools: [{ type: 'function', function: { name: 'get_weather', description: 'The weather in a city', parameters: WEATHER_SCHEMA } }],
  })
  t.deepEqual(prompts[1], Array.from(chat.tokens))
  const result = harmony('<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"city":"Paris","sky":"clear"}<|end|>')
  const at = prompts[1]!.findIndex((_, i) => result.every((id, j) => prompts[1]![i + j] === id))
  t.true(at > 0, "the tool's result is a Harmony tool message")
})

test('structured output: the schema reaches the prompt and the engine, and the answer is the object', async (t) => {
  const requests: GenerateRequest[] = []
  const replay = new ReplayEngine({ completions: [harmony('<|channel|>final<|message|>{"city":"Paris"}<|return|>')] })
  const engine: Engine = {
    name: 'recording',
    generate(request) {
      requests.push(request)
      return replay.generate(request)
    },
  }
  const result = await generateText({
    model: createHarmony({ engine })(MODEL),
    prompt: 'Which city?',
    output: Output.object({ schema: jsonSchema<{ city: string }>(WEATHER_SCHEMA), name: 'place' }),
  })
  t.deepEqual(result.output, { city: 'Paris' })
  t.like(requests[0]!.responseFormat, { name: 'place', schema: { required: ['city'] } })
  // The prompt: the schema in the developer message's # Response Formats, as a Chat request renders it.
  const rendered = renderChatCompletionRequest({
    model: MODEL,
    messages: [{ role: 'user', content: 'Which city?' }],
    response_format: { type: 'json_schema', json_schema: { name: 'place', schema: requests[0]!.responseFormat!.schema, strict: true } },
  })
  t.deepEqual(Array.from(requests[0]!.tokens), Array.from(rendered.tokens))
})

test('abort: the signal reaches the engine, which stops generating', async (t) => {
  let stopped = false
  const engine: Engine = {
    name: 'slow',
    async *generate(request) {
      request.signal?.addEventListener('abort', () => {
        stopped = true
      })
      yield { tokens: Uint32Array.from(harmony('<|channel|>final<|message|>')) }
      for (let i = 0; i < 500 && !request.signal?.aborted; i++) {
        await new Promise((resolve) => setTimeout(resolve, 5))
        yield { tokens: Uint32Array.from(harmony(' more')) }
      }
    },
  }
  const abort = new AbortController()
  let aborted = false
  const streamed = streamText({
    model: createHarmony({ engine })(MODEL),
    prompt: 'Go on.',
    abortSignal: abort.signal,
    onAbort: () => void (aborted = true),
  })
  let deltas = 0
  for await (const part of streamed.fullStream) {
    if (part.type === 'text-delta' && ++deltas === 3) abort.abort()
  }
  t.true(stopped)
  t.true(aborted)
})

test('what Harmony cannot take is refused with the SDK’s errors, naming it; what the engine cannot apply is a warning', async (t) => {
  const provider = createHarmony({ engine: new ReplayEngine({ completions: [ANSWER] }) })
  const model = provider(MODEL)
  const weather = tool({ inputSchema: jsonSchema(WEATHER_SCHEMA) })
  // The SDK's errors are recognised by isInstance (the package has an ES module and a CommonJS copy).
  const rejects = async (promise: Promise<unknown>, kind: { isInstance(error: unknown): boolean }) => {
    const error = await t.throwsAsync(promise)
    t.true(kind.isInstance(error), `${error?.name}: ${error?.message}`)
    return error as Error & { argument?: string; functionality?: string }
  }
  t.regex(
    (await rejects(generateText({ model, prompt: 'x', tools: { weather }, toolChoice: 'required' }), UnsupportedFunctionalityError))
      .functionality!,
    /required/,
  )
  await rejects(
    generateText({ model, messages: [{ role: 'user', content: [{ type: 'file', data: new Uint8Array([1]), mediaType: 'image/png' }] }] }),
    UnsupportedFunctionalityError,
  )
  t.is((await rejects(generateText({ model, prompt: 'x', temperature: 5 }), InvalidArgumentError)).argument, 'temperature')
  t.is(
    (await rejects(generateText({ model, prompt: 'x', stopSequences: ['a', 'b', 'c', 'd', 'e'] }), InvalidArgumentError)).argument,
    'stopSequences',
  )
  t.is(
    (await rejects(generateText({ model, prompt: 'x', providerOptions: { harmony: { reasoningEfort: 'high' } } }), InvalidArgumentError))
      .argument,
    'providerOptions.harmony.reasoningEfort',
  )
  await rejects(generateText({ model, messages: [{ role: 'assistant', content: '' }] }), InvalidPromptError)
  const warned = await generateText({ model, prompt: 'x', topK: 5 })
  t.deepEqual(
    warned.warnings?.map((warning) => ('feature' in warning ? warning.feature : warning.type)),
    ['topK'],
  )
  t.throws(() => createHarmony({ engine: new ReplayEngine({ completions: [ANSWER] }), nmae: 'x' } as never), {
    instanceOf: TypeError,
    message: /nmae/,
  })
  t.throws(() => createHarmony({} as never), { instanceOf: TypeError, message: /engine/ })
  t.true(NoSuchModelError.isInstance(t.throws(() => provider.embeddingModel('x'))))
})

test('reasoning effort reaches the system message; an engine failing before its first step is an APICallError, during the stream an error part', async (t) => {
  const { engine, prompts } = recordingEngine([ANSWER])
  await generateText({ model: createHarmony({ engine })(MODEL), prompt: 'x', providerOptions: { harmony: { reasoningEffort: 'high' } } })
  const high = renderChatCompletionRequest({ model: MODEL, messages: [{ role: 'user', content: 'x' }], reasoning_effort: 'high' })
  t.deepEqual(prompts[0], Array.from(high.tokens))

  const overloaded: Engine = {
    name: 'busy',
    // biome-ignore lint/correctness/useYield: it fails before its first step
    async *generate() {
      throw new EngineError('engine-overloaded', 'the engine is busy', { engine: 'busy', status: 503, retryAfter: '2' })
    },
  }
  const error = await t.throwsAsync(generateText({ model: createHarmony({ engine: overloaded })(MODEL), prompt: 'x', maxRetries: 0 }))
  t.true(APICallError.isInstance(error))
  t.like(error, { statusCode: 503, isRetryable: true, responseHeaders: { 'retry-after': '2' } })

  const streamed = streamText({ model: createHarmony({ engine: failingEngine })(MODEL), prompt: 'x', onError: () => {} })
  const types: string[] = []
  for await (const part of streamed.fullStream) types.push(part.type)
  t.true(types.includes('error'))
  t.is(await streamed.finishReason, 'error')
})

test('diagnostics of what the parser recovered are provider metadata, and warnings of a whole result', async (t) => {
  // An analysis message the model did not end with <|end|>: read to the next <|start|>, and said so.
  const completion = harmony('<|channel|>analysis<|message|>Think.<|start|>assistant<|channel|>final<|message|>Hi.<|return|>')
  const provider = createHarmony({ engine: new ReplayEngine({ completions: [completion] }) })
  const whole = await generateText({ model: provider(MODEL), prompt: 'x' })
  const diagnostics = (whole.providerMetadata?.harmony?.diagnostics ?? []) as { code: string }[]
  t.true(diagnostics.length > 0)
  t.true(whole.warnings!.some((warning) => warning.type === 'other' && warning.message.startsWith(diagnostics[0]!.code)))
  const streamed = streamText({ model: provider(MODEL), prompt: 'x' })
  await streamed.consumeStream()
  t.deepEqual((await streamed.providerMetadata)?.harmony?.diagnostics, whole.providerMetadata?.harmony?.diagnostics)
})

test('a stream cancelled while the engine is between steps aborts the engine request at once (no abortSignal given)', async (t) => {
  let waiting = false
  let aborted = false
  const engine: Engine = {
    name: 'stalling',
    async *generate(request) {
      yield { tokens: Uint32Array.from(harmony('<|channel|>final<|message|>Hi')) }
      waiting = true
      // A step that does not come until the request is aborted.
      await new Promise<void>((resolve) => request.signal?.addEventListener('abort', () => resolve()))
      aborted = true
    },
  }
  const { stream } = await createHarmony({ engine })(MODEL).doStream({ prompt: [{ role: 'user', content: [{ type: 'text', text: 'x' }] }] })
  const reader = stream.getReader()
  for (let part = await reader.read(); !part.done; part = await reader.read()) if (part.value.type === 'text-delta') break
  const read = reader.read()
  // The engine is between steps (a read of the stream waits for it), not a fixed time later.
  t.true(await until(() => waiting, 10_000), 'the engine waits for its next step')
  t.false(aborted)
  await reader.cancel()
  await read
  // At once: by the time the cancel is done, whatever the machine's speed (the engine would otherwise wait forever).
  t.true(aborted, 'the engine saw the abort')
})

test('includeRawChunks gives each engine step as a raw part; stopSequences end the answer where they start', async (t) => {
  const provider = createHarmony({ engine: new ReplayEngine({ completions: [ANSWER], interval: 5 }) })
  const streamed = streamText({ model: provider(MODEL), prompt: 'x', includeRawChunks: true })
  const raw: number[] = []
  for await (const part of streamed.fullStream) if (part.type === 'raw') raw.push(...(part.rawValue as { tokens: number[] }).tokens)
  t.deepEqual(raw, ANSWER)
  const stopped = streamText({ model: provider(MODEL), prompt: 'x', stopSequences: ['capital'] })
  t.is(await stopped.text, 'Paris is the ')
  t.is(await stopped.finishReason, 'stop')
  const whole = await generateText({ model: provider(MODEL), prompt: 'x', stopSequences: [' 🇫🇷'] })
  t.is(whole.text, 'Paris is the capital.')
})

test('ai 7’s reasoning option (a key of a V3 model’s call options there) sets Harmony’s level; the provider option wins', async (t) => {
  const { engine, prompts } = recordingEngine([ANSWER, ANSWER, ANSWER, ANSWER])
  const model = createHarmony({ engine })(MODEL)
  const prompt = [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'x' }] }]
  const rendered = (effort: string) =>
    Array.from(renderChatCompletionRequest({ model: MODEL, messages: [{ role: 'user', content: 'x' }], reasoning_effort: effort }).tokens)
  // What ai 7.0.173 hands a V3 model: its call options with `reasoning` beside the others.
  const high = await model.doGenerate({ prompt, reasoning: 'high' } as never)
  t.deepEqual(prompts[0], rendered('high'))
  t.deepEqual(high.warnings, [])
  const none = await model.doGenerate({ prompt, reasoning: 'none' } as never)
  t.deepEqual(prompts[1], rendered('low'))
  t.like(none.warnings[0], { type: 'compatibility', feature: "reasoning: 'none'" })
  const both = await model.doGenerate({ prompt, reasoning: 'high', providerOptions: { harmony: { reasoningEffort: 'low' } } } as never)
  t.deepEqual(prompts[2], rendered('low'))
  t.like(both.warnings[0], { type: 'other' })
  await model.doGenerate({ prompt, reasoning: 'provider-default' } as never)
  t.deepEqual(prompts[3], rendered('medium'))
  const error = await t.throwsAsync(model.doGenerate({ prompt, reasoning: 'bogus' } as never))
  t.true(InvalidArgumentError.isInstance(error))
})
