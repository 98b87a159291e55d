/**
 * `n` on Chat Completions (issue 47): n choices of one rendered prompt, each a generation of its own read by an
 * adapter of its own, through the real `openai` client: streamed (chunks of both choices interleaved, each with its
 * `index`, one finish reason per choice, one usage chunk summed: the prompt once, the completions added, as vLLM's
 * serving_chat.py counts) and whole (`choices` in index order). Bad values are a 400 naming `n`; a choice that
 * fails ends the stream with the Chat error and stops the others; seeds, stop strings, structured outputs and
 * tool calls (with the exact prompt of whichever choice the client goes on with) hold per choice.
 */
import { once } from 'node:events'
import { createServer } from 'node:http'
import { type AddressInfo, connect } from 'node:net'

import test, { type ExecutionContext } from 'ava'
import { ChatCompletionsStream, renderChatCompletionRequest } from 'harmony-stream'
import { type Engine, EngineError, type EngineStep, type GenerateRequest, ReplayEngine } from 'harmony-stream/engines'
import { createGateway } from 'harmony-stream/server'
import OpenAI from 'openai'
import { type PipeSseResult, pipeChoicesSse } from '../../src/http/sse.ts'
import { recordingEngine, startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { untilStalled } from '../helpers/stall.mjs'
import { decodeTokens } from '../helpers/token-bytes.mjs'
import { until } from '../helpers/until.mjs'

const final = (text: string) =>
  harmony(`<|channel|>analysis<|message|>Thinking.<|end|><|start|>assistant<|channel|>final<|message|>${text}<|return|>`)
const ONE = final('The first answer, with some words in it.')
const TWO = final('A second, other answer.')
const USER = { role: 'user' as const, content: 'Say something.' }

/** A gateway over `engine` (the replay engine of `completions` when given numbers), its diagnostics and errors kept. */
async function gateway(t: ExecutionContext, engine: Engine | number[][], options: Record<string, unknown> = {}) {
  const recording = Array.isArray(engine) ? recordingEngine(engine) : { engine, prompts: [] as number[][] }
  const diagnostics: { code: string; message: string }[] = []
  const errors: unknown[] = []
  const started = await startGateway(t, {
    engine: recording.engine,
    renderOptions: { currentDate: null },
    onDiagnostic: (d: { code: string; message: string }) => diagnostics.push(d),
    onError: (e: unknown) => errors.push(e),
    ...options,
  })
  return { ...started, prompts: recording.prompts, diagnostics, errors }
}

/** The generate requests an engine was given, in order, beside what it serves (the replay engine's). */
function requestsOf(completions: number[][]): { engine: Engine; requests: GenerateRequest[] } {
  const { engine } = recordingEngine(completions)
  const requests: GenerateRequest[] = []
  return {
    requests,
    engine: {
      name: 'replay',
      generate: (request: GenerateRequest) => {
        requests.push(request)
        return engine.generate(request)
      },
    },
  }
}

test('streamed, the openai client gets both choices whole, their chunks interleaved, one usage chunk summed', async (t) => {
  const { client, prompts } = await gateway(t, [ONE, TWO])
  const stream = await client.chat.completions.create({
    model: 'gpt-oss',
    messages: [USER],
    n: 2,
    stream: true,
    stream_options: { include_usage: true },
  })
  const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = []
  for await (const chunk of stream) chunks.push(chunk)
  // The prompt was rendered once, and both generations were given it.
  t.is(prompts.length, 2)
  t.deepEqual(prompts[0], prompts[1])
  const content = ['', '']
  const reasoning = ['', '']
  const finishes: (string | null)[][] = [[], []]
  for (const chunk of chunks.slice(0, -1)) {
    t.is(chunk.choices.length, 1)
    const choice = chunk.choices[0]!
    content[choice.index] += choice.delta.content ?? ''
    reasoning[choice.index] += (choice.delta as { reasoning_content?: string }).reasoning_content ?? ''
    if (choice.finish_reason !== null) finishes[choice.index]!.push(choice.finish_reason)
  }
  t.deepEqual(content, ['The first answer, with some words in it.', 'A second, other answer.'])
  t.deepEqual(reasoning, ['Thinking.', 'Thinking.'])
  t.deepEqual(finishes, [['stop'], ['stop']], 'one finish reason per choice')
  // One id for the whole answer, as OpenAI's.
  t.is(new Set(chunks.map((c) => c.id)).size, 1)
  // Neither choice waited for the other: the second's first chunk came before the first's last.
  const indexes = chunks.slice(0, -1).map((c) => c.choices[0]!.index)
  t.true(indexes.indexOf(1) < indexes.lastIndexOf(0), indexes.join(''))
  // The one usage chunk, last: the prompt once, what each choice generated added.
  const usage = chunks.at(-1)!
  t.deepEqual(usage.choices, [])
  t.is(usage.usage?.prompt_tokens, prompts[0]!.length)
  t.is(usage.usage?.completion_tokens, ONE.length + TWO.length)
  t.is(usage.usage?.total_tokens, prompts[0]!.length + ONE.length + TWO.length)
  t.is(usage.usage?.completion_tokens_details?.reasoning_tokens, 2 * harmony('<|channel|>analysis<|message|>Thinking.<|end|>').length)
  t.is(chunks.filter((c) => c.usage !== null && c.usage !== undefined).length, 1)
})

test("the openai client's stream helper assembles both choices by their index", async (t) => {
  const { client } = await gateway(t, [ONE, TWO])
  const runner = client.chat.completions.stream({ model: 'gpt-oss', messages: [USER], n: 2 })
  const completion = await runner.finalChatCompletion()
  t.deepEqual(
    completion.choices.map((c) => [c.index, c.message.content, c.finish_reason]),
    [
      [0, 'The first answer, with some words in it.', 'stop'],
      [1, 'A second, other answer.', 'stop'],
    ],
  )
})

test('whole, choices in index order and usage summed', async (t) => {
  const { client, prompts } = await gateway(t, [ONE, TWO, ONE])
  const completion = await client.chat.completions.create({ model: 'gpt-oss', messages: [USER], n: 3 })
  t.deepEqual(
    completion.choices.map((c) => [c.index, c.message.content, c.finish_reason]),
    [
      [0, 'The first answer, with some words in it.', 'stop'],
      [1, 'A second, other answer.', 'stop'],
      [2, 'The first answer, with some words in it.', 'stop'],
    ],
  )
  t.is(completion.usage?.prompt_tokens, prompts[0]!.length)
  t.is(completion.usage?.completion_tokens, 2 * ONE.length + TWO.length)
  t.is(completion.usage?.total_tokens, prompts[0]!.length + 2 * ONE.length + TWO.length)
  // n: 1 (and null) is one choice, as before.
  const one = await client.chat.completions.create({ model: 'gpt-oss', messages: [USER], n: null })
  t.is(one.choices.length, 1)
  t.is(one.usage?.completion_tokens, ONE.length)
})

test('a bad n is a 400 naming n, and nothing is generated', async (t) => {
  const { port, prompts } = await gateway(t, [ONE])
  for (const n of [0, 9, -1, 1.5, '2', true, 100]) {
    const answer = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-oss', messages: [USER], n }),
    })
    t.is(answer.status, 400, JSON.stringify(n))
    const { error } = (await answer.json()) as { error: { param: string; message: string } }
    t.is(error.param, 'n')
    t.regex(error.message, /n must be an integer from 1 to 8/)
  }
  t.is(prompts.length, 0)
})

