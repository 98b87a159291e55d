/**
 * Exact by default, where the traffic is (issue 45): two real llama-servers behind a gateway made with nothing
 * but `engines`, ten Chat Completions conversations at once, each a 10-step tool loop whose client sends its whole
 * history back (the `openai` client, as an agent loop does). Every continuation must find at least 95% of what
 * the step before had (its prompt and the ids generated) in its server's cache (llama.cpp `timings.cache_n`,
 * usage's `cached_tokens`): the prompt is the ids the engine generated (the call id cache, on by default) and it
 * goes back to the server that holds them (affinity, which holds under this load).
 *
 * The model writes its calls in a header form the reference does not render (the bigram model's `tool` chain:
 * ` to=functions.get_weather json<|message|>`), so a re-render would miss from the first call on.
 */
import test from 'ava'
import type OpenAI from 'openai'

import { startGateway } from '../helpers/gateway.mjs'
import { callingEngine, llamaBuildOrSkip, startLlamaServer } from '../helpers/llama-server.mjs'

const build = llamaBuildOrSkip()
const real = build ? test.serial : test.skip

const TOOLS = [
  {
    type: 'function' as const,
    // Strict: the server's grammar gives the call JSON its schema accepts, then `<|call|>`.
    function: {
      name: 'get_weather',
      parameters: { type: 'object', properties: { city: { enum: ['Paris', 'Rome'] } }, required: ['city'], additionalProperties: false },
      strict: true,
    },
  },
]
const CONVERSATIONS = 10
const STEPS = 10

/** One conversation's tool loop; per step: prompt, cached and output tokens. */
async function conversation(client: OpenAI, n: number) {
  const steps: { input: number; cached: number; output: number }[] = []
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
    { role: 'user', content: `Conversation ${n}: the weather, ${'where and when '.repeat(n + 1)}?` },
  ]
  for (let step = 0; step < STEPS; step++) {
    const completion = await client.chat.completions.create({ model: 'gpt-oss', messages, tools: TOOLS, max_tokens: 32 })
    const message = completion.choices[0]!.message
    const call = message.tool_calls?.[0]
    if (call === undefined) throw new Error(`conversation ${n} step ${step}: no call: ${JSON.stringify(message)}`)
    messages.push(message as OpenAI.Chat.ChatCompletionMessageParam, { role: 'tool', tool_call_id: call.id, content: `sunny ${n} ${step}` })
    steps.push({
      input: completion.usage!.prompt_tokens,
      cached: completion.usage!.prompt_tokens_details?.cached_tokens ?? 0,
      output: completion.usage!.completion_tokens,
    })
  }
  return steps
}

real('two servers, ten Chat tool loops at once, default settings: every continuation finds ≥ 95% of its history cached', async (t) => {
  t.timeout(600_000)
  // A slot per conversation on either server: a cache is lost to a slot's reuse, never to the routing.
  const servers = await Promise.all([0, 1].map(() => startLlamaServer(build!, { parallel: CONVERSATIONS, ctxSize: 2048 * CONVERSATIONS })))
  t.teardown(() => Promise.all(servers.map((server) => server.close())))
  const exact: string[] = []
  const { client } = await startGateway(t, {
    engines: servers.map((server) => callingEngine(server.url)),
    onDiagnostic: (d: { code: string; message: string }) => exact.push(`${d.code}: ${d.message}`),
  })
  const all = await Promise.all(Array.from({ length: CONVERSATIONS }, (_, n) => conversation(client, n)))
  let history = 0
  let cached = 0
  for (const [n, steps] of all.entries()) {
    t.log(`conversation ${n} (prompt/cached/output): ${steps.map((s) => `${s.input}/${s.cached}/${s.output}`).join(' ')}`)
    for (let i = 1; i < STEPS; i++) {
      const before = steps[i - 1]!.input + steps[i - 1]!.output
      history += before
      cached += Math.min(steps[i]!.cached, before)
      t.true(steps[i]!.cached >= 0.95 * before, `conversation ${n}, step ${i + 1}: ${steps[i]!.cached} of ${before} cached`)
    }
  }
  t.log(`steps 2-${STEPS} of ${CONVERSATIONS} conversations: ${cached} of ${history} history tokens served from the cache`)
  t.deepEqual(
    exact.filter((d) => d.startsWith('prompt-re-rendered')),
    [],
    'every continuation exact',
  )
})
