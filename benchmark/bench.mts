/**
 * The benchmark suite (benny): replays a seeded corpus of generated completions (reasoning, preambles,
 * tool calls, multilingual text; see __test__/helpers/generator.mts) through each parser at several batch
 * sizes, one case = the whole corpus once. Prints a table of tokens/s and ratios measured in this run, and
 * saves benny's JSON and chart under benchmark/results/.
 *
 *   npm run bench                 all cases
 *   BENCH_QUICK=1 npm run bench   fewer samples (a smoke run)
 *   BENCH_FILTER=SsePool npm run bench   only the cases whose name contains the text (and the reference)
 *   npm run bench:render          only the rendering part (benchmark/render.mts)
 */
import { execFileSync } from 'node:child_process'
import { cpus, totalmem } from 'node:os'
import { join } from 'node:path'

import b from 'benny'
import { compactCapacity, HarmonyStreamParser, implementation } from 'harmony-stream'

import { loadReference } from '../__test__/helpers/reference-wasm.mjs'
import {
  BATCHES,
  batched,
  concurrentCorpus,
  consume,
  consumed,
  corpus,
  corpusTokens,
  fastPath,
  objectApi,
  poolCase,
  quick,
  resultsRebuilt,
  STREAM_LENGTH,
  separateParsersCase,
  spread,
  spreadTokens,
  sseStepCase,
  textCase,
  wireCase,
} from './cases.mjs'
import { distinctIds } from './corpora.mjs'
import { NaiveParser } from './naive.mjs'
import { runRenderBenchmark } from './render.mjs'

const options = quick ? { minSamples: 3, maxTime: 0.5 } : { minSamples: 5, maxTime: 3 }

const reference = await loadReference()
function referenceCase(): () => void {
  return () => {
    for (const stream of corpus) consume(reference.stream(stream.tokens, 'assistant').deltas.length)
  }
}

function naiveCase(size: number): () => void {
  const streams = batched(size, false) as number[][][]
  return () => {
    for (const stream of streams) {
      const parser = new NaiveParser()
      parser.push([200006, 173781]) // the prompt's <|start|>assistant
      for (const tokens of stream) consume(parser.push(tokens).length)
    }
  }
}