test('a key whose limits could never take n generations is a 400 naming n; within them, each choice is one', async (t) => {
  const keys = [{ key: 'sk-small', name: 'small', limits: { concurrentStreams: 2 } }]
  const { port, prompts } = await gateway(t, [ONE, TWO], { access: { apiKeys: keys } })
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'sk-small', maxRetries: 0 })
  const error = await client.chat.completions.create({ model: 'gpt-oss', messages: [USER], n: 3 }).catch((e: unknown) => e)
  t.true(error instanceof OpenAI.BadRequestError)
  t.is((error as InstanceType<typeof OpenAI.BadRequestError>).param, 'n')
  t.regex((error as Error).message, /2 generations at once/)
  t.is(prompts.length, 0)
  const two = await client.chat.completions.create({ model: 'gpt-oss', messages: [USER], n: 2 })
  t.is(two.choices.length, 2)
})

test('a seed gives each choice its own: seed + index; without one, none is sent', async (t) => {
  const { engine, requests } = requestsOf([ONE, TWO, ONE])
  const { client } = await gateway(t, engine)
  await client.chat.completions.create({ model: 'gpt-oss', messages: [USER], n: 3, seed: 41 })
  t.deepEqual(
    requests.map((r) => r.seed),
    [41, 42, 43],
  )
  requests.length = 0
  await client.chat.completions.create({ model: 'gpt-oss', messages: [USER], n: 2 })
  t.deepEqual(
    requests.map((r) => 'seed' in r),
    [false, false],
  )
})

