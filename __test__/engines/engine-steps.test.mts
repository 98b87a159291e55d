/**
 * The adapters take what the package's engines give: the README's decode loop, as written
 * (`for await (const tokens of engine.generate(prompt)) chat.push(tokens)`), with every engine (the replay
 * engine, and the vLLM, SGLang and llama.cpp clients against their local stand-ins) on both implementations,
 * for Chat and Responses, objects and SSE: the whole answer arrives, and the finish reason is the engine's
 * (a step's `finishReason: 'length'` makes the completion cut even where its tokens look finished; an
 * explicit `finish({ truncated })` wins). What is not token ids, text or a step is a TypeError naming it.
 */
import test from 'ava'

import {
  type ChatCompletionChunk,
  ChatCompletionsStream,
  type Implementation,
  type ResponseEvent,
  type ResponseObject,
  ResponsesStream,
} from 'harmony-stream'
import { type EngineStep, type GenerateRequest, LlamaCppEngine, ReplayEngine, SglangEngine, VllmEngine } from 'harmony-stream/engines'

import { type FakeEngine, fakeLlamaCpp, fakeSglang, fakeVllm, fakeVllmGenerate } from '../helpers/fake-engines.mjs'
import { harmony, IMPLEMENTATIONS } from '../helpers/harmony.mjs'

const END = 200007
const PROMPT = harmony('<|start|>user<|message|>Weather in Paris?<|end|><|start|>assistant')
const REASONING = 'Need the weather.'
const ANSWER = 'It is sunny in Paris, 24 degrees.'
const ARGUMENTS = '{"city":"Paris"}'
const ANALYSIS = `<|channel|>analysis<|message|>${REASONING}<|end|>`

interface Case {
  name: string
  completion: number[]
  /** The engine's limit (cuts the completion: finish reason `length`). */
  maxTokens?: number
  /** What the client must see. */
  reasoning: string
  content: string
  calls: { name: string; arguments: string }[]
  finishReason: 'stop' | 'tool_calls' | 'length'
}

const answered = harmony(`${ANALYSIS}<|start|>assistant<|channel|>final<|message|>${ANSWER}<|return|>`)
const CASES: Case[] = [
  { name: 'an answer', completion: answered, reasoning: REASONING, content: ANSWER, calls: [], finishReason: 'stop' },
  {
    name: 'a tool call',
    completion: harmony(
      `${ANALYSIS}<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>${ARGUMENTS}<|call|>`,
    ),
    reasoning: REASONING,
    content: '',
    calls: [{ name: 'get_weather', arguments: ARGUMENTS }],
    finishReason: 'tool_calls',
  },
  {
    // Cut right after the analysis's <|end|>: the tokens alone look finished, only the engine knows better.
    name: 'a completion the engine cut after a whole message',
    completion: answered,
    maxTokens: answered.indexOf(END) + 1,
    reasoning: REASONING,
    content: '',
    calls: [],
    finishReason: 'length',
  },
]

interface Engine {
  generate(request: GenerateRequest): AsyncIterable<EngineStep>
}

interface EngineKind {
  name: string
  /** An engine generating `completion`, and how to stop it. */
  start(completion: number[]): Promise<{ engine: Engine; close(): Promise<void> }>
}

function served(start: (behaviour: { completion: number[]; chunk: number }) => Promise<FakeEngine>, client: (url: string) => Engine) {
  return async (completion: number[]) => {
    // Two ids per engine step: steps that end inside a message and steps that cross a message boundary.
    const fake = await start({ completion, chunk: 2 })
    return { engine: client(fake.url), close: () => fake.close() }
  }
}

const ENGINES: EngineKind[] = [
  {
    name: 'replay',
    start: async (completion) => ({ engine: new ReplayEngine({ completions: [completion], interval: 2 }), close: async () => {} }),
  },
  { name: 'vllm', start: served(fakeVllm, (url) => new VllmEngine({ url, model: 'gpt-oss' })) },
  { name: 'vllm generate', start: served(fakeVllmGenerate, (url) => new VllmEngine({ url, api: 'generate' })) },
  { name: 'sglang', start: served(fakeSglang, (url) => new SglangEngine({ url })) },
  { name: 'llamacpp', start: served(fakeLlamaCpp, (url) => new LlamaCppEngine({ url })) },
]

/** What a client assembles from a completion, whichever API and face carried it. */
interface Outcome {
  reasoning: string
  content: string
  calls: { name: string; arguments: string }[]
  finishReason: string | null
  promptTokens: number | undefined
}

