/**
 * Cache affinity measured on real llama-servers (issue 31): two servers behind one `EngineGroup`, three
 * conversations interleaved, each a 10-step tool loop continued by `previous_response_id` (exact continuations:
 * each prompt begins with the ids its engine saw and generated). With affinity each conversation goes back to
 * the server that holds its prefix, and the servers' own count of prompt tokens served from their caches
 * (llama.cpp `timings.cache_n`, usage's `cached_tokens`) covers everything the step before had; by load alone
 * the three conversations take turns on the two servers and land where their prefix is not.
 */
import test, { type ExecutionContext } from 'ava'
import { EngineGroup } from 'harmony-stream/engines'

import { startGateway } from '../helpers/gateway.mjs'
import { callingEngine, llamaBuildOrSkip, startLlamaServer } from '../helpers/llama-server.mjs'

const build = llamaBuildOrSkip()
const real = build ? test.serial : test.skip

const TOOLS = [
  {
    type: 'function' as const,
    name: 'get_weather',
    parameters: { type: 'object', properties: { city: { enum: ['Paris', 'Rome'] } }, required: ['city'], additionalProperties: false },
    strict: true,
  },
]

/** Three interleaved 10-step loops through a gateway over two servers; per step: prompt, cached, output tokens. */
async function loops(t: ExecutionContext, urls: string[], affinity: boolean) {
  const group = new EngineGroup(urls.map(callingEngine), { affinity })
  const { client } = await startGateway(t, { engine: group, onDiagnostic: () => {} })
  const conversations = [0, 1, 2].map(() => ({
    previous: undefined as string | undefined,
    callId: undefined as string | undefined,
    steps: [] as { input: number; cached: number; output: number }[],
  }))
  for (let step = 0; step < 10; step++) {
    for (const [n, conversation] of conversations.entries()) {
      const input =
        conversation.callId === undefined
          ? `Weather ${n}, affinity ${affinity}: ${'where and when '.repeat(n + 1)}?`
          : [{ type: 'function_call_output' as const, call_id: conversation.callId, output: `sunny ${n} ${step}` }]
      const response = await client.responses.create({
        model: 'gpt-oss',
        input,
        tools: TOOLS,
        max_output_tokens: 32,
        ...(conversation.previous === undefined ? {} : { previous_response_id: conversation.previous }),
      })
      const call = response.output.find((item) => item.type === 'function_call') as { call_id: string } | undefined
      if (call === undefined) throw new Error(`conversation ${n} step ${step}: no call: ${JSON.stringify(response.output)}`)
      conversation.callId = call.call_id
      conversation.previous = response.id
      conversation.steps.push({
        input: response.usage!.input_tokens,
        cached: response.usage!.input_tokens_details.cached_tokens,
        output: response.usage!.output_tokens,
      })
    }
  }
  return conversations.map((c) => c.steps)
}

real('two servers, three interleaved 10-step tool loops: with affinity every continuation is served from its server’s cache', async (t) => {
  const servers = await Promise.all([0, 1].map(() => startLlamaServer(build!, { parallel: 4, ctxSize: 4096 })))
  t.teardown(() => Promise.all(servers.map((server) => server.close())))
  const urls = servers.map((server) => server.url)
  const byLoad = await loops(t, urls, false)
  const affine = await loops(t, urls, true)
  const computed = (all: { input: number; cached: number }[][]) =>
    all.reduce((total, steps) => total + steps.slice(1).reduce((sum, s) => sum + s.input - s.cached, 0), 0)
  t.log(`steps 2-10 of 3 conversations, prompt tokens computed: by load alone ${computed(byLoad)}, with affinity ${computed(affine)}`)
  for (const [n, steps] of affine.entries()) {
    t.log(`affinity, conversation ${n} (prompt/cached/output): ${steps.map((s) => `${s.input}/${s.cached}/${s.output}`).join(' ')}`)
    t.log(`by load,  conversation ${n} (prompt/cached/output): ${byLoad[n]!.map((s) => `${s.input}/${s.cached}/${s.output}`).join(' ')}`)
    // From step 6, everything the step before had, prompt and generated ids, came from the cache (llama.cpp
    // evaluates at least the prompt's last id again). Before, two conversations on one server can share a slot:
    // llama.cpp gives a prompt the slot whose cache it shares most with (--slot-prompt-similarity), and these
    // prompts are mostly the same system message until their tool loops have grown.
    for (let i = 5; i < 10; i++)
      t.true(steps[i]!.cached >= steps[i - 1]!.input + steps[i - 1]!.output - 1, `affinity, conversation ${n}, step ${i + 1}`)
  }
  t.true(computed(affine) < computed(byLoad), 'affinity computes fewer prompt tokens')
})