const cases: [string, () => void, number][] = [['reference (openai-harmony WASM), token by token', referenceCase(), corpusTokens]]
for (const size of BATCHES) {
  cases.push([`native object API, batch ${size}`, objectApi('native', size), corpusTokens])
  cases.push([`js object API, batch ${size}`, objectApi('js', size), corpusTokens])
  // Made only when it runs: recording the results runs the js parser over the corpus, which warms it up and
  // keeps them alive, changing what the cases after it measure.
  const floor = `object API results rebuilt, no parsing (floor), batch ${size}`
  if ((size === 1 || size === 16) && (process.env.BENCH_FILTER === undefined || floor.includes(process.env.BENCH_FILTER)))
    cases.push([floor, resultsRebuilt(size), corpusTokens])
  cases.push([`native fast path, batch ${size}`, fastPath('native', size), corpusTokens])
  cases.push([`js fast path, batch ${size}`, fastPath('js', size), corpusTokens])
  cases.push([`naive regex baseline, batch ${size}`, naiveCase(size), corpusTokens])
}
for (const size of [1, 16]) {
  cases.push([`native fast path, batch ${size}, spread corpus`, fastPath('native', size, spread), spreadTokens])
  cases.push([`js fast path, batch ${size}, spread corpus`, fastPath('js', size, spread), spreadTokens])
}
for (const size of [1, 16]) {
  for (const api of ['chat', 'responses', 'messages'] as const) {
    for (const which of ['native', 'js'] as const) {
      cases.push([`${which} ${api} SSE bytes (pushSse), batch ${size}`, wireCase(api, which, size, true), corpusTokens])
      cases.push([`${which} ${api} events + JSON.stringify, batch ${size}`, wireCase(api, which, size, false), corpusTokens])
    }
  }
}
for (const size of [1, 8, 64]) {
  cases.push([`native text parser, chunks of ${size} chars`, textCase('native', size), corpusTokens])
  cases.push([`js text parser, chunks of ${size} chars`, textCase('js', size), corpusTokens])
}
for (const concurrent of [64, 1024]) {
  const { tokens } = concurrentCorpus(concurrent)
  cases.push([`native pool, ${concurrent} streams × 1 token per step`, poolCase('native', concurrent), tokens])
  cases.push([`js pool, ${concurrent} streams × 1 token per step`, poolCase('js', concurrent), tokens])
  cases.push([`js, ${concurrent} separate parsers × 1 token per step`, separateParsersCase('js', concurrent), tokens])
  cases.push([`native, ${concurrent} separate parsers × 1 token per step`, separateParsersCase('native', concurrent), tokens])
}
for (const concurrent of [64, 1024]) {
  const { tokens } = concurrentCorpus(concurrent)
  for (const api of ['chat', 'responses'] as const) {
    cases.push([
      `native SsePool, ${api} SSE, ${concurrent} streams × 1 token per step`,
      sseStepCase(api, 'native', concurrent, true),
      tokens,
    ])
    cases.push([`js SsePool, ${api} SSE, ${concurrent} streams × 1 token per step`, sseStepCase(api, 'js', concurrent, true), tokens])
    cases.push([
      `js, ${concurrent} separate ${api} adapters (pushSse) × 1 token per step`,
      sseStepCase(api, 'js', concurrent, false),
      tokens,
    ])
    cases.push([
      `native, ${concurrent} separate ${api} adapters (pushSse) × 1 token per step`,
      sseStepCase(api, 'native', concurrent, false),
      tokens,
    ])
  }
}
{
  // Long messages (the spread corpus: one final answer of ~600 characters per completion), as real
  // completions have them: message boundaries, which the adapters serve themselves, are rarer.
  const { tokens } = concurrentCorpus(1024, spread)
  cases.push([
    'native SsePool, chat SSE, 1024 streams × 1 token per step, long messages',
    sseStepCase('chat', 'native', 1024, true, spread),
    tokens,
  ])
  cases.push([
    'js SsePool, chat SSE, 1024 streams × 1 token per step, long messages',
    sseStepCase('chat', 'js', 1024, true, spread),
    tokens,
  ])
  cases.push([
    'js, 1024 separate chat adapters (pushSse) × 1 token per step, long messages',
    sseStepCase('chat', 'js', 1024, false, spread),
    tokens,
  ])
}
// BENCH_FILTER=text: only the cases whose name contains it (the reference always runs: ratios need it).
const filter = process.env.BENCH_FILTER
if (filter) cases.splice(0, cases.length, ...cases.filter(([name], i) => i === 0 || name.includes(filter)))
const tokensOf = new Map(cases.map(([name, , tokens]) => [name, tokens]))

interface Result {
  name: string
  ops: number
  margin: number
}

const summary = await b.suite(
  `harmony-stream parsers: ${corpus.length} completions, ${corpusTokens} tokens per run`,
  ...cases.map(([name, fn]) => b.add(name, fn, options)),
  b.cycle(),
  b.complete(),
  // A filtered run leaves the saved results of the whole suite as they are.
  ...(filter ? [] : [b.save({ file: 'parsers', folder: join(import.meta.dirname, 'results'), version: '1', details: false })]),
  ...(filter ? [] : [b.save({ file: 'parsers', folder: join(import.meta.dirname, 'results'), format: 'chart.html' })]),
)