function fromChunks(chunks: ChatCompletionChunk[]): Outcome {
  const outcome: Outcome = { reasoning: '', content: '', calls: [], finishReason: null, promptTokens: undefined }
  for (const chunk of chunks) {
    if (chunk.usage) outcome.promptTokens = chunk.usage.prompt_tokens
    const choice = chunk.choices[0]
    if (choice === undefined) continue
    outcome.reasoning += choice.delta.reasoning_content ?? ''
    outcome.content += choice.delta.content ?? ''
    for (const call of choice.delta.tool_calls ?? []) {
      outcome.calls[call.index] ??= { name: call.function.name ?? '', arguments: '' }
      outcome.calls[call.index].arguments += call.function.arguments
    }
    outcome.finishReason = choice.finish_reason ?? outcome.finishReason
  }
  return outcome
}

function fromEvents(events: ResponseEvent[]): Outcome {
  const last = events.at(-1)!
  const response = last.response as ResponseObject
  const outcome: Outcome = { reasoning: '', content: '', calls: [], finishReason: null, promptTokens: response.usage?.input_tokens }
  for (const item of response.output) {
    if (item.type === 'reasoning') outcome.reasoning += item.content.map((part) => part.text).join('')
    else if (item.type === 'message') outcome.content += item.content.map((part) => part.text).join('')
    else if (item.type === 'function_call') outcome.calls.push({ name: item.name, arguments: item.arguments })
  }
  // The streamed deltas carry the same text as the final response.
  const deltas = (type: string) =>
    events
      .filter((e) => e.type === type)
      .map((e) => e.delta)
      .join('')
  if (deltas('response.output_text.delta') !== outcome.content) throw new Error('the output_text deltas differ from the response')
  if (deltas('response.reasoning_text.delta') !== outcome.reasoning) throw new Error('the reasoning deltas differ from the response')
  // Responses has no finish reason: completed is Chat's stop or tool_calls, incomplete its length.
  outcome.finishReason = last.type === 'response.incomplete' ? 'length' : last.type
  return outcome
}

/** SSE frames back into what they carry (`data: JSON` per frame). */
function parseFrames<T>(sse: string): T[] {
  return sse
    .split('\n\n')
    .filter((frame) => frame !== '')
    .map((frame) => JSON.parse(frame.slice(frame.indexOf('data: ') + 'data: '.length)) as T)
}

type Face = 'objects' | 'sse'

/** The README's loop, as written, on the adapter's object face or its SSE face. */
async function chatLoop(engine: Engine, prompt: GenerateRequest, implementation: Implementation, face: Face): Promise<Outcome> {
  const chat = new ChatCompletionsStream({ model: 'gpt-oss', includeUsage: true, parser: { implementation } })
  const chunks: ChatCompletionChunk[] = []
  if (face === 'objects') {
    for await (const tokens of engine.generate(prompt)) {
      for (const chunk of chat.push(tokens)) chunks.push(chunk)
    }
    for (const chunk of chat.finish()) chunks.push(chunk)
  } else {
    let sse = ''
    for await (const tokens of engine.generate(prompt)) sse += chat.pushSse(tokens)
    sse += chat.finishSse()
    chunks.push(...parseFrames<ChatCompletionChunk>(sse))
  }
  return fromChunks(chunks)
}

async function responsesLoop(engine: Engine, prompt: GenerateRequest, implementation: Implementation, face: Face): Promise<Outcome> {
  const responses = new ResponsesStream({ model: 'gpt-oss', parser: { implementation } })
  const events: ResponseEvent[] = []
  if (face === 'objects') {
    events.push(...responses.start())
    for await (const tokens of engine.generate(prompt)) events.push(...responses.push(tokens))
    events.push(...responses.finish())
  } else {
    let sse = responses.startSse()
    for await (const tokens of engine.generate(prompt)) sse += responses.pushSse(tokens)
    sse += responses.finishSse()
    events.push(...parseFrames<ResponseEvent>(sse))
  }
  return fromEvents(events)
}

