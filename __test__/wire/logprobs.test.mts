/**
 * Log probabilities (issue 20 item 4): asked of the engines (vLLM `logprobs` with ids named, SGLang
 * `return_logprob`, llama.cpp `n_probs`), read from each one's stream into `EngineStep.logprobs`, and shown by
 * the adapters for the answer's tokens only (Chat `logprobs.content`, Responses `output_text` logprobs), never
 * for reasoning, headers or special tokens; both faces, both implementations; refused where an engine cannot
 * give them. The stand-ins write the same "model" (`fakeLogprobs`) in each engine's shape.
 */
import test from 'ava'
import { ChatCompletionsStream, chatCompletion, HarmonyRequestError, type Implementation, ResponsesStream, SsePool } from 'harmony-stream'
import { type Engine, type EngineStep, LlamaCppEngine, ReplayEngine, SglangEngine, TrtllmEngine, VllmEngine } from 'harmony-stream/engines'

import { type FakeBehaviour, type FakeEngine, fakeLlamaCpp, fakeLogprobs, fakeSglang, fakeVllm } from '../helpers/fake-engines.mjs'
import { startGateway } from '../helpers/gateway.mjs'
import { harmony, IMPLEMENTATIONS } from '../helpers/harmony.mjs'
import { tokenBytes } from '../helpers/token-bytes.mjs'

const ANALYSIS = '<|channel|>analysis<|message|>Think 🪽 twice.<|end|><|start|>assistant'
const ANSWER = 'Hello 🪽 world, ünïcode.'
const COMPLETION = harmony(`${ANALYSIS}<|channel|>final<|message|>${ANSWER}<|return|>`)

/** The ids of the answer's text: after the final message's `<|message|>`, before its `<|return|>`. */
function answerIds(tokens: readonly number[]): number[] {
  const start = tokens.lastIndexOf(200_008) + 1
  return tokens.slice(start, tokens.lastIndexOf(200_002))
}

async function collect(steps: AsyncIterable<EngineStep>): Promise<EngineStep[]> {
  const all: EngineStep[] = []
  for await (const step of steps) all.push(step)
  return all
}

const ENGINES: {
  name: string
  start: (b: FakeBehaviour) => Promise<FakeEngine>
  client: (url: string) => Engine
  behaviour?: Partial<FakeBehaviour>
}[] = [
  { name: 'vllm', start: fakeVllm, client: (url) => new VllmEngine({ url }) },
  { name: 'sglang (cumulative)', start: fakeSglang, client: (url) => new SglangEngine({ url }) },
  { name: 'sglang (incremental)', start: fakeSglang, client: (url) => new SglangEngine({ url }), behaviour: { incremental: true } },
  { name: 'llamacpp', start: fakeLlamaCpp, client: (url) => new LlamaCppEngine({ url }) },
]

for (const { name, start, client, behaviour } of ENGINES) {
  for (const count of [0, 2]) {
    test(`${name}: each id's log probability and ${count} alternatives, read from the engine's stream as it wrote them`, async (t) => {
      for (const chunk of [1, 3]) {
        const fake = await start({ completion: COMPLETION, chunk, ...behaviour })
        try {
          const steps = await collect(client(fake.url).generate({ tokens: [1, 2], logprobs: count }))
          const tokens = steps.flatMap((step) => [...step.tokens])
          t.deepEqual(tokens, COMPLETION)
          const logprobs: unknown[] = steps.flatMap((step): unknown[] => step.logprobs ?? Array.from(step.tokens, () => 'absent'))
          t.is(logprobs.length, tokens.length)
          tokens.forEach((id, i) => {
            const entry = logprobs[i]
            // A stop id the engine named but did not send is appended by the client, without a probability.
            if (entry === null && i === tokens.length - 1) return
            t.deepEqual(entry, fakeLogprobs(id, i, count), `${name} chunk ${chunk}: id ${id} at ${i}`)
          })
        } finally {
          await fake.close()
        }
      }
    })
  }
}

