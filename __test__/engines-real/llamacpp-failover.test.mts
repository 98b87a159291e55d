/**
 * Failover mid-stream on real llama-servers (issue 45): two servers behind one `EngineGroup`, a greedy stream on
 * the bigram model's endless `walk` chain, and the server that generates it killed (SIGKILL) once the stream is
 * well under way. The other server, prompted with the prompt and the ids generated, goes on: the stream's ids are
 * those of the same request with no fault, and the second server's prompt is the prompt and the ids generated.
 */
import test from 'ava'
import { type Engine, EngineGroup, type EngineStep, type GenerateRequest, LlamaCppEngine } from 'harmony-stream/engines'

import { type LlamaServer, llamaBuildOrSkip, startLlamaServer } from '../helpers/llama-server.mjs'

const build = llamaBuildOrSkip()
const real = build ? test.serial : test.skip

/** Ids read before the kill: the stream is under way, its generation far from done. */
const BEFORE_KILL = 20
/** Long enough that the server is still generating when the reader has read BEFORE_KILL (it waits on the reader). */
const MAX_TOKENS = 600

/** A client of each server (`llamacpp0`, `llamacpp1`), with the prompts each was given. */
function recording(servers: LlamaServer[]): { engines: Engine[]; prompts: number[][][] } {
  const prompts: number[][][] = servers.map(() => [])
  const engines = servers.map((server, i) => {
    const engine = new LlamaCppEngine({ url: server.url })
    return {
      name: `llamacpp${i}`,
      generate: (request: GenerateRequest) => {
        prompts[i]!.push(Array.from(request.tokens))
        return engine.generate(request)
      },
    }
  })
  return { engines, prompts }
}

real(
  'a server killed mid-stream: the other goes on from the prompt and the ids generated, and the ids are the unbroken ones',
  async (t) => {
    const servers = await Promise.all([0, 1].map(() => startLlamaServer(build!, { parallel: 2, ctxSize: 4096 })))
    t.teardown(() => Promise.all(servers.map((server) => server.close())))
    const { start } = servers[0]!.model.chains.walk!
    // Only the prompt's last id matters to the model.
    const prompt = [1000, 2000, 3000, start]
    const { engines, prompts } = recording(servers)
    const served: string[] = []
    const request: GenerateRequest = {
      tokens: prompt,
      maxTokens: MAX_TOKENS,
      temperature: 0,
      onEngine: (name, failure) => served.push(failure === undefined ? name : `${name} failed`),
    }
    const group = new EngineGroup(engines)
    const steps = group.generate(request)[Symbol.asyncIterator]()
    const ids: number[] = []
    const read: EngineStep[] = []
    while (ids.length < BEFORE_KILL) {
      const next = await steps.next()
      if (next.done) break
      read.push(next.value)
      ids.push(...next.value.tokens)
    }
    const first = served[0] === 'llamacpp0' ? 0 : 1
    const victim = servers[first]!
    // Its slot still generating (held back by the reader): the kill cuts the stream.
    t.true(
      (await victim.slots()).some((slot) => slot.is_processing === true),
      'the stream is under way',
    )
    await victim.close()
    for (let next = await steps.next(); !next.done; next = await steps.next()) {
      read.push(next.value)
      ids.push(...next.value.tokens)
    }
    t.deepEqual(served, [`llamacpp${first}`, `llamacpp${first} failed`, `llamacpp${1 - first}`])
    const failover = read.flatMap((step) => step.diagnostics ?? []).find((d) => d.code === 'engine-failover')
    t.like(failover, { code: 'engine-failover', from: `llamacpp${first}`, to: `llamacpp${1 - first}` })
    const carried = (failover as { carried: number }).carried
    t.true(carried >= BEFORE_KILL)
    // The second server was given the prompt and the ids generated before the cut.
    t.deepEqual(prompts[1 - first], [[...prompt, ...ids.slice(0, carried)]])
    // The same request with no fault, on the server that lives: the same ids, the same length and usage.
    const unbroken: number[] = []
    for await (const step of engines[1 - first]!.generate({ tokens: prompt, maxTokens: MAX_TOKENS, temperature: 0 }))
      unbroken.push(...step.tokens)
    t.is(ids.length, MAX_TOKENS)
    t.deepEqual(ids, unbroken)
    t.deepEqual(ids, servers[1 - first]!.model.greedy(start, MAX_TOKENS))
    const last = read.at(-1)!
    t.is(last.finishReason, 'length')
    t.like(last.usage, { promptTokens: prompt.length, completionTokens: MAX_TOKENS })
  },
)