/**
 * An engine whose first generation fails (after one step, or before any); the others stream until aborted (when
 * the first fails before any step, they send nothing before it does: the engine is slow to start them).
 */
function failingFirst(beforeFirstStep: boolean) {
  let calls = 0
  /** Steps the others were asked for: each one asked for after the first means the one before it was written. */
  let pulls = 0
  const others: { signal: AbortSignal | undefined; closed: boolean }[] = []
  const engine: Engine = {
    name: 'failing',
    generate(request: GenerateRequest): AsyncIterable<EngineStep> {
      if (calls++ === 0)
        return (async function* () {
          if (!beforeFirstStep) {
            yield { tokens: Uint32Array.from(harmony('<|channel|>final<|message|>hello')) }
            // Fails once the other choice's text went out.
            while (pulls < 3) await new Promise((resolve) => setImmediate(resolve))
          }
          throw new EngineError('engine-connection-error', 'the connection to the engine broke', { engine: 'failing' })
        })()
      const other = { signal: request.signal, closed: false }
      others.push(other)
      return (async function* () {
        try {
          while (beforeFirstStep && !request.signal?.aborted) await new Promise((resolve) => setImmediate(resolve))
          yield { tokens: Uint32Array.from(harmony('<|channel|>final<|message|>')) }
          // Streams for as long as it is read and not aborted.
          while (!request.signal?.aborted) {
            pulls++
            await new Promise((resolve) => setImmediate(resolve))
            yield { tokens: Uint32Array.from(harmony(' more')) }
          }
        } finally {
          other.closed = true
        }
      })()
    },
  }
  return { engine, others }
}

test('a choice that fails mid-stream ends the stream with the Chat error frame, and the other generation stops', async (t) => {
  const { engine, others } = failingFirst(false)
  const { client, errors } = await gateway(t, engine)
  const stream = await client.chat.completions.create({ model: 'gpt-oss', messages: [USER], n: 2, stream: true })
  const seen: number[] = []
  await t.throwsAsync(
    async () => {
      for await (const chunk of stream) seen.push(chunk.choices[0]!.index)
    },
    { message: /the connection to the inference engine failed/ },
  )
  t.true(seen.includes(0) && seen.includes(1), 'both choices streamed before the failure')
  t.is(others.length, 1)
  // The other generation's engine request was aborted and its steps closed.
  t.true(await until(() => others[0]!.closed))
  t.true(others[0]!.signal?.aborted)
  t.is(errors.length, 1)
  t.regex(String((errors[0] as Error).message), /the connection to the engine broke/)
})

test('a choice that fails before any step is answered with its status; whole, a failure is the answer too', async (t) => {
  const before = failingFirst(true)
  const { client } = await gateway(t, before.engine)
  const error = await client.chat.completions.create({ model: 'gpt-oss', messages: [USER], n: 2, stream: true }).catch((e: unknown) => e)
  t.true(error instanceof OpenAI.APIError)
  t.is((error as InstanceType<typeof OpenAI.APIError>).status, 502)
  t.true(await until(() => before.others[0]!.closed))
  t.true(before.others[0]!.signal?.aborted)
  const whole = failingFirst(false)
  const second = await gateway(t, whole.engine)
  const failure = await second.client.chat.completions.create({ model: 'gpt-oss', messages: [USER], n: 2 }).catch((e: unknown) => e)
  t.is((failure as InstanceType<typeof OpenAI.APIError>).status, 502)
  t.true(await until(() => whole.others[0]!.closed))
  t.true(whole.others[0]!.signal?.aborted)
})

test('a client that leaves mid-stream stops every generation', async (t) => {
  const requests: GenerateRequest[] = []
  let closed = 0
  const endless: Engine = {
    name: 'endless',
    generate(request: GenerateRequest) {
      requests.push(request)
      return (async function* () {
        try {
          yield { tokens: Uint32Array.from(harmony('<|channel|>final<|message|>')) }
          while (!request.signal?.aborted) {
            await new Promise((resolve) => setImmediate(resolve))
            yield { tokens: Uint32Array.from(harmony(' more')) }
          }
        } finally {
          closed++
        }
      })()
    },
  }
  const { client } = await gateway(t, endless)
  const stream = await client.chat.completions.create({ model: 'gpt-oss', messages: [USER], n: 3, stream: true })
  const seen = new Set<number>()
  for await (const chunk of stream) {
    seen.add(chunk.choices[0]!.index)
    if (seen.size === 3) break
  }
  t.true(await until(() => closed === 3))
  t.is(requests.length, 3)
  t.true(requests.every((r) => r.signal?.aborted === true))
})

