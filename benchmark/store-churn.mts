/**
 * The memory response store's resident size under churn: a store bounded at `maxBytes` is filled past its bound
 * several times over with records of the shapes a gateway keeps (large inputs, many small records, text in several
 * scripts, the token ids of long prompts), with reads between the writes as continuations make them, and the
 * process's peak RSS, heap and external memory above where it started are reported against the bound. Each bound
 * runs in a process of its own (what it measures is that process's memory).
 *
 *   npm run bench:store                       bounds 64 and 256 MiB, each filled 4 times over
 *   npm run bench:store -- --bounds 16,64 --times 8
 *
 * Bounded: a fixed count of bytes put (the bound times `--times`), then the store is closed and the process exits.
 * The records are made from a seeded generator, so that two runs put the same records.
 */
import { spawnSync } from 'node:child_process'

import type { MemoryResponseStore as Store, StoredResponse } from 'harmony-stream/server'

// mulberry32: the same records on every run.
import { random } from '../__test__/helpers/random.mjs'

const MIB = 2 ** 20

function argument(name: string, fallback: string): string {
  const at = process.argv.indexOf(name)
  return at === -1 ? fallback : (process.argv[at + 1] ?? fallback)
}

/**
 * Text of `length` characters from `alphabet`, varied by `next`: a slice of a long text made once per alphabet, so
 * that making a record leaves little garbage of its own (what is measured is the store's).
 */
function text(next: () => number, alphabet: string, length: number): string {
  let corpus = CORPORA.get(alphabet)
  if (corpus === undefined) {
    const letters = [...alphabet]
    const make = random(alphabet.length)
    const parts: string[] = []
    for (let i = 0; i < CORPUS_LENGTH; i++) parts.push(make() < 0.15 ? ' ' : letters[Math.floor(make() * letters.length)]!)
    corpus = parts.join('')
    CORPORA.set(alphabet, corpus)
  }
  // By code units: a slice may split an emoji's surrogate pair, which JSON.stringify escapes as any lone surrogate.
  const units = Math.min(length, corpus.length)
  const start = Math.floor(next() * (corpus.length - units))
  return corpus.slice(start, start + units)
}

const CORPUS_LENGTH = 2_500_000
const CORPORA = new Map<string, string>()

const LATIN = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,;:"\\'
const ACCENTED = 'àâçéèêëîïôûùüÿæœ'
const CJK = '水火木金土日月山川人心手口目耳'
const EMOJI = '🪽🙂🚀🌍🍵🧪📦'

/** The shapes of records, by how often they come: most are small; a few carry very large inputs. */
const SHAPES: { name: string; weight: number; make: (next: () => number, id: string) => StoredResponse }[] = [
  {
    name: 'small',
    weight: 70,
    make: (next, id) =>
      record(id, [text(next, LATIN, 40 + Math.floor(next() * 400))], text(next, LATIN, 20 + Math.floor(next() * 600)), next, 200),
  },
  {
    name: 'multi-byte',
    weight: 15,
    make: (next, id) => {
      const alphabet = [LATIN + ACCENTED, CJK, EMOJI + LATIN][Math.floor(next() * 3)]!
      return record(
        id,
        [text(next, alphabet, 1_000 + Math.floor(next() * 60_000))],
        text(next, alphabet, 200 + Math.floor(next() * 4_000)),
        next,
        2_000,
      )
    },
  },
  {
    name: 'long history',
    weight: 12,
    make: (next, id) => {
      const turns = 5 + Math.floor(next() * 60)
      const inputs = Array.from({ length: turns }, () => text(next, next() < 0.2 ? CJK : LATIN, 50 + Math.floor(next() * 2_000)))
      return record(id, inputs, text(next, LATIN, 100 + Math.floor(next() * 3_000)), next, 20_000)
    },
  },
  {
    name: 'large input',
    weight: 3,
    make: (next, id) =>
      record(
        id,
        [text(next, next() < 0.5 ? LATIN : CJK + LATIN, 200_000 + Math.floor(next() * 1_800_000))],
        text(next, LATIN, 500),
        next,
        60_000,
      ),
  },
]

/** A record as keep.ts makes one: the response object, its input items with ids, the prompt's and the output's ids. */
function record(id: string, inputs: string[], answer: string, next: () => number, promptIds: number): StoredResponse {
  const ids = (count: number) => Array.from({ length: count }, () => Math.floor(next() * 201_088))
  return {
    id,
    createdAt: 1_700_000_000,
    response: {
      id,
      object: 'response',
      created_at: 1_700_000_000,
      status: 'completed',
      model: 'gpt-oss',
      output: [
        { id: `rs_${id}`, type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text: answer.slice(0, 200) }] },
        {
          id: `msg_${id}`,
          type: 'message',
          role: 'assistant',
          status: 'completed',
          content: [{ type: 'output_text', text: answer, annotations: [] }],
        },
      ],
      usage: { input_tokens: promptIds, output_tokens: 100, total_tokens: promptIds + 100 },
    },
    input: inputs.map((content, i) => ({
      id: `msg_${id}_${i}`,
      type: 'message',
      role: i % 2 ? 'assistant' : 'user',
      content: [{ type: 'input_text', text: content }],
    })),
    promptTokens: ids(promptIds),
    outputTokens: ids(100 + Math.floor(next() * 400)),
  }
}

/** About the bytes of a record's JSON (its texts, and about 7 bytes an id), without serialising it again. */
function roughSize(record: StoredResponse): number {
  const texts = (record.input as { content: { text: string }[] }[]).reduce((sum, item) => sum + item.content[0]!.text.length, 0)
  const ids = (record.promptTokens?.length ?? 0) + (record.outputTokens?.length ?? 0)
  return texts + ids * 7 + 1_000
}