test('each engine is asked in its own fields', async (t) => {
  const asked = async (start: (b: FakeBehaviour) => Promise<FakeEngine>, make: (url: string) => Engine) => {
    const fake = await start({ completion: [200_002] })
    try {
      await collect(make(fake.url).generate({ tokens: [1], logprobs: 0 }))
      return fake.bodies[0]!
    } finally {
      await fake.close()
    }
  }
  const vllm = await asked(fakeVllm, (url) => new VllmEngine({ url }))
  t.like(vllm, { logprobs: 0, return_tokens_as_token_ids: true })
  const sglang = await asked(fakeSglang, (url) => new SglangEngine({ url }))
  t.like(sglang, { return_logprob: true, top_logprobs_num: 0, logprob_start_len: -1 })
  // n_probs 0 would send no probability at all.
  t.like(await asked(fakeLlamaCpp, (url) => new LlamaCppEngine({ url })), { n_probs: 1 })
})

test('engines that cannot give log probabilities refuse them before any request, naming the field', (t) => {
  const engines: Engine[] = [
    new ReplayEngine({ completions: [COMPLETION] }),
    new TrtllmEngine({ url: 'http://127.0.0.1:9', model: 'm' }),
    new VllmEngine({ url: 'http://127.0.0.1:9', api: 'generate' }),
  ]
  for (const engine of engines) {
    const error = t.throws(() => engine.generate({ tokens: [1], logprobs: 1 }), { instanceOf: HarmonyRequestError })
    t.is(error?.param, 'logprobs', engine.name)
  }
  t.throws(() => new VllmEngine({ url: 'http://127.0.0.1:9' }).generate({ tokens: [1], logprobs: 21 }), { instanceOf: RangeError })
})

/** Engine steps of COMPLETION, `size` ids each, with the stand-in model's log probabilities. */
function steps(size: number, count = 1): EngineStep[] {
  const out: EngineStep[] = []
  for (let at = 0; at < COMPLETION.length; at += size) {
    const ids = COMPLETION.slice(at, at + size)
    out.push({ tokens: Uint32Array.from(ids), logprobs: ids.map((id, i) => fakeLogprobs(id, at + i, count)) })
  }
  return out
}

/** What OpenAI shows for the answer's tokens, from the stand-in model and the vocabulary's bytes. */
function expected(count = 1) {
  const ids = answerIds(COMPLETION)
  const offset = COMPLETION.lastIndexOf(200_008) + 1
  const entry = (id: number, logprob: number) => {
    const bytes = tokenBytes(id)
    return { token: new TextDecoder().decode(bytes), logprob, bytes: [...bytes] }
  }
  return ids.map((id, i) => {
    const { logprob, top } = fakeLogprobs(id, offset + i, count)
    return { ...entry(id, logprob), top_logprobs: top.map((t) => entry(t.id, t.logprob)) }
  })
}

function sseEvents(bytes: string): Record<string, unknown>[] {
  return bytes
    .split('\n\n')
    .filter((frame) => frame.includes('data: {'))
    .map((frame) => JSON.parse(frame.slice(frame.indexOf('data: ') + 6)))
}

const chatOf = (implementation: Implementation) =>
  new ChatCompletionsStream({ model: 'm', id: 'chatcmpl-lp', created: 1, logprobs: true, parser: { implementation } })
