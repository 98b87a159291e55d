/**
 * Sampling fields reach each engine in its own names and shapes (presence and frequency penalties, logit bias
 * as `{"<id>": bias}` or llama.cpp's `[[id, bias]]`), are checked before anything is sent, and a request that
 * sets one an engine does not apply is refused (a 400 naming OpenAI's field through the gateway) instead of
 * sent to be ignored. The real llama-server's own answer to a logit bias is in engines-real/llamacpp.test.mts.
 */
import test from 'ava'
import { HarmonyRequestError } from 'harmony-stream'
import {
  type Engine,
  type EngineStep,
  type GenerateRequest,
  LlamaCppEngine,
  ReplayEngine,
  SglangEngine,
  TrtllmEngine,
  VllmEngine,
} from 'harmony-stream/engines'
import OpenAI from 'openai'

import {
  type FakeBehaviour,
  type FakeEngine,
  fakeLlamaCpp,
  fakeSglang,
  fakeTrtllm,
  fakeVllm,
  fakeVllmGenerate,
} from '../helpers/fake-engines.mjs'
import { startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'

const PROMPT = harmony('<|start|>user<|message|>Hi<|end|><|start|>assistant')
const COMPLETION = harmony('<|channel|>final<|message|>Hello.<|return|>')
const SAMPLING = { presencePenalty: 0.5, frequencyPenalty: -0.25, logitBias: { 1000: 5, 200002: -100 } }

interface Kind {
  name: string
  start(behaviour: FakeBehaviour): Promise<FakeEngine>
  client(url: string): Engine
  /** Where the engine takes its sampling fields in the request body. */
  sampling(body: Record<string, unknown>): unknown
  /** The engine's logit bias for SAMPLING's. */
  logitBias: unknown
}

const OBJECT = { '1000': 5, '200002': -100 }
const KINDS: Kind[] = [
  // vllm/entrypoints/openai: CompletionRequest (top level, logit_bias dict[str, float]).
  { name: 'vllm', start: fakeVllm, client: (url) => new VllmEngine({ url, model: 'gpt-oss' }), sampling: (b) => b, logitBias: OBJECT },
  // vLLM's tokens-only endpoint: sampling_params as SamplingParams takes them.
  {
    name: 'vllm generate',
    start: fakeVllmGenerate,
    client: (url) => new VllmEngine({ url, api: 'generate' }),
    sampling: (b) => b.sampling_params,
    logitBias: OBJECT,
  },
  // python/sglang/srt/sampling/sampling_params.py: SamplingParams (logit_bias Dict[str, float]).
  { name: 'sglang', start: fakeSglang, client: (url) => new SglangEngine({ url }), sampling: (b) => b.sampling_params, logitBias: OBJECT },
  // tools/server/server-schema.cpp: logit_bias as [token, bias] pairs (an object would do too).
  {
    name: 'llamacpp',
    start: fakeLlamaCpp,
    client: (url) => new LlamaCppEngine({ url }),
    sampling: (b) => b,
    logitBias: [
      [1000, 5],
      [200_002, -100],
    ],
  },
  {
    name: 'trtllm',
    start: fakeTrtllm,
    client: (url) => new TrtllmEngine({ url, model: 'gpt-oss' }),
    sampling: (b) => b,
    logitBias: OBJECT,
  },
]

async function generate(engine: Engine, request: Partial<GenerateRequest>): Promise<EngineStep[]> {
  const steps: EngineStep[] = []
  for await (const step of engine.generate({ tokens: PROMPT, ...request })) steps.push(step)
  return steps
}

for (const kind of KINDS) {
  test(`${kind.name}: presence and frequency penalties and the logit bias reach the engine in its own shape`, async (t) => {
    const engine = await kind.start({ completion: COMPLETION })
    t.teardown(() => engine.close())
    const client = kind.client(engine.url)
    const applies = client.sampling ?? ['presencePenalty', 'frequencyPenalty', 'logitBias']
    const request = Object.fromEntries(Object.entries(SAMPLING).filter(([key]) => applies.includes(key as never)))
    await generate(client, request)
    await generate(client, {})
    const [set, unset] = engine.bodies.map((body) => kind.sampling(body) as Record<string, unknown>)
    if ('presencePenalty' in request) t.is(set.presence_penalty, 0.5)
    if ('frequencyPenalty' in request) t.is(set.frequency_penalty, -0.25)
    if ('logitBias' in request) t.deepEqual(set.logit_bias, kind.logitBias)
    for (const field of ['presence_penalty', 'frequency_penalty', 'logit_bias']) t.false(field in unset, `${field} is left to the engine`)
  })
}

test('sampling fields are checked before anything is sent', (t) => {
  const engine = new LlamaCppEngine({ url: 'http://127.0.0.1:1' })
  const bad: [Partial<GenerateRequest>, RegExp][] = [
    [{ presencePenalty: 2.5 }, /presencePenalty must be a number from -2 to 2/],
    [{ frequencyPenalty: Number.NaN }, /frequencyPenalty/],
    [{ logitBias: { 201088: 1 } }, /logitBias key "201088" is not a token id/],
    [{ logitBias: { '-1': 1 } as never }, /logitBias key "-1"/],
    [{ logitBias: { 5: 101 } }, /logitBias\[5\] must be a number from -100 to 100/],
    [{ logitBias: [[5, 1]] as never }, /logitBias must be an object/],
  ]
  for (const [request, message] of bad) t.throws(() => engine.generate({ tokens: PROMPT, ...request }), { message })
})

/** An engine that applies temperature only, as a server without penalties or a logit bias would. */
class TemperatureOnly implements Engine {
  readonly name = 'temperature-only'
  readonly sampling = ['temperature'] as const
  private readonly replay = new ReplayEngine({ completions: [COMPLETION] })
  generate(request: GenerateRequest): AsyncIterable<EngineStep> {
    return this.replay.generate(request)
  }
}

test('an engine that does not apply a sampling field: the request is refused, through the gateway a 400 naming the field', async (t) => {
  const engine = new TemperatureOnly()
  // The client's own check, as every engine of the package runs it (checkGenerateRequest with the engine).
  const { checkGenerateRequest } = await import('harmony-stream/engines')
  const error = t.throws(() => checkGenerateRequest({ tokens: PROMPT, presencePenalty: 1 }, 'x', engine), {
    instanceOf: HarmonyRequestError,
  })
  t.is(error?.param, 'presence_penalty')
  t.notThrows(() => checkGenerateRequest({ tokens: PROMPT, temperature: 1 }, 'x', engine))

  const checking: Engine = {
    name: engine.name,
    sampling: engine.sampling,
    generate: (request) => {
      checkGenerateRequest(request, 'checking.generate', checking)
      return engine.generate(request)
    },
  }
  const { client } = await startGateway(t, { engine: checking, onDiagnostic: () => {} })
  const messages = [{ role: 'user' as const, content: 'Hi' }]
  for (const [field, value] of [
    ['presence_penalty', 1],
    ['frequency_penalty', 1],
    ['logit_bias', { 1000: 5 }],
  ] as const) {
    const refused = await t.throwsAsync(client.chat.completions.create({ model: 'gpt-oss', messages, [field]: value }), {
      instanceOf: OpenAI.BadRequestError,
    })
    t.is(refused?.param, field)
  }
  const answer = await client.chat.completions.create({ model: 'gpt-oss', messages, temperature: 0.5 })
  t.is(answer.choices[0].message.content, 'Hello.')
  // A bad value is the gateway's own 400, before any engine.
  const bad = await t.throwsAsync(client.chat.completions.create({ model: 'gpt-oss', messages, logit_bias: { abc: 1 } as never }), {
    instanceOf: OpenAI.BadRequestError,
  })
  t.is(bad?.param, 'logit_bias')
})