test('stop strings and structured outputs hold per choice', async (t) => {
  const { client } = await gateway(t, [final('alpha END beta'), final('gamma delta')])
  const stopped = await client.chat.completions.create({ model: 'gpt-oss', messages: [USER], n: 2, stop: 'END' })
  t.deepEqual(
    stopped.choices.map((c) => [c.message.content, c.finish_reason]),
    [
      ['alpha ', 'stop'],
      ['gamma delta', 'stop'],
    ],
  )
  const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false }
  const structured = requestsOf([final('{"city":"Paris"}'), final('{"city":"Rome"}')])
  const second = await gateway(t, structured.engine)
  const stream = second.client.chat.completions.stream({
    model: 'gpt-oss',
    messages: [USER],
    n: 2,
    response_format: { type: 'json_schema', json_schema: { name: 'city', schema, strict: true } },
  })
  const parsed = await stream.finalChatCompletion()
  t.deepEqual(
    parsed.choices.map((c) => JSON.parse(c.message.content!)),
    [{ city: 'Paris' }, { city: 'Rome' }],
  )
  // Each generation was held to the schema by its engine.
  t.is(structured.requests.length, 2)
  t.true(structured.requests.every((r) => r.responseFormat !== undefined))
})

const CALL = (city: string) =>
  harmony(
    `<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "${city}"}<|call|>`,
  )
const TOOLS = [
  {
    type: 'function' as const,
    function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
  },
]

test('tool calls per choice: ids of their own, and the choice the client goes on with is prompted exactly', async (t) => {
  for (const stream of [false, true]) {
    const { client, prompts, diagnostics } = await gateway(t, [CALL('Paris'), CALL('Rome'), final('Sunny in Rome.')])
    const request = { model: 'gpt-oss', messages: [USER], tools: TOOLS, n: 2 }
    const completion = stream
      ? await client.chat.completions.stream(request).finalChatCompletion()
      : await client.chat.completions.create(request)
    const calls = completion.choices.map((c) => c.message.tool_calls?.[0] as OpenAI.Chat.Completions.ChatCompletionMessageFunctionToolCall)
    t.deepEqual(
      completion.choices.map((c) => c.finish_reason),
      ['tool_calls', 'tool_calls'],
    )
    t.deepEqual(
      calls.map((c) => c.function.arguments),
      ['{"city": "Paris"}', '{"city": "Rome"}'],
    )
    t.not(calls[0]!.id, calls[1]!.id, 'two choices, two call ids')
    // The client goes on with the second choice, its reasoning left out (as Chat clients do; openai-node's stream
    // helper keeps only the last delta of a field it does not know).
    const { reasoning_content: _left, ...assistant } = JSON.parse(JSON.stringify(completion.choices[1]!.message)) as Record<string, unknown>
    const messages = [USER, assistant, { role: 'tool', tool_call_id: calls[1]!.id, content: 'sunny' }]
    const next = await client.chat.completions.create({ model: 'gpt-oss', messages, tools: TOOLS } as never)
    t.is(next.choices[0]!.message.content, 'Sunny in Rome.')
    const render = (history: unknown[]) =>
      Array.from(renderChatCompletionRequest({ model: 'gpt-oss', messages: history, tools: TOOLS } as never, { currentDate: null }).tokens)
    const tail = render(messages).slice(render(messages.slice(0, -1)).length - 2)
    t.deepEqual(prompts[2], [...prompts[0]!, ...CALL('Rome'), ...tail], `stream: ${stream}: the ids the second choice generated`)
    t.deepEqual(diagnostics, [])
  }
})

test('n read in a render worker (a body past renderInlineBytes is parsed and rendered there)', async (t) => {
  const { engine, prompts } = recordingEngine([ONE, TWO])
  const server = createGateway({ engine, onDiagnostic: () => {}, http: { renderWorkers: 1, renderInlineBytes: 1 } } as never)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: 'x', maxRetries: 0 })
  const completion = await client.chat.completions.create({ model: 'gpt-oss', messages: [USER], n: 2 })
  t.is(completion.choices.length, 2)
  t.is(prompts.length, 2)
})

