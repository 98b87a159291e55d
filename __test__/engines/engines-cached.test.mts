/**
 * Cached prompt tokens: every engine client passes on the number of prompt tokens the engine says it served
 * from its prefix cache (vLLM and trtllm-serve `usage.prompt_tokens_details.cached_tokens`, SGLang
 * `meta_info.cached_tokens`, llama.cpp `timings.cache_n`) as the last step's `usage.cachedPromptTokens`; an
 * engine that does not say leaves it unset, a value that is not a count is ignored (not an error), and the
 * adapters carry it into Chat's `prompt_tokens_details` and Responses' `input_tokens_details`.
 */
import test, { type ExecutionContext } from 'ava'

import { type ChatCompletionChunk, ChatCompletionsStream, type ResponseEvent, type ResponseObject, ResponsesStream } from 'harmony-stream'
import { type EngineStep, type GenerateRequest, LlamaCppEngine, SglangEngine, TrtllmEngine, VllmEngine } from 'harmony-stream/engines'

import {
  type FakeBehaviour,
  type FakeEngine,
  fakeLlamaCpp,
  fakeSglang,
  fakeTrtllm,
  fakeVllm,
  fakeVllmGenerate,
} from '../helpers/fake-engines.mjs'
import { harmony, IMPLEMENTATIONS } from '../helpers/harmony.mjs'

const PROMPT = harmony('<|start|>user<|message|>Weather in Paris?<|end|><|start|>assistant')
const COMPLETION = harmony('<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>Sunny.<|return|>')
const CACHED = 5

interface Kind {
  name: string
  start(behaviour: FakeBehaviour): Promise<FakeEngine>
  client(url: string): { generate(request: GenerateRequest): AsyncIterable<EngineStep> }
  /** Whether the engine reports a count of 0 (vLLM's generate endpoint leaves 0 out). */
  reportsZero: boolean
}

const KINDS: Kind[] = [
  { name: 'vllm', start: fakeVllm, client: (url) => new VllmEngine({ url, model: 'gpt-oss' }), reportsZero: true },
  { name: 'vllm generate', start: fakeVllmGenerate, client: (url) => new VllmEngine({ url, api: 'generate' }), reportsZero: false },
  { name: 'sglang', start: fakeSglang, client: (url) => new SglangEngine({ url }), reportsZero: true },
  {
    name: 'sglang incremental',
    start: (b) => fakeSglang({ ...b, incremental: true }),
    client: (url) => new SglangEngine({ url }),
    reportsZero: true,
  },
  { name: 'llamacpp', start: fakeLlamaCpp, client: (url) => new LlamaCppEngine({ url }), reportsZero: true },
  { name: 'trtllm', start: fakeTrtllm, client: (url) => new TrtllmEngine({ url, model: 'gpt-oss' }), reportsZero: true },
]

/** The steps of one generation against a stand-in with this behaviour. */
async function generate(kind: Kind, behaviour: Omit<FakeBehaviour, 'completion'>, request: Partial<GenerateRequest> = {}) {
  const engine = await kind.start({ completion: COMPLETION, ...behaviour })
  try {
    const steps: EngineStep[] = []
    for await (const step of kind.client(engine.url).generate({ tokens: PROMPT, ...request })) steps.push(step)
    return steps
  } finally {
    await engine.close()
  }
}

/** A generation whose engine reports this cached count ends as usual, without cachedPromptTokens. */
async function ignored(t: ExecutionContext, kind: Kind, cachedTokens: number): Promise<void> {
  const last = (await generate(kind, { cachedTokens })).at(-1)!
  t.is(last.finishReason, 'stop', `${cachedTokens}`)
  t.deepEqual(last.usage, { promptTokens: PROMPT.length, completionTokens: COMPLETION.length }, `${cachedTokens}`)
}

for (const kind of KINDS) {
  test(`${kind.name}: the cached prompt tokens the engine reports are the last step's usage.cachedPromptTokens`, async (t) => {
    for (const chunk of [1, 3]) {
      const steps = await generate(kind, { chunk, cachedTokens: CACHED })
      t.deepEqual(
        steps.at(-1)!.usage,
        { promptTokens: PROMPT.length, completionTokens: COMPLETION.length, cachedPromptTokens: CACHED },
        `chunk ${chunk}`,
      )
      t.true(
        steps.slice(0, -1).every((s) => s.usage === undefined),
        'usage on the last step only',
      )
    }
    const zero = (await generate(kind, { cachedTokens: 0 })).at(-1)!.usage!
    if (kind.reportsZero) t.is(zero.cachedPromptTokens, 0, 'none cached, and the engine says so')
    else t.false('cachedPromptTokens' in zero, 'the engine leaves 0 out: unset')
  })

  test(`${kind.name}: an engine that does not report cached tokens leaves cachedPromptTokens unset`, async (t) => {
    const usage = (await generate(kind, {})).at(-1)!.usage!
    t.deepEqual(usage, { promptTokens: PROMPT.length, completionTokens: COMPLETION.length })
    t.false('cachedPromptTokens' in usage)
  })

  test(`${kind.name}: a cached count that is not a safe integer (or not a number) is ignored, not an error`, async (t) => {
    // NaN goes out as JSON null.
    for (const cachedTokens of [2.5, 2 ** 53, Number.NaN]) await ignored(t, kind, cachedTokens)
  })

  test(`${kind.name}: a negative cached count is ignored, not an error`, (t) => ignored(t, kind, -3))
}

test("the adapters take an engine's cached prompt tokens: Chat prompt_tokens_details, Responses input_tokens_details", async (t) => {
  for (const kind of KINDS) {
    for (const cachedTokens of [CACHED, undefined]) {
      const steps = await generate(kind, { chunk: 2, ...(cachedTokens === undefined ? {} : { cachedTokens }) })
      // The adapters' own default when the engine does not say.
      const want = cachedTokens ?? 0
      for (const implementation of IMPLEMENTATIONS) {
        const where = `${kind.name}, ${implementation}, cached ${cachedTokens}`
        const chat = new ChatCompletionsStream({ model: 'gpt-oss', includeUsage: true, parser: { implementation } })
        const chunks: ChatCompletionChunk[] = []
        for (const step of steps) chunks.push(...chat.push(step))
        chunks.push(...chat.finish())
        const usage = chunks.at(-1)?.usage
        t.is(usage?.prompt_tokens, PROMPT.length, where)
        t.is(usage?.completion_tokens, COMPLETION.length, where)
        t.deepEqual(usage?.prompt_tokens_details, { cached_tokens: want }, `Chat: ${where}`)
        t.is(chunks.at(-2)?.choices[0]?.finish_reason, 'stop', where)

        const responses = new ResponsesStream({ model: 'gpt-oss', parser: { implementation } })
        const events: ResponseEvent[] = [...responses.start()]
        for (const step of steps) events.push(...responses.push(step))
        events.push(...responses.finish())
        const last = events.at(-1)!
        t.is(last.type, 'response.completed', where)
        const response = last.response as ResponseObject
        t.is(response.usage?.input_tokens, PROMPT.length, where)
        t.deepEqual(response.usage?.input_tokens_details, { cached_tokens: want }, `Responses: ${where}`)
      }
    }
  }
})
