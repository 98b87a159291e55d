/**
 * Log probabilities from a real llama-server (issue 20 item 4): what LlamaCppEngine streams with `logprobs`
 * must be what the server itself answers for the same request not streamed (its `completion_probabilities`),
 * id for id; and through the gateway the openai client gets them for the answer's tokens only.
 */
import test from 'ava'
import { encode } from 'gpt-tokenizer/encoding/o200k_base'
import { type EngineStep, LlamaCppEngine } from 'harmony-stream/engines'

import { startGateway } from '../helpers/gateway.mjs'
import { llamaBuildOrSkip, llamaServerForFile } from '../helpers/llama-server.mjs'

const build = llamaBuildOrSkip()
const real = build ? test : test.skip

const server = llamaServerForFile(test, build)

interface ServerProbability {
  id: number
  logprob: number
  top_logprobs: { id: number; logprob: number }[]
}

real("the streamed log probabilities are the server's own for the same request, id for id", async (t) => {
  const prompt = [...encode('Say hello.'), server().model.chains.final.start]
  const steps: EngineStep[] = []
  for await (const step of new LlamaCppEngine({ url: server().url }).generate({ tokens: prompt, temperature: 0, logprobs: 3 }))
    steps.push(step)
  const tokens = steps.flatMap((step) => [...step.tokens])
  const logprobs = steps.flatMap((step) => step.logprobs ?? [])
  t.deepEqual(tokens, server().model.chains.final.tokens)
  t.is(logprobs.length, tokens.length)
  const { status, json } = await server().post('/completion', {
    prompt,
    n_predict: tokens.length,
    temperature: 0,
    stream: false,
    return_tokens: true,
    n_probs: 3,
  })
  t.is(status, 200)
  const reference = (json as { completion_probabilities: ServerProbability[] }).completion_probabilities
  t.is(reference.length, tokens.length)
  reference.forEach((entry, i) => {
    t.is(entry.id, tokens[i])
    t.deepEqual(logprobs[i], { logprob: entry.logprob, top: entry.top_logprobs.map(({ id, logprob }) => ({ id, logprob })) }, `id ${i}`)
    // Greedy decoding took the likeliest id.
    t.is(logprobs[i]!.top[0]!.id, tokens[i])
  })
})

real("through the gateway: Chat logprobs cover the answer's tokens, and only them", async (t) => {
  const { client } = await startGateway(t, { engine: new LlamaCppEngine({ url: server().url }) })
  const completion = await client.chat.completions.create({
    model: 'gpt-oss',
    messages: [{ role: 'user', content: 'Say hello.' }],
    temperature: 0,
    logprobs: true,
    top_logprobs: 2,
  })
  const content = completion.choices[0]!.logprobs!.content!
  t.is(Buffer.from(content.flatMap((e) => e.bytes ?? [])).toString(), completion.choices[0]!.message.content ?? '')
  t.true(content.length > 0 && content.every((e) => e.logprob <= 0 && e.top_logprobs.length === 2))
})