interface Measured {
  boundMiB: number
  putMiB: number
  records: number
  counted: number
  peakRss: number
  peakHeap: number
  peakExternal: number
  settledRss: number
  settledHeapAndExternal: number
}

/**
 * Puts records of `only` (or every shape, `mixed`) until `times` the bound was put, reading some back. `control`:
 * the same records made and serialised as the store would, none kept: what the run costs without a store.
 */
async function churn(boundMiB: number, times: number, seed: number, only: string, control: boolean): Promise<Measured> {
  const { MemoryResponseStore } = (await import('harmony-stream/server')) as { MemoryResponseStore: typeof Store }
  const gc = (globalThis as { gc?: () => void }).gc
  if (gc === undefined) throw new Error('run with --expose-gc')
  const settle = () => {
    for (let i = 0; i < 4; i++) gc()
  }
  const next = random(seed)
  const shapes = only === 'mixed' ? SHAPES : SHAPES.filter((s) => s.name === only)
  if (shapes.length === 0) throw new Error(`no shape ${only}: ${SHAPES.map((s) => s.name).join(', ')}`)
  const total = shapes.reduce((sum, shape) => sum + shape.weight, 0)
  const shape = () => {
    let pick = next() * total
    for (const s of shapes) if ((pick -= s.weight) < 0) return s
    return shapes[0]!
  }
  // Made before the baseline: the texts records are cut from, and the first records' code paths, are no part of the store.
  for (const alphabet of [LATIN, LATIN + ACCENTED, CJK, EMOJI + LATIN, CJK + LATIN]) text(next, alphabet, 1)
  for (let i = 0; i < 50; i++) JSON.stringify(shape().make(next, 'resp_warm'))
  settle()
  const before = process.memoryUsage()
  const store = control
    ? {
        put: async (record: StoredResponse) => void Buffer.byteLength(JSON.stringify(record), 'utf8'),
        get: async (_id: string) => null,
        stats: { bytes: 0 },
        close: async () => {},
      }
    : new MemoryResponseStore({ maxBytes: boundMiB * MIB, maxEntries: 1_000_000 })
  let peakRss = 0
  let peakHeap = 0
  let peakExternal = 0
  const sample = () => {
    const now = process.memoryUsage()
    peakRss = Math.max(peakRss, now.rss - before.rss)
    peakHeap = Math.max(peakHeap, now.heapUsed - before.heapUsed)
    peakExternal = Math.max(peakExternal, now.external - before.external)
  }
  let put = 0
  let records = 0
  const recent: string[] = []
  while (put < times * boundMiB * MIB) {
    const id = `resp_${records++}`
    const kept = shape().make(next, id)
    put += roughSize(kept)
    await store.put(kept)
    recent.push(id)
    if (recent.length > 64) recent.shift()
    // A continuation reads a response it follows: parsed back whole, then dropped.
    if (next() < 0.3) await store.get(recent[Math.floor(next() * recent.length)]!)
    sample()
  }
  sample()
  settle()
  const after = process.memoryUsage()
  const counted = store.stats.bytes
  await store.close()
  return {
    boundMiB,
    putMiB: put / MIB,
    records,
    counted,
    peakRss,
    peakHeap,
    peakExternal,
    settledRss: after.rss - before.rss,
    settledHeapAndExternal: after.heapUsed + after.external - before.heapUsed - before.external,
  }
}

if (process.argv.includes('--child')) {
  const measured = await churn(
    Number(argument('--bound', '64')),
    Number(argument('--times', '4')),
    Number(argument('--seed', '1')),
    argument('--only', 'mixed'),
    process.argv.includes('--control'),
  )
  process.stdout.write(`${JSON.stringify(measured)}\n`)
} else {
  const bounds = argument('--bounds', '64,256').split(',').map(Number)
  const times = argument('--times', '4')
  const shapes = argument('--shapes', ['mixed', ...SHAPES.map((s) => s.name)].join(',')).split(',')
  const child = (bound: number, only: string, control: boolean): Measured => {
    const args = ['--child', '--bound', String(bound), '--times', times, '--only', only, ...(control ? ['--control'] : [])]
    const run = spawnSync(
      process.execPath,
      ['--expose-gc', '--import', 'tsx', '--conditions=harmony-stream-source', import.meta.filename, ...args],
      {
        encoding: 'utf8',
        maxBuffer: 1 << 20,
      },
    )
    if (run.status !== 0) throw new Error(`the run ${args.join(' ')} failed: ${run.stderr}`)
    return JSON.parse(run.stdout) as Measured
  }
  const mib = (bytes: number) => `${(bytes / MIB).toFixed(0)} MiB`
  console.log(`Memory response store under churn: each bound filled about ${times} times over (node ${process.version})`)
  console.log('"without": the same records made and serialised, none kept (what the run itself costs).\n')
  console.log(
    '| bound | records | kept at the end | peak RSS over start | peak RSS / bound | without the store | peak heap | peak external | RSS after GC |',
  )
  console.log('|---|---|---|---|---|---|---|---|---|')
  for (const bound of bounds)
    for (const only of shapes) {
      const m = child(bound, only, false)
      const without = child(bound, only, true)
      console.log(
        `| ${bound} MiB | ${only}: ${m.records} | ${mib(m.counted)} | ${mib(m.peakRss)} | ${(m.peakRss / (bound * MIB)).toFixed(2)}× | ${mib(without.peakRss)} | ${mib(m.peakHeap)} | ${mib(m.peakExternal)} | ${mib(m.settledRss)} |`,
      )
    }
}