real('twenty streams on two servers, the one holding half of them killed: every stream goes on and ends whole', async (t) => {
  const STREAMS = 20
  // Long enough that no stream is whole in the socket's buffers when its server is killed.
  const LENGTH = 1500
  const servers = await Promise.all([0, 1].map(() => startLlamaServer(build!, { parallel: STREAMS, ctxSize: 2048 * STREAMS })))
  t.teardown(() => Promise.all(servers.map((server) => server.close())))
  const { start } = servers[0]!.model.chains.walk!
  const { engines, prompts } = recording(servers)
  const group = new EngineGroup(engines)
  // Each stream's own prompt (the model reads only its last id): twenty generations the group spreads by load.
  const streams = Array.from({ length: STREAMS }, (_, n) => {
    const served: string[] = []
    const prompt = [1000 + n, 2000 + n, start]
    const request: GenerateRequest = {
      tokens: prompt,
      maxTokens: LENGTH,
      temperature: 0,
      onEngine: (name, failure) => served.push(failure === undefined ? name : `${name} failed`),
    }
    return { prompt, served, steps: group.generate(request)[Symbol.asyncIterator](), ids: [] as number[], read: [] as EngineStep[] }
  })
  // Every stream under way (BEFORE_KILL ids read, its server held back by this reader), then server 0 killed.
  for (const stream of streams)
    while (stream.ids.length < BEFORE_KILL) {
      const next = await stream.steps.next()
      if (next.done) break
      stream.read.push(next.value)
      stream.ids.push(...next.value.tokens)
    }
  const onVictim = streams.filter((stream) => stream.served[0] === 'llamacpp0')
  t.true(onVictim.length > 0 && onVictim.length < STREAMS, `${onVictim.length} of ${STREAMS} streams on the server killed`)
  await servers[0]!.close()
  await Promise.all(
    streams.map(async (stream) => {
      for (let next = await stream.steps.next(); !next.done; next = await stream.steps.next()) {
        stream.read.push(next.value)
        stream.ids.push(...next.value.tokens)
      }
    }),
  )
  const greedy = servers[1]!.model.greedy(start, LENGTH)
  for (const [n, stream] of streams.entries()) {
    // No id lost or repeated: the unbroken greedy walk, whole, with its usage as one generation's.
    t.deepEqual(stream.ids, greedy, `stream ${n}`)
    const last = stream.read.at(-1)!
    t.is(last.finishReason, 'length', `stream ${n}`)
    t.like(last.usage, { promptTokens: stream.prompt.length, completionTokens: LENGTH }, `stream ${n}`)
  }
  // Each stream of the server killed went on on the other, prompted with its prompt and the ids it had generated.
  for (const stream of onVictim) {
    const failover = stream.read.flatMap((step) => step.diagnostics ?? []).find((d) => d.code === 'engine-failover') as
      | { carried: number }
      | undefined
    t.truthy(failover)
    t.true(
      prompts[1]!.some(
        (prompt) => JSON.stringify(prompt) === JSON.stringify([...stream.prompt, ...stream.ids.slice(0, failover!.carried)]),
      ),
    )
    t.deepEqual(stream.served, ['llamacpp0', 'llamacpp0 failed', 'llamacpp1'])
  }
})
