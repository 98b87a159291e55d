/**
 * Token-exact continuations on a real llama-server (issue 21): a 10-step tool loop through the example gateway
 * (Responses, previous_response_id, a strict tool), once with exact continuations (the ids the engine saw and
 * generated, then the tool's result) and once re-rendering the stored items. The model writes its calls in a
 * header form the reference does not render (` to=functions.get_weather json<|message|>`, the bigram model's
 * `tool` chain, which a bias towards ` to` and `<|call|>` and against `<|channel|>` makes it start after
 * `<|start|>assistant`), so a re-render differs from what the server cached right after each prompt, and an
 * exact continuation does not: the server's own count of prompt tokens served from its cache (llama.cpp
 * `timings.cache_n`, usage's `cached_tokens`) tells the difference. The same over Chat Completions with and
 * without the gateway's id cache, and over the WebSocket mode with `store: false` (the connection's memory).
 */
import test, { type ExecutionContext } from 'ava'
import { CallIdCache } from 'harmony-stream/server'
import type OpenAI from 'openai'

import { startGateway } from '../helpers/gateway.mjs'
import { callingEngine, llamaBuildOrSkip, llamaServerForFile } from '../helpers/llama-server.mjs'
import { connect, responseOf } from '../helpers/responses-socket.mjs'

const build = llamaBuildOrSkip()
const real = build ? test.serial : test.skip

const server = llamaServerForFile(test, build)

const WEATHER = {
  type: 'object',
  properties: { city: { enum: ['Paris', 'Rome'] }, days: { enum: [1, 2, 3] } },
  required: ['city', 'days'],
  additionalProperties: false,
}
const TOOLS = [{ type: 'function' as const, name: 'get_weather', parameters: WEATHER, strict: true }]

/** The file's llama-server, calling (`callingEngine`). */
const calling = () => callingEngine(server().url)

async function loop(t: ExecutionContext, exactContinuations: boolean) {
  const { client } = await startGateway(t, { engine: calling(), exactContinuations, onDiagnostic: () => {} })
  const steps: { input: number; cached: number; output: number }[] = []
  let previous: string | undefined
  let callId: string | undefined
  for (let step = 0; step < 10; step++) {
    const input =
      callId === undefined
        ? `Weather, run ${exactContinuations}?`
        : [{ type: 'function_call_output' as const, call_id: callId, output: `sunny ${step}` }]
    const response = await client.responses.create({
      model: 'gpt-oss',
      input,
      tools: TOOLS,
      max_output_tokens: 64,
      ...(previous === undefined ? {} : { previous_response_id: previous }),
    })
    const call = response.output.find((item) => item.type === 'function_call') as { call_id: string; arguments: string } | undefined
    if (call === undefined) throw new Error(`step ${step}: no call: ${JSON.stringify(response.output)}`)
    callId = call.call_id
    previous = response.id
    steps.push({
      input: response.usage!.input_tokens,
      cached: response.usage!.input_tokens_details.cached_tokens,
      output: response.usage!.output_tokens,
    })
  }
  return steps
}

/** The same loop over Chat Completions: the client sends the whole history back, the gateway with or without its id cache. */
async function chatLoop(t: ExecutionContext, idCache: boolean) {
  const { client } = await startGateway(t, {
    engine: calling(),
    callIdCache: idCache ? new CallIdCache() : null,
    onDiagnostic: () => {},
  })
  const steps: { input: number; cached: number; output: number }[] = []
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: 'user', content: `Weather, chat run ${idCache}?` }]
  const tools = TOOLS.map(({ name, parameters, strict }) => ({ type: 'function' as const, function: { name, parameters, strict } }))
  for (let step = 0; step < 10; step++) {
    const completion = await client.chat.completions.create({ model: 'gpt-oss', messages, tools, max_tokens: 64 })
    const message = completion.choices[0]!.message
    const call = message.tool_calls?.[0]
    if (call === undefined) throw new Error(`step ${step}: no call: ${JSON.stringify(message)}`)
    // The assistant message as it came back (its reasoning too), then the tool's result.
    messages.push(message as OpenAI.Chat.ChatCompletionMessageParam, { role: 'tool', tool_call_id: call.id, content: `sunny ${step}` })
    steps.push({
      input: completion.usage!.prompt_tokens,
      cached: completion.usage!.prompt_tokens_details?.cached_tokens ?? 0,
      output: completion.usage!.completion_tokens,
    })
  }
  return steps
}

