/**
 * Failover mid-stream through the gateway (issue 45): two engines, one of which cuts every stream it serves
 * after a few steps; twenty streams at once each end with `[DONE]` and the text an unbroken generation gives,
 * their usage counts the prompt once and every id, and `/metrics` counts the failovers by the engine that failed.
 * The engines are in-process: a deterministic "model" that goes on from wherever its prompt ends, as greedy
 * decoding on identical engines does.
 */
import test from 'ava'
import { type Engine, EngineError, type EngineStep, type GenerateRequest } from 'harmony-stream/engines'

import { startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'

const ANSWER = harmony(
  '<|channel|>analysis<|message|>The user wants a sentence about foxes.<|end|><|start|>assistant<|channel|>final<|message|>The quick brown fox jumps over the lazy dog, then runs to the hills.<|return|>',
)

/** How many ids of ANSWER the prompt ends with: the longest of its ends that begins ANSWER. */
function generatedSoFar(tokens: readonly number[]): number {
  for (let k = Math.min(ANSWER.length, tokens.length); k > 0; k--)
    if (ANSWER.slice(0, k).every((id, i) => tokens[tokens.length - k + i] === id)) return k
  return 0
}

/**
 * The completion of any prompt is ANSWER, gone on from wherever the prompt's completion stands. `cutAfter(call)`:
 * after how many steps its call-th stream breaks (null: never), once `crash` resolves (a server that goes down
 * with every stream it holds).
 */
function continuing(
  name: string,
  cutAfter: (call: number) => number | null = () => null,
  crash: Promise<void> = Promise.resolve(),
): { engine: Engine; prompts: number[][] } {
  const prompts: number[][] = []
  const engine: Engine = {
    name,
    async *generate(request: GenerateRequest): AsyncIterable<EngineStep> {
      const call = prompts.push(Array.from(request.tokens)) - 1
      const cut = cutAfter(call)
      const tokens = prompts[call]!
      const from = generatedSoFar(tokens)
      const rest = ANSWER.slice(from)
      for (let n = 0; n < rest.length; n++) {
        // Streams interleave, as on a server.
        await new Promise((resolve) => setImmediate(resolve))
        if (n === cut) {
          await crash
          throw new EngineError('engine-connection-error', `${name}: reset`, { engine: name })
        }
        const last = n === rest.length - 1
        yield {
          tokens: Uint32Array.of(rest[n]!),
          ...(last ? { finishReason: 'stop' as const, usage: { promptTokens: tokens.length, completionTokens: rest.length } } : {}),
        }
      }
    },
  }
  return { engine, prompts }
}

/** A streamed Chat completion read as raw SSE: its content, its usage, and whether it ended with `[DONE]`. */
async function stream(port: number, content: string) {
  const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'gpt-oss',
      messages: [{ role: 'user', content }],
      stream: true,
      stream_options: { include_usage: true },
    }),
  })
  const events = (await response.text())
    .split('\n\n')
    .filter((event) => event.startsWith('data: '))
    .map((event) => event.slice('data: '.length))
  const chunks = events.filter((data) => data !== '[DONE]').map((data) => JSON.parse(data))
  return {
    status: response.status,
    done: events.at(-1) === '[DONE]',
    text: chunks.map((chunk) => chunk.choices[0]?.delta?.content ?? '').join(''),
    usage: chunks.at(-1)?.usage as { prompt_tokens: number; completion_tokens: number } | undefined,
  }
}

test('two engines, one cutting every stream mid-way: twenty streams at once each end with [DONE] and the unbroken text', async (t) => {
  const question = (i: number) => `Tell me about foxes, please (${i}).`
  // The text and usage of the same requests with no fault.
  const whole = await startGateway(t, { engine: continuing('whole').engine })
  const expected = await Promise.all(Array.from({ length: 20 }, (_, i) => stream(whole.port, question(i))))

  // The cutting engine goes down once every stream has started, with those it holds.
  let started = 0
  let crash!: () => void
  const crashed = new Promise<void>((resolve) => (crash = resolve))
  const counted = (engine: Engine): Engine => ({
    name: engine.name,
    generate: (request) => {
      if (++started === 20) crash()
      return engine.generate(request)
    },
  })
  const cutting = continuing('cutting', (call) => 2 + (call % 9), crashed)
  const healthy = continuing('healthy')
  const diagnostics: { code: string }[] = []
  const { port } = await startGateway(t, {
    engines: [counted(cutting.engine), counted(healthy.engine)],
    observability: { onError: () => {}, onDiagnostic: (diagnostic: { code: string }) => diagnostics.push(diagnostic) },
  })
  const streams = await Promise.all(Array.from({ length: 20 }, (_, i) => stream(port, question(i))))
  t.true(cutting.prompts.length > 1, `the cutting engine served several of them`)
  for (const [i, answer] of streams.entries()) {
    t.is(answer.status, 200)
    t.true(answer.done, `stream ${i} ended with [DONE]`)
    t.is(answer.text, expected[i]!.text, `stream ${i}: the unbroken text`)
    t.deepEqual(answer.usage, expected[i]!.usage, `stream ${i}: the prompt once, every id generated`)
  }
  // Each stream cut went on on the healthy engine, prompted with the cut one's prompt and the ids it generated.
  const continued = new Set(healthy.prompts.map((prompt) => prompt.join(',')))
  for (const [call, prompt] of cutting.prompts.entries())
    t.true(continued.has([...prompt, ...ANSWER.slice(0, 2 + (call % 9))].join(',')), `the continuation of cut stream ${call}`)
  const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
  const failovers = Number(/^harmony_engine_failovers_total\{engine="cutting"\} (\S+)$/m.exec(metrics)?.[1] ?? 0)
  t.is(failovers, cutting.prompts.length, 'one failover per stream the cutting engine served')
  t.is(diagnostics.filter((d) => d.code === 'engine-failover').length, cutting.prompts.length, 'each told as a diagnostic')
  t.regex(metrics, /^harmony_engine_errors_total\{engine="cutting",code="engine-connection-error"\} /m)
})