test('pipeChoicesSse: a client that stops reading stops every choice being pulled; a disconnect aborts them all', async (t) => {
  const pulled = [0, 0]
  let ended = 0
  const abort = new AbortController()
  let result: PipeSseResult | null = null
  const endless = async function* (choice: number) {
    try {
      for (;;) {
        pulled[choice]!++
        await new Promise((resolve) => setImmediate(resolve))
        // Long content tokens: lots of bytes per step.
        yield { tokens: Array.from({ length: 64 }, () => 13225) }
      }
    } finally {
      ended++
    }
  }
  const server = createServer(async (_request, response) => {
    const choices = [0, 1].map((index) => {
      // The prompt ended in a final channel message, so every token is content.
      const adapter = new ChatCompletionsStream({ model: 'm', choiceIndex: index, parser: { implementation: 'js' } })
      adapter.push(harmony('<|channel|>final<|message|>'))
      return { adapter, steps: endless(index) }
    })
    result = await pipeChoicesSse(response, choices, { abort })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => {
    server.closeAllConnections()
    server.close()
  })
  const socket = connect((server.address() as AddressInfo).port, '127.0.0.1')
  await once(socket, 'connect')
  socket.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n')
  socket.pause() // never reads: the kernel buffers fill, then write() returns false
  const total = () => pulled[0]! + pulled[1]!
  const stalled = await untilStalled(total, 2)
  t.true(total() - stalled <= 2, `no steps pulled while the client does not read (${stalled} then ${total()})`)
  t.true(stalled < 30_000, `bounded: ${stalled} steps before the buffers filled`)
  // Both choices were read, not one after the other.
  t.true(pulled[0]! > 1 && pulled[1]! > 1, pulled.join(' and '))
  socket.destroy()
  t.true(await until(() => ended === 2))
  t.true(abort.signal.aborted, 'the engine requests are aborted')
  t.true(await until(() => result !== null))
  t.is(result!.outcome, 'client-closed')
})

test('several engines: the choices go where requests go (one engine for a prompt_cache_key, else spread by load)', async (t) => {
  const served: string[] = []
  const member = (name: string): Engine => {
    const { engine } = recordingEngine([ONE])
    return {
      name,
      generate(request: GenerateRequest) {
        served.push(name)
        return engine.generate(request)
      },
    }
  }
  // `engines` in place of the one engine the helper gives.
  const { client } = await gateway(t, [ONE], { engines: [member('a'), member('b')], engine: undefined })
  await client.chat.completions.create({ model: 'gpt-oss', messages: [USER], n: 4, prompt_cache_key: 'conversation-1' })
  t.is(served.length, 4)
  t.is(new Set(served).size, 1, `one engine for the key: ${served.join(' ')}`)
  served.length = 0
  // A prompt whose prefix no engine holds, without a key.
  await client.chat.completions.create({ model: 'gpt-oss', messages: [{ role: 'user', content: 'Something else.' }], n: 4 })
  t.deepEqual([...served].sort(), ['a', 'a', 'b', 'b'], 'spread by load')
})

test('a required call (tool_choice) is held per choice: each reasons, then completes its own call', async (t) => {
  // The model's reasoning (it would answer, were it let), or, after the call's header, the call's arguments.
  const completions = [
    harmony('Need the weather.<|end|><|start|>assistant<|channel|>final<|message|>Sunny.<|return|>'),
    harmony('{"city":"Paris"}<|call|>'),
  ]
  const prompts: string[] = []
  const replay = new ReplayEngine({
    completions,
    pick: (request) => {
      const prompt = decodeTokens(Array.from(request.tokens))
      prompts.push(prompt)
      return prompt.endsWith('<|constrain|>json<|message|>') ? 1 : 0
    },
  })
  const { client } = await gateway(t, replay)
  const completion = await client.chat.completions
    .stream({
      model: 'gpt-oss',
      messages: [USER],
      tools: TOOLS,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      n: 2,
    })
    .finalChatCompletion()
  t.deepEqual(
    completion.choices.map((c) => [
      c.finish_reason,
      (c.message.tool_calls?.[0] as { function?: { arguments: string } })?.function?.arguments,
    ]),
    [
      ['tool_calls', '{"city":"Paris"}'],
      ['tool_calls', '{"city":"Paris"}'],
    ],
  )
  // Two engine requests per choice: the reasoning, then the call from its header.
  t.is(prompts.length, 4)
  t.is(prompts.filter((p) => p.endsWith('<|constrain|>json<|message|>')).length, 2)
})
