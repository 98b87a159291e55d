/**
 * `n` on a real llama-server (issue 47): the choices of one Chat request are generations of their own, run at once
 * on the server's slots, each with its own log probabilities, and with a seed each sampled repeatably: choice `i`
 * of a request seeded `s` is what a request with `n: 1` seeded `s + i` gets.
 */
import test from 'ava'
import { LlamaCppEngine } from 'harmony-stream/engines'

import { startGateway } from '../helpers/gateway.mjs'
import { llamaBuildOrSkip, llamaServerForFile } from '../helpers/llama-server.mjs'

const build = llamaBuildOrSkip()
const real = build ? test : test.skip

const server = llamaServerForFile(test, build)

const messages = [{ role: 'user' as const, content: 'Say hello.' }]

/**
 * The bigram model answers `Hello world` for sure; with `Hello` biased down to the logit of every other id, the
 * answer's first id is a draw (then `<|return|>`), so what a choice says is its seed's.
 */
const HELLO = 13225

real('n: 3 through the gateway: three whole choices, usage summed, each choice sampled as its seed says', async (t) => {
  const { client } = await startGateway(t, { engine: new LlamaCppEngine({ url: server().url }) })
  const request = { model: 'gpt-oss', messages, temperature: 1, max_tokens: 24, seed: 41, logit_bias: { [HELLO]: -30 } }
  const several = await client.chat.completions.create({ ...request, n: 3, logprobs: true })
  t.deepEqual(
    several.choices.map((c) => c.index),
    [0, 1, 2],
  )
  // Each choice alone, seeded as the gateway seeds it.
  const alone = await Promise.all([41, 42, 43].map((seed) => client.chat.completions.create({ ...request, seed, logprobs: true })))
  t.deepEqual(
    several.choices.map((c) => [c.message.content, c.finish_reason]),
    alone.map((a) => [a.choices[0]!.message.content, a.choices[0]!.finish_reason]),
  )
  t.deepEqual(
    several.choices.map((c) => c.logprobs?.content?.map((e) => e.token)),
    alone.map((a) => a.choices[0]!.logprobs?.content?.map((e) => e.token)),
  )
  // Three seeds, three draws among the 40 ids llama-server's default top-k keeps of the equal ones: not one
  // answer three times, as three choices of one seed would be.
  t.log(several.choices.map((c) => JSON.stringify(c.message.content)).join(' | '))
  t.true(new Set(several.choices.map((c) => c.message.content)).size > 1)
  t.is(several.usage?.prompt_tokens, alone[0]!.usage?.prompt_tokens)
  t.is(
    several.usage?.completion_tokens,
    alone.reduce((sum, a) => sum + a.usage!.completion_tokens, 0),
  )
})

real('n: 2 streamed from a real llama-server: both choices whole, one usage chunk summed', async (t) => {
  const { client } = await startGateway(t, { engine: new LlamaCppEngine({ url: server().url }) })
  const stream = await client.chat.completions.create({
    model: 'gpt-oss',
    messages,
    temperature: 0,
    max_tokens: 24,
    n: 2,
    stream: true,
    stream_options: { include_usage: true },
  })
  const content = ['', '']
  const finishes: (string | null)[] = [null, null]
  let usage: { prompt_tokens: number; completion_tokens: number } | undefined
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      content[choice.index] += choice.delta.content ?? ''
      finishes[choice.index] = choice.finish_reason ?? finishes[choice.index]!
    }
    if (chunk.usage) usage = chunk.usage
  }
  // Greedy: both choices are the one answer.
  const one = await client.chat.completions.create({ model: 'gpt-oss', messages, temperature: 0, max_tokens: 24 })
  t.deepEqual(content, [one.choices[0]!.message.content ?? '', one.choices[0]!.message.content ?? ''])
  t.deepEqual(finishes, [one.choices[0]!.finish_reason, one.choices[0]!.finish_reason])
  t.is(usage?.prompt_tokens, one.usage?.prompt_tokens)
  t.is(usage?.completion_tokens, 2 * one.usage!.completion_tokens)
})