real("over a 10-step Chat tool loop, the id cache's prompts are served from the server's cache where re-renders are not", async (t) => {
  const rerendered = await chatLoop(t, false)
  const exact = await chatLoop(t, true)
  const computed = (steps: { cached: number; input: number }[]) => steps.slice(1).reduce((total, s) => total + s.input - s.cached, 0)
  t.log(`Chat, steps 2-10 computed prompt tokens: re-rendered ${computed(rerendered)}, id cache ${computed(exact)}`)
  t.log(`per step (prompt/cached/output): re-rendered ${rerendered.map((s) => `${s.input}/${s.cached}/${s.output}`).join(' ')}`)
  t.log(`per step (prompt/cached/output): id cache    ${exact.map((s) => `${s.input}/${s.cached}/${s.output}`).join(' ')}`)
  for (let i = 1; i < 10; i++) {
    t.true(exact[i]!.cached >= exact[i - 1]!.input + exact[i - 1]!.output - 1, `id cache step ${i + 1}: ${JSON.stringify(exact[i])}`)
    t.true(rerendered[i]!.cached < rerendered[i - 1]!.input + rerendered[i - 1]!.output - 1, `re-rendered step ${i + 1}`)
    t.true(exact[i]!.input - exact[i]!.cached < rerendered[i]!.input - rerendered[i]!.cached, `step ${i + 1}`)
  }
})

real("over a 10-step tool loop, exact continuations are served from the server's cache where re-renders are not", async (t) => {
  const rerendered = await loop(t, false)
  const exact = await loop(t, true)
  const sum = (steps: { cached: number; input: number }[], key: 'cached' | 'input') =>
    steps.slice(1).reduce((total, s) => total + s[key], 0)
  const computed = (steps: { cached: number; input: number }[]) => sum(steps, 'input') - sum(steps, 'cached')
  t.log(
    `re-rendered: steps 2-10 prompt ${sum(rerendered, 'input')} tokens, ${sum(rerendered, 'cached')} from the cache, ${computed(rerendered)} computed`,
  )
  t.log(`exact:       steps 2-10 prompt ${sum(exact, 'input')} tokens, ${sum(exact, 'cached')} from the cache, ${computed(exact)} computed`)
  t.log(`per step (prompt/cached/output): re-rendered ${rerendered.map((s) => `${s.input}/${s.cached}/${s.output}`).join(' ')}`)
  t.log(`per step (prompt/cached/output): exact       ${exact.map((s) => `${s.input}/${s.cached}/${s.output}`).join(' ')}`)
  for (let i = 1; i < 10; i++) {
    // Exact: everything the previous request had, prompt and generated ids, comes from the cache (llama.cpp
    // evaluates at least the prompt's last id again).
    t.true(exact[i]!.cached >= exact[i - 1]!.input + exact[i - 1]!.output - 1, `exact step ${i + 1}: ${JSON.stringify(exact[i])}`)
    // Re-rendered: the cache stops where the re-rendered call differs from the generated one.
    t.true(rerendered[i]!.cached < rerendered[i - 1]!.input + rerendered[i - 1]!.output - 1, `re-rendered step ${i + 1}`)
    // So each step computes fewer prompt tokens (an exact prompt is also shorter here: the model's header is).
    t.true(exact[i]!.input - exact[i]!.cached < rerendered[i]!.input - rerendered[i]!.cached, `step ${i + 1}`)
  }
})

real(
  'over the WebSocket mode, a store: false tool loop continues from the connection’s memory, exactly, served from the server’s cache',
  async (t) => {
    const { port } = await startGateway(t, { engine: calling(), responseStore: null, onDiagnostic: () => {} })
    const ws = await connect(t, port)
    const steps: { input: number; cached: number; output: number }[] = []
    let previous: string | undefined
    let callId: string | undefined
    for (let step = 0; step < 4; step++) {
      ws.send({
        type: 'response.create',
        model: 'gpt-oss',
        store: false,
        tools: TOOLS,
        max_output_tokens: 64,
        input:
          callId === undefined ? 'Weather, over a socket?' : [{ type: 'function_call_output', call_id: callId, output: `sunny ${step}` }],
        ...(previous === undefined ? {} : { previous_response_id: previous }),
      })
      const response = responseOf(await ws.turn()) as unknown as {
        id: string
        output: { type: string; call_id?: string }[]
        usage: { input_tokens: number; output_tokens: number; input_tokens_details: { cached_tokens: number } }
      }
      callId = response.output.find((item) => item.type === 'function_call')?.call_id
      if (callId === undefined) throw new Error(`step ${step}: no call: ${JSON.stringify(response.output)}`)
      previous = response.id
      steps.push({
        input: response.usage.input_tokens,
        cached: response.usage.input_tokens_details.cached_tokens,
        output: response.usage.output_tokens,
      })
    }
    t.log(`per step (prompt/cached/output): ${steps.map((s) => `${s.input}/${s.cached}/${s.output}`).join(' ')}`)
    for (let i = 1; i < steps.length; i++) t.true(steps[i]!.cached >= steps[i - 1]!.input + steps[i - 1]!.output - 1, `step ${i + 1}`)
  },
)