const responsesOf = (implementation: Implementation) =>
  new ResponsesStream({ model: 'm', id: 'resp_lp', createdAt: 1, logprobs: true, parser: { implementation } })

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: Chat shows each answer token's log probability with the text it makes, on both faces`, (t) => {
    for (const size of [1, 2, 5, COMPLETION.length]) {
      const objects = chatOf(implementation)
      const chunks = [...steps(size).flatMap((step) => objects.push(step)), ...objects.finish()]
      const sse = chatOf(implementation)
      const bytes =
        steps(size)
          .map((step) => sse.pushSse(step))
          .join('') + sse.finishSse()
      t.deepEqual(sseEvents(bytes), JSON.parse(JSON.stringify(chunks)), `size ${size}: the SSE face is the object face`)
      const shown = chunks.flatMap((chunk) => chunk.choices[0]?.logprobs?.content ?? [])
      t.deepEqual(shown, expected(), `size ${size}`)
      t.is(Buffer.from(shown.flatMap((e) => e.bytes)).toString(), ANSWER)
      // Logprobs go with the answer's text, and only with it (a token holding part of a character goes with the
      // text its id made: its bytes are exact, its `token` the lossy decoding).
      for (const chunk of chunks) {
        const choice = chunk.choices[0]
        t.is(choice?.logprobs != null, (choice?.delta.content ?? '') !== '', JSON.stringify(chunk))
      }
      const all = steps(size)
      const whole = chatCompletion(
        { tokens: COMPLETION, logprobs: all.flatMap((step) => step.logprobs!) },
        { model: 'm', logprobs: true, parser: { implementation } },
      )
      t.deepEqual(whole.choices[0]!.logprobs, { content: expected(), refusal: null })
    }
  })

  test(`${implementation}: Responses shows them on output_text deltas and parts, on both faces`, (t) => {
    for (const size of [1, 3, COMPLETION.length]) {
      const objects = responsesOf(implementation)
      const events = [...objects.start(), ...steps(size, 3).flatMap((step) => objects.push(step)), ...objects.finish()] as Record<
        string,
        unknown
      >[]
      const sse = responsesOf(implementation)
      const bytes =
        sse.startSse() +
        steps(size, 3)
          .map((step) => sse.pushSse(step))
          .join('') +
        sse.finishSse()
      t.deepEqual(sseEvents(bytes), JSON.parse(JSON.stringify(events)), `size ${size}`)
      const deltas = events.filter((e) => e.type === 'response.output_text.delta').flatMap((e) => e.logprobs as unknown[])
      t.deepEqual(deltas, expected(3))
      const done = events.find((e) => e.type === 'response.output_text.done') as { logprobs: unknown[] }
      t.deepEqual(done.logprobs, expected(3))
      const completed = events.find((e) => e.type === 'response.completed') as {
        response: { output: { type: string; content?: { logprobs: unknown[] }[] }[] }
      }
      t.deepEqual(completed.response.output.find((item) => item.type === 'message')!.content![0]!.logprobs, expected(3))
    }
  })

  test(`${implementation}: answer tokens pushed without log probabilities are counted in a logprobs-missing diagnostic`, (t) => {
    const chat = chatOf(implementation)
    const [first, ...rest] = steps(4)
    chat.push(first!)
    for (const step of rest) chat.push({ tokens: step.tokens })
    chat.finish()
    const missing = chat.diagnostics.filter((d) => d.code === 'logprobs-missing')
    t.is(missing.length, 1)
    t.regex(missing[0]!.message, new RegExp(`^${answerIds(COMPLETION).length} token`))
  })
}

test('without the option nothing changes; the option is checked and refused where it cannot hold', (t) => {
  const chat = new ChatCompletionsStream({ model: 'm' })
  const chunks = [...steps(3).flatMap((step) => chat.push(step)), ...chat.finish()]
  t.true(chunks.every((chunk) => chunk.choices.every((choice) => choice.logprobs === null)))
  t.throws(() => new ChatCompletionsStream({ model: 'm', logprobs: 'yes' as never }), { instanceOf: TypeError, message: /logprobs/ })
  t.throws(() => new ChatCompletionsStream({ model: 'm', logprobs: true, stop: 'x' }), { instanceOf: TypeError, message: /stop/ })
  t.throws(() => new ResponsesStream({ model: 'm', logprobs: true, input: 'text' }), { instanceOf: TypeError, message: /input/ })
  t.throws(() => new SsePool().add(new ChatCompletionsStream({ model: 'm', logprobs: true })), {
    instanceOf: TypeError,
    message: /logprobs/,
  })
  t.throws(() => chatOf('js').push({ tokens: [1, 2], logprobs: [null] }), { instanceOf: TypeError, message: /logprobs/ })
  const bad = chatOf('js')
  bad.push(harmony('<|channel|>final<|message|>'))
  t.throws(() => bad.push({ tokens: [13225], logprobs: [{ logprob: 'high' } as never] }), {
    instanceOf: TypeError,
    message: /logprobs\[0\]/,
  })
})

