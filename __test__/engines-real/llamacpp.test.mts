/**
 * LlamaCppEngine against a real llama-server (built by scripts/llama-server().mjs, started by
 * helpers/llama-server().mts) serving a bigram model with gpt-oss's vocabulary: the last prompt id picks what
 * it generates (the model's named chains), so each test knows the ids to expect without hard-coding them.
 *
 * What the server itself answers is the reference: the same request not streamed (`POST /completion`,
 * `stream: false`, `return_tokens: true`) must give the ids the engine streamed.
 */
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'

import test, { type ExecutionContext } from 'ava'
import { encode } from 'gpt-tokenizer/encoding/o200k_base'
import { renderChatCompletionRequest } from 'harmony-stream'
import { EngineError, type EngineStep, type GenerateRequest, LAST_MODEL_TOKEN, LlamaCppEngine } from 'harmony-stream/engines'
import type OpenAI from 'openai'

import { readChatStream, startGateway } from '../helpers/gateway.mjs'
import { type LlamaServer, llamaBuildOrSkip, llamaServerForFile, startLlamaServer } from '../helpers/llama-server.mjs'

const root = join(import.meta.dirname, '..', '..')

const build = llamaBuildOrSkip()
const real = build ? test : test.skip
const realSerial = build ? test.serial : test.skip

const RETURN = 200_002
const CALL = 200_012
const END = 200_007
const ENDOFTEXT = 199_999
const MESSAGE = 200_008

const server = llamaServerForFile(test, build)

/** Some prompt (only its last id matters to the model) ending with `last`. */
const promptEndingWith = (last: number) => [...encode('The model answers:'), last]
const chain = (name: string) => {
  const found = server().model.chains[name]
  if (found === undefined) throw new Error(`the model has no chain '${name}'`)
  return found
}

interface Collected {
  tokens: number[]
  steps: EngineStep[]
  finishReason: EngineStep['finishReason']
  usage: EngineStep['usage']
}

async function collect(steps: AsyncIterable<EngineStep>): Promise<Collected> {
  const all: EngineStep[] = []
  for await (const step of steps) all.push(step)
  const last = all[all.length - 1]
  return { tokens: all.flatMap((s) => Array.from(s.tokens)), steps: all, finishReason: last?.finishReason, usage: last?.usage }
}

/** The same request, not streamed, straight to the server: its ids and stop type are the reference. */
async function unstreamed(request: Omit<GenerateRequest, 'signal' | 'stopTokens'>): Promise<{ tokens: number[]; stopType: string }> {
  const body: Record<string, unknown> = {
    prompt: Array.from(request.tokens),
    n_predict: request.maxTokens ?? -1,
    stream: false,
    return_tokens: true,
    cache_prompt: true,
  }
  if (request.temperature !== undefined) body.temperature = request.temperature
  if (request.topP !== undefined) body.top_p = request.topP
  if (request.seed !== undefined) body.seed = request.seed
  const { status, json } = await server().post('/completion', body)
  if (status !== 200) throw new Error(`llama-server answered ${status}: ${JSON.stringify(json)}`)
  const answer = json as { tokens: number[]; stop_type: string }
  return { tokens: answer.tokens, stopType: answer.stop_type }
}

const engine = () => new LlamaCppEngine({ url: server().url })

/** The text of the `final` chain's message: its ids between `<|message|>` and `<|return|>`, as the server decodes them. */
async function finalAnswerText(): Promise<string> {
  const ids = chain('final').tokens
  const { json } = await server().post('/detokenize', { tokens: ids.slice(ids.indexOf(MESSAGE) + 1, -1) })
  return (json as { content: string }).content
}

