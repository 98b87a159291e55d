/**
 * Anthropic's Messages API on a real llama-server (issue 35), through the official `@anthropic-ai/sdk`: a whole
 * message and a streamed one are the same message, the server's own prefix-cache count is the message's
 * `cache_read_input_tokens` (Anthropic's split of the prompt), and count_tokens counts the prompt the server got.
 */
import Anthropic from '@anthropic-ai/sdk'
import test from 'ava'
import { LlamaCppEngine } from 'harmony-stream/engines'

import { startGateway } from '../helpers/gateway.mjs'
import { llamaBuildOrSkip, startLlamaServer } from '../helpers/llama-server.mjs'

const build = llamaBuildOrSkip()
const real = build ? test : test.skip

real('a real llama-server through /v1/messages: streamed equals whole, its cache hits as cache_read_input_tokens', async (t) => {
  // One slot: a repeated prompt finds its prefix in it.
  const server = await startLlamaServer(build!, { parallel: 1 })
  t.teardown(() => server.close())
  const { port } = await startGateway(t, { engine: new LlamaCppEngine({ url: server.url }), onDiagnostic: () => {} })
  const client = new Anthropic({ baseURL: `http://127.0.0.1:${port}`, apiKey: 'x', maxRetries: 0 })
  const request = {
    model: 'gpt-oss',
    max_tokens: 60,
    system: 'Answer briefly.',
    messages: [{ role: 'user' as const, content: 'Say hello, with a long question. '.repeat(6) }],
    // Greedy, so the server gives the same ids every time (the 2023-06-01 field the 1.x SDK types no longer carry).
    temperature: 0,
  } as Anthropic.MessageCreateParamsNonStreaming
  const first = await client.messages.create(request)
  const whole = await client.messages.create(request)
  const streamed = await client.messages.stream(request).finalMessage()
  const { input_tokens: counted } = await client.messages.countTokens({
    model: 'gpt-oss',
    system: request.system,
    messages: request.messages,
  })

  t.true(whole.content.length > 0)
  t.deepEqual(
    streamed.content.map((block) => (block.type === 'thinking' ? { ...block, signature: '' } : block)),
    whole.content.map((block) => (block.type === 'thinking' ? { ...block, signature: '' } : block)),
  )
  t.is(streamed.stop_reason, whole.stop_reason)
  t.is(streamed.usage.output_tokens, whole.usage.output_tokens)
  // The first computed the whole prompt; the repeats took all of it but the last id from the slot.
  t.is(first.usage.cache_read_input_tokens, 0)
  t.is(first.usage.input_tokens, counted)
  for (const message of [whole, streamed]) {
    t.is(message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0), counted)
    t.is(message.usage.cache_read_input_tokens, counted - 1)
  }
})