for (const kind of ENGINES) {
  test(`${kind.name}: the README loop gets the whole answer and the engine's finish reason, Chat and Responses, objects and SSE`, async (t) => {
    for (const one of CASES) {
      const { engine, close } = await kind.start(one.completion)
      try {
        const prompt: GenerateRequest = { tokens: PROMPT, ...(one.maxTokens === undefined ? {} : { maxTokens: one.maxTokens }) }
        for (const implementation of IMPLEMENTATIONS) {
          for (const face of ['objects', 'sse'] as const) {
            const where = `${one.name}, ${implementation}, ${face}`
            const chat = await chatLoop(engine, prompt, implementation, face)
            t.deepEqual(
              chat,
              {
                reasoning: one.reasoning,
                content: one.content,
                calls: one.calls,
                finishReason: one.finishReason,
                promptTokens: PROMPT.length,
              },
              `Chat: ${where}`,
            )
            const responses = await responsesLoop(engine, prompt, implementation, face)
            t.deepEqual(
              responses,
              {
                reasoning: one.reasoning,
                content: one.content,
                calls: one.calls,
                finishReason: one.finishReason === 'length' ? 'length' : 'response.completed',
                promptTokens: PROMPT.length,
              },
              `Responses: ${where}`,
            )
          }
        }
      } finally {
        await close()
      }
    }
  })
}

test("an explicit finish({ truncated }) wins over the engine's finish reason; the options say how many prompt tokens", (t) => {
  const cut = answered.slice(0, answered.indexOf(END) + 1)
  const step = { tokens: Uint32Array.from(cut), finishReason: 'length' as const, usage: { promptTokens: 99, completionTokens: cut.length } }
  for (const implementation of IMPLEMENTATIONS) {
    const remembered = new ChatCompletionsStream({ model: 'm', parser: { implementation } })
    remembered.push(step)
    remembered.push({ tokens: [] })
    t.is(remembered.finish().at(-1)?.choices[0]?.finish_reason, 'length', 'a later step without a finish reason keeps it')
    const chat = new ChatCompletionsStream({ model: 'm', parser: { implementation } })
    chat.push(step)
    t.is(chat.finish({ truncated: false }).at(-1)?.choices[0]?.finish_reason, 'stop', implementation)
    t.is(chat.usage().prompt_tokens, 99, 'the engine reported the prompt tokens')
    const responses = new ResponsesStream({ model: 'm', inputTokens: 7, parser: { implementation } })
    responses.pushSse(step)
    t.regex(responses.finishSse({ truncated: false }), /event: response\.completed\n/)
    t.is(responses.response().usage?.input_tokens, 7, 'the option wins over the engine')
    // Without an engine step, tokens that end in a whole message finish as stop: the step is what says length.
    const plain = new ChatCompletionsStream({ model: 'm', parser: { implementation } })
    plain.push(cut)
    t.is(plain.finish().at(-1)?.choices[0]?.finish_reason, 'stop')
  }
})

test('what is not token ids, text or an engine step is a TypeError naming it, on every face', (t) => {
  const bad: [unknown, RegExp][] = [
    [{}, /not an object without 'tokens' \(keys: none\)/],
    [{ token_ids: [1, 2] }, /not an object without 'tokens' \(keys: token_ids\)/],
    [42, /not 42$/],
    [null, /not null$/],
    [undefined, /not undefined$/],
    [true, /not true$/],
    [{ tokens: 'hello' }, /the engine step's tokens must be a Uint32Array or an array of token ids, not "hello"/],
    [{ tokens: null }, /the engine step's tokens must be .*, not null/],
    [{ tokens: [1], finishReason: 'eos' }, /the engine step's finishReason must be "stop", "length" or "abort", not "eos"/],
    [{ tokens: [1], usage: 5 }, /the engine step's usage must be/],
  ]
  const adapters = () => [new ChatCompletionsStream({ model: 'm' }), new ResponsesStream({ model: 'm' })]
  for (const [input, message] of bad) {
    for (const adapter of adapters()) {
      const name = adapter.constructor.name
      t.throws(() => adapter.push(input as never), { instanceOf: TypeError, message }, `${name}.push(${String(input)})`)
      t.throws(() => adapter.pushSse(input as never), { instanceOf: TypeError, message }, `${name}.pushSse(${String(input)})`)
      t.throws(() => adapter.push(input as never), { message: new RegExp(`^${name}\\.push`) }, 'the error names the call')
    }
  }
  // On pushSse's fast lane too (a message is open and its frame is set).
  for (const adapter of adapters()) {
    adapter.pushSse(harmony('<|channel|>final<|message|>Hi'))
    t.throws(() => adapter.pushSse({ toks: [1] } as never), { instanceOf: TypeError, message: /without 'tokens'/ })
    t.not(adapter.pushSse({ tokens: harmony(' there') }), '', 'the adapter still reads steps after refusing one')
  }
  // Steps carry token ids: an adapter reading text refuses them, as it refuses ids.
  for (const adapter of [new ChatCompletionsStream({ model: 'm', input: 'text' }), new ResponsesStream({ model: 'm', input: 'text' })]) {
    t.throws(() => adapter.push({ tokens: [1] }), { instanceOf: TypeError, message: /reads text/ })
  }
})