const results = summary.results as unknown as Result[]
const tokensPerSecond = (r: Result) => r.ops * tokensOf.get(r.name)!
const byName = new Map(results.map((r) => [r.name, r]))
const ref = tokensPerSecond(byName.get('reference (openai-harmony WASM), token by token')!)
console.log(
  `\nMachine: ${cpus().length} × ${cpus()[0]?.model}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}; default implementation: ${implementation}`,
)
console.log(
  `Spread corpus: ${spread.length} completions, ${spreadTokens} tokens, ${distinctIds(spread)} distinct ids (the generated corpus: ${distinctIds(corpus)})`,
)
console.log(
  `Corpus: ${corpus.length} completions, ${corpusTokens} tokens (seed 4); pools: every stream gets a token in every step, ${STREAM_LENGTH} steps (stream i replays completions i, i+1, … back to back)\n`,
)
console.log('| case | M tokens/s | ns/token | × reference | × js counterpart |')
console.log('|---|---:|---:|---:|---:|')
/** The js case a native (or pool) case is compared with, measured in this same run. */
function counterpart(name: string): string | undefined {
  if (name.startsWith('native ') && !name.includes('separate')) return name.replace(/^native /, 'js ')
  const pool = /^js pool, (\d+) streams/.exec(name)
  if (pool) return `js, ${pool[1]} separate parsers × 1 token per step`
  const ssePool = /^js SsePool, (\w+) SSE, (\d+) streams × 1 token per step(.*)$/.exec(name)
  if (ssePool) return `js, ${ssePool[2]} separate ${ssePool[1]} adapters (pushSse) × 1 token per step${ssePool[3]}`
  if (name.startsWith('native, ')) return name.replace(/^native, /, 'js, ')
  return undefined
}
for (const r of results) {
  const tps = tokensPerSecond(r)
  const other = counterpart(r.name)
  const js = other ? byName.get(other) : undefined
  const vsJs = js ? (tps / tokensPerSecond(js)).toFixed(2) : ''
  console.log(`| ${r.name} | ${(tps / 1e6).toFixed(2)} | ${(1e9 / tps).toFixed(1)} | ${(tps / ref).toFixed(1)} | ${vsJs} |`)
}
const nativePool = byName.get('native pool, 1024 streams × 1 token per step')
const jsSeparate = byName.get('js, 1024 separate parsers × 1 token per step')
if (nativePool && jsSeparate) {
  console.log(
    `\nnative pool (1024 streams) vs js driving 1024 separate parsers: ${(tokensPerSecond(nativePool) / tokensPerSecond(jsSeparate)).toFixed(2)}×`,
  )
}
const ssePool = byName.get('native SsePool, chat SSE, 1024 streams × 1 token per step')
const jsAdapters = byName.get('js, 1024 separate chat adapters (pushSse) × 1 token per step')
if (ssePool && jsAdapters) {
  console.log(
    `native SsePool (1024 chat streams) vs js driving 1024 separate adapters: ${(tokensPerSecond(ssePool) / tokensPerSecond(jsAdapters)).toFixed(2)}×`,
  )
}
// A filtered run ends here: what follows measures fixed costs outside the cases.
if (filter) process.exit(0)
// The fixed cost of one call: a parser inside a message fed one content token per call, the median of 5
// samples of 200,000 calls (the corpus cases above also pay for parser creation and message boundaries).
const word = Uint32Array.of(13225) // " word"-like ordinary token
for (const which of ['native', 'js'] as const) {
  const perCall = (setup: (parser: HarmonyStreamParser) => unknown, run: (parser: HarmonyStreamParser) => number) => {
    const parser = new HarmonyStreamParser({ implementation: which })
    setup(parser)
    const samples: number[] = []
    for (let s = 0; s < 5; s++) {
      const t = performance.now()
      for (let i = 0; i < 200_000; i++) consume(run(parser))
      samples.push(((performance.now() - t) * 1e6) / 200_000)
    }
    return samples.sort((a, b) => a - b)[2].toFixed(0)
  }
  const out = new Uint32Array(compactCapacity(4))
  const start = Uint32Array.of(200005, 17196, 200008) // <|channel|>final<|message|>
  const fast = perCall(
    (p) => p.pushCompact(start, out),
    (p) => p.pushCompact(word, out).length,
  )
  const objects = perCall(
    (p) => p.push(start),
    (p) => p.push(word).segments.length,
  )
  console.log(`${which}: one call with one token, inside a message: fast path ${fast} ns, object API ${objects} ns`)
}

// Costs outside the hot path, each measured in a fresh process so that nothing is cached.
const probe = (which: string, code: string) =>
  execFileSync(process.execPath, ['--expose-gc', '-e', code], {
    encoding: 'utf8',
    env: { ...process.env, HARMONY_STREAM_IMPL: which },
  }).trim()
for (const which of ['native', 'js']) {
  const load = probe(
    which,
    `const { HarmonyStreamParser } = require('harmony-stream'); const t = performance.now(); new HarmonyStreamParser(); console.log((performance.now() - t).toFixed(1))`,
  )
  const idle = probe(
    which,
    `const { HarmonyStreamParser } = require('harmony-stream'); new HarmonyStreamParser(); global.gc()
     const before = process.memoryUsage(); const keep = []
     for (let i = 0; i < 10000; i++) keep.push(new HarmonyStreamParser())
     global.gc(); const after = process.memoryUsage()
     console.log(((after.rss - before.rss) / 10000).toFixed(0) + ' ' + ((after.heapUsed - before.heapUsed) / 10000).toFixed(0) + ' ' + (after.rss / 2 ** 20).toFixed(0) + ' ' + keep.length)`,
  ).split(' ')
  console.log(
    `${which}: vocabulary load + first parser ${load} ms; 10,000 idle parsers: ${idle[0]} B rss and ${idle[1]} B JS heap each, process rss ${idle[2]} MiB`,
  )
}
runRenderBenchmark(quick ? 3 : 9)
if (consumed() === 42) console.log('')