/** Waits for every slot of `target` to stop processing, within a bound a loaded machine stays within. */
async function idle(t: ExecutionContext, target: LlamaServer, withinMs = 30_000) {
  const deadline = Date.now() + withinMs
  for (;;) {
    const slots = await target.slots()
    if (slots.every((slot) => slot.is_processing === false)) return slots
    if (Date.now() > deadline) {
      t.fail(`slots still processing after ${withinMs} ms: ${JSON.stringify(slots.map((s) => [s.id, s.is_processing]))}`)
      return slots
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

real("the vocabulary is o200k_harmony's: /tokenize and /detokenize agree with gpt-tokenizer", async (t) => {
  // Ordinary text: the special tokens' text taken out. (llama.cpp makes <|start|>, <|channel|>, <|message|>,
  // <|constrain|> and <|end|> of a gpt-oss vocabulary user-defined tokens, which /tokenize matches in text
  // even with parse_special false; src/llama-vocab.cpp.)
  const ordinary = (text: string) => text.replaceAll('<|', '< |')
  const texts = [
    ordinary(readFileSync(join(root, 'README.md'), 'utf8')),
    ordinary(readFileSync(join(root, 'src', 'engines', 'llamacpp.ts'), 'utf8')),
    "Hello, world! Don't stop: it's 3.14159 o'clock, I'll've 12345678 apples.\n\n\tTabs  and   spaces   \r\n",
    'Grüße aus Köln — naïve café, 東京の天気は晴れ, مرحبا بالعالم, Привет мир, 🪽🦀👩‍👩‍👧‍👦 ok',
    '   leading and trailing   ',
  ]
  for (const text of texts) {
    const { json: tokenized } = await server().post('/tokenize', { content: text, parse_special: false })
    const ids = (tokenized as { tokens: number[] }).tokens
    const expected = encode(text)
    // Compared as one string: a long array that differs is more than ava's diff can print.
    t.is(ids.join(' '), expected.join(' '), `tokenize: ${JSON.stringify(text.slice(0, 40))}…`)
    const { json: detokenized } = await server().post('/detokenize', { tokens: ids })
    t.is((detokenized as { content: string }).content, text)
  }
  const { json: special } = await server().post('/tokenize', { content: '<|start|>assistant<|channel|>final<|message|>Hi<|end|>' })
  t.deepEqual((special as { tokens: number[] }).tokens, [
    200_006,
    ...encode('assistant'),
    200_005,
    ...encode('final'),
    200_008,
    ...encode('Hi'),
    END,
  ])
  const { json: reserved } = await server().post('/detokenize', { tokens: [ENDOFTEXT, 200_018, server().model.vocabSize - 1] })
  t.is((reserved as { content: string }).content, `<|endoftext|><|reserved_200018|><|reserved_${server().model.vocabSize - 1}|>`)
})

real('the model generates its chains (the server, not streamed, greedy)', async (t) => {
  for (const [name, { start, tokens, cycle }] of Object.entries(server().model.chains)) {
    const maxTokens = tokens.length + (cycle ? 2 * cycle.length : 0)
    const answer = await unstreamed({ tokens: promptEndingWith(start), temperature: 0, maxTokens })
    t.deepEqual(answer.tokens, [...tokens, ...(cycle ? [...cycle, ...cycle] : [])], name)
    t.is(answer.stopType, cycle ? 'limit' : 'eos', name)
  }
})

for (const name of ['final', 'end', 'call']) {
  real(`greedy: the streamed ids are the server's own (${name} chain), ending with finish reason 'stop'`, async (t) => {
    const request = { tokens: promptEndingWith(chain(name).start), temperature: 0, maxTokens: 50 }
    const streamed = await collect(engine().generate(request))
    const reference = await unstreamed(request)
    t.deepEqual(streamed.tokens, reference.tokens)
    t.is(streamed.finishReason, 'stop')
    const { cachedPromptTokens, ...counts } = streamed.usage ?? {}
    t.deepEqual(counts, { promptTokens: request.tokens.length, completionTokens: reference.tokens.length })
    t.true(Number.isInteger(cachedPromptTokens), 'timings.cache_n is read from the final result')
  })
}

real('stop ids: <|return|> and <|call|> end the stream; <|end|> does not', async (t) => {
  const ends = async (name: string) => await collect(engine().generate({ tokens: promptEndingWith(chain(name).start), temperature: 0 }))
  const final = await ends('final')
  t.is(final.tokens.at(-1), RETURN)
  t.is(final.finishReason, 'stop')
  const call = await ends('call')
  t.is(call.tokens.at(-1), CALL)
  t.is(call.finishReason, 'stop')
  const end = await ends('end')
  const at = end.tokens.indexOf(END)
  t.true(at >= 0 && at < end.tokens.length - 1, 'ids follow <|end|>')
  t.deepEqual(end.tokens, chain('end').tokens)
  t.is(end.finishReason, 'stop')
})

realSerial('a stop id of the request that llama.cpp does not stop at: the client ends there, and the slot is freed', async (t) => {
  const { start, cycle } = chain('walk')
  const stopAt = cycle![5]
  const streamed = await collect(engine().generate({ tokens: promptEndingWith(start), temperature: 0, stopTokens: [stopAt] }))
  t.deepEqual(streamed.tokens, server().model.greedy(start, 6))
  t.is(streamed.finishReason, 'stop')
  // Closing the connection is what stops llama.cpp: the walk would otherwise run to the end of the context.
  await idle(t, server())
})

real("seeded sampling: the streamed ids are the server's own for the same seed", async (t) => {
  const { start, cycle } = chain('walk')
  const greedy = server().model.greedy(start, 60)
  let offGreedy = 0
  for (const seed of [1, 2, 3, 42]) {
    const request = { tokens: promptEndingWith(start), temperature: 1, topP: 1, seed, maxTokens: 60 }
    const streamed = await collect(engine().generate(request))
    const reference = await unstreamed(request)
    t.deepEqual(streamed.tokens, reference.tokens, `seed ${seed}`)
    t.is(streamed.finishReason, 'length')
    // Each step is one of the model's edges, and the walk is sampled, not greedy.
    streamed.tokens.forEach((id, i) => {
      const from = i === 0 ? start : streamed.tokens[i - 1]
      t.true(
        server()
          .model.successors(from)
          .some(([next]) => next === id),
        `seed ${seed}: step ${i}`,
      )
    })
    t.true(streamed.tokens.every((id) => cycle!.includes(id)))
    if (streamed.tokens.join() !== greedy.join()) offGreedy++
  }
  t.true(offGreedy > 0, 'some seed leaves the greedy path')
})

real("logit bias: a banned successor is never sampled, and the streamed ids are the server's own for the same bias", async (t) => {
  const { cycle } = chain('walk')
  // Greedy after cycle[0] is cycle[1]; with cycle[1] banned, the model's other edge (cycle[5]) wins.
  const request = { tokens: promptEndingWith(cycle![0]), temperature: 0, maxTokens: 3, logitBias: { [cycle![1]]: -100 } }
  const streamed = await collect(engine().generate(request))
  t.is(streamed.tokens[0], cycle![5])
  t.false(streamed.tokens.includes(cycle![1]))
  const { json } = await server().post('/completion', {
    prompt: request.tokens,
    n_predict: 3,
    temperature: 0,
    stream: false,
    return_tokens: true,
    logit_bias: [[cycle![1], -100]],
  })
  t.deepEqual(streamed.tokens, (json as { tokens: number[] }).tokens)
  // Penalties are taken by the server (the bigram chains are too short for them to change a greedy walk).
  const penalised = await collect(engine().generate({ ...request, logitBias: undefined, presencePenalty: 0.5, frequencyPenalty: 0.5 }))
  t.is(penalised.tokens.length, 3)
})

real("max tokens: exactly that many ids, finish reason 'length'", async (t) => {
  const { start } = chain('walk')
  const streamed = await collect(engine().generate({ tokens: promptEndingWith(start), temperature: 0, maxTokens: 300 }))
  t.deepEqual(streamed.tokens, server().model.greedy(start, 300))
  t.is(streamed.finishReason, 'length')
  t.is(streamed.usage?.completionTokens, 300)
})

real("no max tokens: generation runs to the end of the slot's context, finish reason 'length'", async (t) => {
  const { start } = chain('walk')
  const prompt = promptEndingWith(start)
  const streamed = await collect(engine().generate({ tokens: prompt, temperature: 0 }))
  t.is(streamed.finishReason, 'length')
  t.true(streamed.tokens.length > server().slotContext / 2, `${streamed.tokens.length} ids`)
  t.true(prompt.length + streamed.tokens.length <= server().slotContext)
  t.deepEqual(streamed.tokens, server().model.greedy(start, streamed.tokens.length))
})

realSerial('8 parallel streams: each gets the ids the server gives it alone', async (t) => {
  const { start } = chain('walk')
  const requests = Array.from({ length: 8 }, (_, i) => ({ tokens: promptEndingWith(start), temperature: 1, seed: 100 + i, maxTokens: 120 }))
  const started = Date.now()
  const streamed = await Promise.all(requests.map((request) => collect(engine().generate(request))))
  const ms = Date.now() - started
  for (const [i, request] of requests.entries()) {
    t.deepEqual(streamed[i].tokens, (await unstreamed(request)).tokens, `stream ${i}`)
    t.is(streamed[i].finishReason, 'length')
  }
  t.log(`8 streams of 120 ids in ${ms} ms`)
  await idle(t, server())
})

real('errors: a prompt longer than the slot context is an EngineError with the server status', async (t) => {
  const tooLong = Array.from({ length: server().slotContext + 10 }, (_, i) => encode(' hello')[0] + (i % 2))
  const error = await t.throwsAsync(collect(engine().generate({ tokens: tooLong, maxTokens: 5 })), { instanceOf: EngineError })
  t.is(error?.code, 'engine-http-error')
  t.is(error?.status, 400)
  t.regex(error?.engineMessage ?? '', /context/i)
})

real('errors: an id past the vocabulary is refused before it is sent, as the server itself refuses it', async (t) => {
  const past = server().model.vocabSize
  t.is(past, LAST_MODEL_TOKEN + 1, "the client's last id is the model's")
  t.throws(() => engine().generate({ tokens: [...encode('hi'), past] }), { instanceOf: RangeError, message: /201088/ })
  // The server's own answer to it, straight: a 400.
  const { status } = await server().post('/completion', { prompt: [...encode('hi'), past], n_predict: 1 })
  t.is(status, 400)
  // The model's last id is taken.
  const last = await collect(engine().generate({ tokens: [...encode('hi'), LAST_MODEL_TOKEN], maxTokens: 1, temperature: 0 }))
  t.is(last.tokens.length, 1)
})

real('errors: a path the server does not have is an EngineError with status 404', async (t) => {
  const error = await t.throwsAsync(collect(new LlamaCppEngine({ url: `${server().url}/no/such/` }).generate({ tokens: [1, 2] })), {
    instanceOf: EngineError,
  })
  t.is(error?.code, 'engine-http-error')
  t.is(error?.status, 404)
})

real('errors: nothing listening is an EngineError (connection)', async (t) => {
  const probe = createServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const { port } = probe.address() as AddressInfo
  await new Promise<void>((resolve) => probe.close(() => resolve()))
  const error = await t.throwsAsync(collect(new LlamaCppEngine({ url: `http://127.0.0.1:${port}` }).generate({ tokens: [1, 2] })), {
    instanceOf: EngineError,
  })
  t.is(error?.code, 'engine-connection-error')
})

// Its own server with one long slot (65,536 ids), so the generation is still running when it is aborted.
real('abort: aborting the signal mid-stream ends the request and frees the slot', async (t) => {
  const solo = await startLlamaServer(build!, { ctxSize: 65_536, parallel: 1 })
  t.teardown(() => solo.close())
  const { start } = solo.model.chains.walk
  const abort = new AbortController()
  const received: number[] = []
  let running: Record<string, unknown>[] = []
  const error = await t.throwsAsync(
    (async () => {
      const steps = new LlamaCppEngine({ url: solo.url }).generate({
        tokens: promptEndingWith(start),
        temperature: 0,
        signal: abort.signal,
      })
      for await (const step of steps) {
        received.push(...step.tokens)
        if (received.length >= 5 && running.length === 0) {
          running = await solo.slots()
          abort.abort()
        }
      }
    })(),
    { instanceOf: EngineError },
  )
  t.is(error?.code, 'engine-aborted')
  t.is(running[0]?.is_processing, true, 'the slot was generating')
  // Left alone, it would go on to the end of its 65,536-id context (minutes at a few ms an id): idle within
  // seconds, it was stopped.
  await idle(t, solo)
  // The one slot serves the next request.
  const next = await collect(
    new LlamaCppEngine({ url: solo.url }).generate({ tokens: promptEndingWith(solo.model.chains.final.start), temperature: 0 }),
  )
  t.deepEqual(next.tokens, solo.model.chains.final.tokens)
})

real('the gateway over HTTP with a LlamaCppEngine: the openai client gets the final answer', async (t) => {
  const { client } = await startGateway(t, { engine: engine(), onDiagnostic: () => {} })
  // The rendered prompt ends with `<|start|>assistant`, which starts the model's `final` chain.
  const answer = await finalAnswerText()
  const body = { model: 'gpt-oss', messages: [{ role: 'user' as const, content: 'Say hello.' }], temperature: 0 }

  const whole = await client.chat.completions.create(body)
  t.is(whole.choices[0].message.content, answer)
  t.is(whole.choices[0].finish_reason, 'stop')
  t.is(whole.usage?.prompt_tokens, renderChatCompletionRequest(body).promptTokens)
  t.is(whole.usage?.completion_tokens, chain('final').tokens.length)

  const { content, finish } = await readChatStream(await client.chat.completions.create({ ...body, stream: true }))
  t.is(content, answer)
  t.is(finish, 'stop')

  const response = await client.responses.create({ model: 'gpt-oss', input: 'Say hello.', temperature: 0 })
  t.is(response.output_text, answer)
  t.is(response.status, 'completed')
})

// llama-server sends no partial result while the text ends inside a UTF-8 sequence, and each partial result
// carries only its own id (tools/server/server-context.cpp process_token / send_partial_response): the client
// finds the held id again from the text of the result that completes the character (held-ids.ts).
real('a character split over two ids (🪽 = 4103 50888): streamed, both ids arrive, in order, and usage counts both', async (t) => {
  const request = { tokens: promptEndingWith(chain('split').start), temperature: 0 }
  const streamed = await collect(engine().generate(request))
  t.deepEqual(streamed.tokens, (await unstreamed(request)).tokens)
  t.deepEqual(streamed.tokens, chain('split').tokens)
  t.is(streamed.finishReason, 'stop')
  t.is(streamed.usage?.completionTokens, chain('split').tokens.length)
  t.true(streamed.steps.every((step) => step.diagnostics === undefined))
})

real('a character split over three ids (F0, 9F, AA BD): both held ids are found again, in order', async (t) => {
  const request = { tokens: promptEndingWith(chain('split3').start), temperature: 0 }
  const streamed = await collect(engine().generate(request))
  t.deepEqual(streamed.tokens, (await unstreamed(request)).tokens)
  t.deepEqual(streamed.tokens, chain('split3').tokens)
  t.is(streamed.usage?.completionTokens, chain('split3').tokens.length)
  t.true(streamed.steps.every((step) => step.diagnostics === undefined))
  // The held ids come in the step that completes the character, before its own id: the first step with ids
  // opens with all three (the client may join the ids of later events of the same read to it).
  const whole = streamed.steps.find((step) => step.tokens.length > 0)
  t.deepEqual(Array.from(whole?.tokens ?? []).slice(0, 3), chain('split3').tokens.slice(0, 3))
})

real('a held id the server never reveals (the limit falls inside a character): a diagnostic says so, and usage counts it', async (t) => {
  const streamed = await collect(engine().generate({ tokens: promptEndingWith(chain('split').start), temperature: 0, maxTokens: 1 }))
  t.deepEqual(streamed.tokens, [])
  t.is(streamed.finishReason, 'length')
  t.is(streamed.usage?.completionTokens, 1)
  t.deepEqual(
    streamed.steps
      .flatMap((step) => step.diagnostics ?? [])
      .map((diagnostic) => ({ code: diagnostic.code, count: 'count' in diagnostic ? diagnostic.count : null })),
    [{ code: 'engine-ids-lost', count: 1 }],
  )
})

real('text that never completes a character, then <|return|>: neither id is streamed; the diagnostic counts both', async (t) => {
  const request = { tokens: promptEndingWith(chain('cut').start), temperature: 0 }
  t.deepEqual((await unstreamed(request)).tokens, chain('cut').tokens, 'the server generated both')
  const streamed = await collect(engine().generate(request))
  t.deepEqual(streamed.tokens, [])
  t.is(streamed.usage?.completionTokens, 2)
  const lost = streamed.steps.flatMap((step) => step.diagnostics ?? [])
  t.is(lost.length, 1)
  t.like(lost[0], { code: 'engine-ids-lost', count: 2 })
})

realSerial('cached tokens: a repeated prompt reports the prefix the slot reused (timings.cache_n), through the gateway too', async (t) => {
  const solo = await startLlamaServer(build!, { parallel: 1 })
  t.teardown(() => solo.close())
  const prompt = [...encode('A long shared prefix for the cache. '.repeat(8)), solo.model.chains.final.start]
  const soloEngine = new LlamaCppEngine({ url: solo.url })
  const first = await collect(soloEngine.generate({ tokens: prompt, temperature: 0 }))
  const second = await collect(soloEngine.generate({ tokens: prompt, temperature: 0 }))
  t.is(first.usage?.cachedPromptTokens, 0, 'nothing cached the first time')
  // llama.cpp reuses all but the last prompt id (it evaluates at least one).
  t.is(second.usage?.cachedPromptTokens, prompt.length - 1)

  const { client } = await startGateway(t, { engine: soloEngine, onDiagnostic: () => {} })
  const body = {
    model: 'gpt-oss',
    messages: [{ role: 'user' as const, content: 'Say hello, with a long question. '.repeat(6) }],
    temperature: 0,
  }
  await client.chat.completions.create(body)
  const chat = await client.chat.completions.create(body)
  const promptTokens = renderChatCompletionRequest(body).promptTokens
  t.is(chat.usage?.prompt_tokens_details?.cached_tokens, promptTokens - 1)
  const stream = await client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } })
  let cached: number | undefined
  for await (const chunk of stream) cached = chunk.usage?.prompt_tokens_details?.cached_tokens ?? cached
  t.is(cached, promptTokens - 1)
  const input = 'Say hello, with a long question. '.repeat(6)
  await client.responses.create({ model: 'gpt-oss', input, temperature: 0 })
  const response = await client.responses.create({ model: 'gpt-oss', input, temperature: 0 })
  t.true((response.usage?.input_tokens_details.cached_tokens ?? 0) > 0)
  t.is(response.usage?.input_tokens_details.cached_tokens, (response.usage?.input_tokens ?? 0) - 1)
})

