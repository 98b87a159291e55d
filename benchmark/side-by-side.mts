/**
 * Native beside js, case by case: each native case of bench.mts alternates with its js counterpart in one process
 * (run after run, for a time budget per case), and so do the renders of render.mts (cold and with the cache warm).
 * A shared, noisy machine moves absolute numbers between runs and within one; alternating the two on the same
 * inputs and taking the best and the median of many samples keeps their ratio. Prints, per case, tokens/s of
 * each (best of its samples) and native ÷ js (the speed ratio: above 1, native is faster) of the best samples and
 * of the medians.
 *
 *   npm run bench:side-by-side                     every case (BENCH_QUICK=1: the smaller corpora, as bench.mts)
 *   BENCH_FILTER=SsePool npm run bench:side-by-side   only the cases whose name contains the text
 *   BENCH_BUDGET_MS=5000 …                         time per case (default 2,000 ms; at least 10 samples each)
 */
import { RenderCache, renderChatCompletionRequest } from 'harmony-stream'

import {
  concurrentCorpus,
  consumed,
  corpusTokens,
  fastPath,
  objectApi,
  poolCase,
  separateParsersCase,
  spread,
  spreadTokens,
  sseStepCase,
  textCase,
  wireCase,
} from './cases.mjs'
import { agentConversation } from './render.mjs'

type Which = 'native' | 'js'
/** A case: its name, what makes its run for an implementation, and the tokens one run handles. */
type Pair = [name: string, make: (which: Which) => () => void, tokens: number]

const pairs: Pair[] = []
for (const size of [1, 16, 64]) pairs.push([`object API, batch ${size}`, (w) => objectApi(w, size), corpusTokens])
for (const size of [1, 16, 64]) pairs.push([`fast path, batch ${size}`, (w) => fastPath(w, size), corpusTokens])
for (const size of [1, 16]) pairs.push([`fast path, batch ${size}, spread corpus`, (w) => fastPath(w, size, spread), spreadTokens])
for (const size of [1, 16]) {
  for (const api of ['chat', 'responses', 'messages'] as const) {
    pairs.push([`${api} SSE bytes (pushSse), batch ${size}`, (w) => wireCase(api, w, size, true), corpusTokens])
    pairs.push([`${api} events + JSON.stringify, batch ${size}`, (w) => wireCase(api, w, size, false), corpusTokens])
  }
}
for (const size of [1, 8, 64]) pairs.push([`text parser, chunks of ${size} chars`, (w) => textCase(w, size), corpusTokens])
for (const concurrent of [64, 1024]) {
  const { tokens } = concurrentCorpus(concurrent)
  pairs.push([`pool, ${concurrent} streams × 1 token per step`, (w) => poolCase(w, concurrent), tokens])
  pairs.push([`${concurrent} separate parsers × 1 token per step`, (w) => separateParsersCase(w, concurrent), tokens])
  for (const api of ['chat', 'responses'] as const) {
    pairs.push([`SsePool, ${api} SSE, ${concurrent} streams × 1 token per step`, (w) => sseStepCase(api, w, concurrent, true), tokens])
    pairs.push([
      `${concurrent} separate ${api} adapters (pushSse) × 1 token per step`,
      (w) => sseStepCase(api, w, concurrent, false),
      tokens,
    ])
  }
}
{
  const { tokens } = concurrentCorpus(1024, spread)
  pairs.push([
    'SsePool, chat SSE, 1024 streams × 1 token per step, long messages',
    (w) => sseStepCase('chat', w, 1024, true, spread),
    tokens,
  ])
}

/** Rendering, as render.mts: the agent conversation cold (no cache), and with one new user turn, cache warm. */
function renderPairs(): Pair[] {
  const body = { model: 'gpt-oss-120b', ...agentConversation() }
  const options = { currentDate: '2026-01-01', keepAnalysis: true } as const
  const promptTokens = renderChatCompletionRequest(body, { ...options, implementation: 'js', cache: null }).promptTokens
  let turn = 0
  let sink = 0
  const warm = (which: Which) => {
    const cache = new RenderCache()
    renderChatCompletionRequest(body, { ...options, implementation: which, cache })
    return () => {
      // A different user turn each time: exactly one message is new to the cache.
      const next = {
        ...body,
        messages: [...body.messages, { role: 'user', content: `Follow-up question number ${turn++}: and the tests?` }],
      }
      sink += renderChatCompletionRequest(next, { ...options, implementation: which, cache }).promptTokens
    }
  }
  const cold = (which: Which) => () => {
    sink += renderChatCompletionRequest(body, { ...options, implementation: which, cache: null }).promptTokens
  }
  if (sink === 42) console.log('')
  return [
    [`render, first (no cache), ${promptTokens} prompt tokens`, cold, promptTokens],
    [`render, + one new user turn, cache warm (tokens of the whole prompt)`, warm, promptTokens],
  ]
}

const filter = process.env.BENCH_FILTER
const budget = Number(process.env.BENCH_BUDGET_MS ?? 2000)
const chosen = [...pairs, ...renderPairs()].filter(([name]) => filter === undefined || name.includes(filter))
const quantile = (samples: number[], q: number) => samples.slice().sort((a, b) => a - b)[Math.floor((samples.length - 1) * q)]

console.log(`Native beside js, alternating run by run in one process, ${budget} ms a case (best and median of the samples)\n`)
console.log('| case | native M tokens/s | js M tokens/s | native ÷ js (best) | native ÷ js (median) | samples |')
console.log('|---|---:|---:|---:|---:|---:|')
for (const [name, make, tokens] of chosen) {
  const runs = { native: make('native'), js: make('js') }
  for (let i = 0; i < 3; i++) for (const which of ['native', 'js'] as const) runs[which]()
  const times: Record<Which, number[]> = { native: [], js: [] }
  const start = performance.now()
  for (let round = 0; performance.now() - start < budget || round < 10; round++) {
    // Each goes first every other round.
    for (const which of round % 2 === 0 ? (['native', 'js'] as const) : (['js', 'native'] as const)) {
      const t = performance.now()
      runs[which]()
      times[which].push(performance.now() - t)
    }
  }
  const speed = (ms: number) => (tokens / ms / 1000).toFixed(2)
  const best = { native: quantile(times.native, 0), js: quantile(times.js, 0) }
  const median = { native: quantile(times.native, 0.5), js: quantile(times.js, 0.5) }
  console.log(
    `| ${name} | ${speed(best.native)} | ${speed(best.js)} | ${(best.js / best.native).toFixed(2)} | ${(median.js / median.native).toFixed(2)} | ${times.native.length} |`,
  )
}
if (consumed() === 42) console.log('')