test('through the gateway: the openai client gets logprobs from a vLLM stand-in, Chat and Responses, streamed and not', async (t) => {
  const fake = await fakeVllm({ completion: COMPLETION, chunk: 2 })
  t.teardown(() => fake.close())
  const { client } = await startGateway(t, { engine: new VllmEngine({ url: fake.url }) })
  const messages = [{ role: 'user' as const, content: 'Hi' }]
  const whole = await client.chat.completions.create({ model: 'gpt-oss', messages, logprobs: true, top_logprobs: 2 })
  const content = whole.choices[0]!.logprobs!.content!
  // Tokens that hold part of a character read as U+FFFD; their bytes are exact.
  const text = (entries: { bytes: number[] | null }[]) => Buffer.from(entries.flatMap((e) => e.bytes ?? [])).toString()
  t.is(text(content), ANSWER)
  t.true(
    content
      .map((e) => e.token)
      .join('')
      .includes('\uFFFD'),
  )
  t.true(content.every((e) => e.top_logprobs.length === 2))
  const stream = await client.chat.completions.create({ model: 'gpt-oss', messages, logprobs: true, stream: true })
  const streamed: { bytes: number[] | null }[] = []
  for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []))
  t.is(text(streamed), ANSWER)
  // `top_logprobs` is OpenAI's Responses field, which the pinned openai types do not list yet.
  const asked = { model: 'gpt-oss', input: 'Hi', include: ['message.output_text.logprobs' as const], top_logprobs: 1 }
  const response = await client.responses.create(asked)
  const part = response.output.flatMap((item) => (item.type === 'message' ? item.content : []))[0] as { logprobs: { bytes: number[] }[] }
  t.is(text(part.logprobs), ANSWER)
  t.is(fake.bodies.length, 3)
  t.like(fake.bodies[0], { logprobs: 2, return_tokens_as_token_ids: true })
})

test('through the gateway: what cannot be given is a 400 naming the field', async (t) => {
  const { client } = await startGateway(t, { replay: [COMPLETION] })
  const messages = [{ role: 'user' as const, content: 'Hi' }]
  const param = async (request: Promise<unknown>) => ((await t.throwsAsync(request)) as unknown as { param: string }).param
  t.is(await param(client.chat.completions.create({ model: 'gpt-oss', messages, logprobs: true })), 'logprobs')
  t.is(await param(client.chat.completions.create({ model: 'gpt-oss', messages, top_logprobs: 2 })), 'top_logprobs')
  t.is(await param(client.chat.completions.create({ model: 'gpt-oss', messages, logprobs: true, top_logprobs: 21 })), 'top_logprobs')
  t.is(await param(client.chat.completions.create({ model: 'gpt-oss', messages, logprobs: true, stop: 'x' })), 'logprobs')
  t.is(await param(client.responses.create({ model: 'gpt-oss', input: 'Hi', include: ['file_search_call.results'] })), 'include[0]')
  // top_logprobs alone asks for nothing (OpenAI returns logprobs only when include asks): taken, and echoed.
  const alone = { model: 'gpt-oss', input: 'Hi', top_logprobs: 3 }
  const response = await client.responses.create(alone)
  t.is((response as unknown as { top_logprobs: number }).top_logprobs, 3)
})

test('an alternative that is no id of the model is left out, not passed on to the adapters', async (t) => {
  // A llama.cpp that names an id past the vocabulary as the likeliest alternative.
  const completion = harmony('<|channel|>final<|message|>Hi<|return|>')
  const fake = await fakeLlamaCpp({ completion, badAlternative: true })
  t.teardown(() => fake.close())
  const engine = new LlamaCppEngine({ url: fake.url })
  const steps = await collect(engine.generate({ tokens: [1], logprobs: 3 }))
  const entries = steps.flatMap((step) => step.logprobs ?? []).filter((entry) => entry !== null)
  t.true(entries.length > 0)
  for (const entry of entries) t.true(entry!.top.every((candidate) => candidate.id >= 0 && candidate.id <= 201_087))
  // The good alternatives are all there (the stand-in's own, for 3 asked).
  t.deepEqual(entries[0]!.top, fakeLogprobs(completion[0]!, 0, 3).top)
})
