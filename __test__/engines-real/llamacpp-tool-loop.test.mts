/**
 * The server-side tool loop on a real llama-server (issue 34): a model that calls gpt-oss's `python` tool at
 * every turn (make-bigram-model.py --design tools), Pyodide running the calls, and the gateway's limit of calls
 * ending the loop after three. After each result the engine is asked to go on from the ids it saw and generated
 * plus the result: the server's own count of cached prompt tokens shows it computes only the new ones.
 */
import test from 'ava'
import { type EngineStep, type GenerateRequest, LlamaCppEngine } from 'harmony-stream/engines'
import { PyodidePython } from 'harmony-stream/server'

import { startGateway } from '../helpers/gateway.mjs'
import { llamaBuildOrSkip, startLlamaServer } from '../helpers/llama-server.mjs'
import { decodeTokens } from '../helpers/token-bytes.mjs'

const build = llamaBuildOrSkip()
const real = build ? test : test.skip

real('three python calls in one response, each generation computing only the tokens after the last result', async (t) => {
  const server = await startLlamaServer({ ...build!, model: build!.toolModel, chains: build!.toolChains })
  t.teardown(() => server.close())
  const llama = new LlamaCppEngine({ url: server.url })
  /** Each generation: its prompt, the ids it generated, and what the server said it took from its cache. */
  const generations: { prompt: number[]; generated: number[]; promptTokens?: number; cached?: number }[] = []
  const engine = {
    name: 'llamacpp',
    async *generate(request: GenerateRequest): AsyncIterable<EngineStep> {
      const record: (typeof generations)[number] = { prompt: Array.from(request.tokens), generated: [] }
      generations.push(record)
      for await (const step of llama.generate(request)) {
        record.generated.push(...step.tokens)
        if (step.usage !== undefined) {
          record.promptTokens = step.usage.promptTokens
          record.cached = step.usage.cachedPromptTokens
        }
        yield step
      }
    },
  }
  const { client } = await startGateway(t, { engine, python: new PyodidePython(), toolCalls: 3 })
  const response = await client.responses.create({
    model: 'gpt-oss',
    input: 'Print 42, three times.',
    tools: [{ type: 'code_interpreter', container: { type: 'auto' } }],
    include: ['code_interpreter_call.outputs'],
    max_output_tokens: 200,
  })
  const calls = response.output.filter((item) => item.type === 'code_interpreter_call') as unknown as {
    code: string
    status: string
    outputs: unknown
  }[]
  t.deepEqual(
    calls.map((call) => [call.code, call.status]),
    [
      ['print(42)', 'completed'],
      ['print(42)', 'completed'],
      ['print(42)', 'completed'],
      ['print(42)', 'incomplete'],
    ],
    'three calls run; the fourth, past the limit, ends the response',
  )
  t.deepEqual(calls[0]!.outputs, [{ type: 'logs', logs: '42' }])
  t.is(generations.length, 4)
  for (let k = 1; k < generations.length; k++) {
    const before = generations[k - 1]!
    const now = generations[k]!
    // The prompt is the one before, what was generated, and the result: nothing rendered again.
    t.deepEqual(now.prompt.slice(0, before.prompt.length + before.generated.length), [...before.prompt, ...before.generated])
    t.regex(
      decodeTokens(now.prompt.slice(before.prompt.length + before.generated.length)),
      /^<\|start\|>python to=assistant<\|channel\|>analysis<\|message\|>42<\|end\|><\|start\|>assistant$/,
    )
    // What the server computed: only the new tokens (it may take the last cached one again).
    const fresh = now.prompt.length - before.prompt.length - before.generated.length
    t.is(now.promptTokens, now.prompt.length)
    t.true(
      now.prompt.length - (now.cached ?? 0) <= fresh + 1,
      `generation ${k}: ${JSON.stringify({ cached: now.cached, prompt: now.prompt.length, fresh })}`,
    )
  }
  const fresh = (k: number) => generations[k]!.prompt.length - generations[k - 1]!.prompt.length - generations[k - 1]!.generated.length
  t.log(
    `prompt/cached/new tokens per generation: ${generations.map((g, k) => `${g.prompt.length}/${g.cached}/${k === 0 ? '-' : fresh(k)}`).join(' ')}`,
  )
})