real(
  "<|endoftext|>: llama-server ends the generation there (an end-of-generation id of the vocabulary), finish reason 'stop'",
  async (t) => {
    const request = { tokens: promptEndingWith(chain('endoftext').start), temperature: 0, maxTokens: 40 }
    const streamed = await collect(engine().generate(request))
    t.deepEqual(streamed.tokens, chain('endoftext').tokens)
    t.is(streamed.tokens.at(-1), ENDOFTEXT)
    t.is(streamed.finishReason, 'stop')
    t.deepEqual(streamed.tokens, (await unstreamed(request)).tokens)
  },
)

real('<|endoftext|> after a final answer: the gateway answers the text without it, finish reason stop', async (t) => {
  const { client } = await startGateway(t, { engine: engine(), onDiagnostic: () => {} })
  const body = { model: 'gpt-oss', messages: [{ role: 'user' as const, content: 'Say hello.' }], temperature: 1, max_tokens: 40 }
  // A seed for which the server's own sampling ends the answer with <|endoftext|> instead of <|return|>.
  const prompt = Array.from(renderChatCompletionRequest(body).tokens)
  let seed = 0
  for (; seed < 50; seed++) {
    const { tokens } = await unstreamed({ tokens: prompt, temperature: 1, seed, maxTokens: 40 })
    if (tokens.at(-1) === ENDOFTEXT) break
  }
  t.true(seed < 50, 'a seed that samples <|endoftext|>')
  const answer = await finalAnswerText()

  const whole = await client.chat.completions.create({ ...body, seed })
  t.is(whole.choices[0].message.content, answer)
  t.is(whole.choices[0].finish_reason, 'stop')

  // `seed` is no field of the Responses API's types, but the gateway reads it.
  const responsesBody = { model: 'gpt-oss', input: 'Say hello.', temperature: 1, seed } as OpenAI.Responses.ResponseCreateParamsNonStreaming
  const response = await client.responses.create(responsesBody)
  t.is(response.output_text, answer)
  t.is(response.status, 'completed')
})
