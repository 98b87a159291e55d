/**
 * The gateway end to end over HTTP, as a user feels it: the example gateway on 127.0.0.1 with the replay
 * engine, N concurrent streaming Chat Completions clients (64 and 512) at stream intervals 1 and 4; tokens/s
 * delivered, time to first byte, the gap between chunks (p50/p99), and the gateway's CPU and GC per 1M tokens;
 * native vs js parser, SSE bytes from the adapters vs events serialized, 1 and 2 worker processes, and the
 * example gateway as it was before this work (commit 75dfbe6's server.mjs, run on this build) as the baseline,
 * and the floor under them all: a bare node:http server making the same writes (http-floor-server.mjs).
 * Bounded: every client makes a fixed number of requests; the whole run stops by itself.
 *
 *   npm run bench:gateway                 all cases (a few minutes)
 *   BENCH_QUICK=1 npm run bench:gateway   fewer cases
 *   BENCH_FILTER=text                     only the cases whose name contains the text
 *   BENCH_TOOLS=1                         each request offers a function, as an agent's do (its answers then go
 *                                         through the recovery of tool calls written as text)
 */
import { execFileSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'

import { cpuMs, type Delivery, deliveryPercentiles, replayFile, startGatewayProcess, streamingPost } from './gateway-process.mjs'

const root = join(import.meta.dirname, '..')
const quick = process.env.BENCH_QUICK === '1'

/** The example gateway before this work, extracted from git, to run on the current build (same library). */
function baselineServer(): string | null {
  try {
    const source = execFileSync('git', ['show', '75dfbe6:examples/gateway/server.mjs'], { cwd: root, encoding: 'utf8' })
    const path = join(root, 'examples', 'gateway', '.baseline-server.mjs')
    writeFileSync(path, source)
    return path
  } catch {
    return null
  }
}

interface Case {
  name: string
  server: string
  env: Record<string, string>
  concurrency: number
  interval: number
}

interface Result {
  tokensPerSecond: number
  ttfbP50: number
  gapP50: number
  gapP99: number
  cpuMsPerMillion: number
  gcMsPerMillion: number | null
}

function get(port: number, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path }, (res) => {
      let text = ''
      res
        .setEncoding('utf8')
        .on('data', (c) => (text += c))
        .on('end', () => resolve(text))
    })
      .on('error', reject)
      .end()
  })
}

/** One streaming Chat Completions request: its completion tokens (from usage), TTFB and chunk gaps. */
const TOOLS =
  process.env.BENCH_TOOLS === '1'
    ? [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }]
    : undefined

function stream(port: number): Promise<Delivery> {
  const body = {
    model: 'gpt-oss',
    messages: [{ role: 'user', content: 'hi' }],
    ...(TOOLS === undefined ? {} : { tools: TOOLS }),
    stream: true,
    stream_options: { include_usage: true },
  }
  return streamingPost(port, '/v1/chat/completions', body, /"completion_tokens":(\d+)/)
}

async function run(c: Case, replay: string): Promise<Result> {
  const { child, port } = await startGatewayProcess(
    { HARMONY_REPLAY: replay, STREAM_INTERVAL: String(c.interval), GATEWAY_STATS: '1', ...c.env },
    c.server,
  )
  try {
    // Workers each print a line; give them a moment, then warm up.
    await new Promise((resolve) => setTimeout(resolve, 300))
    await Promise.all(Array.from({ length: 8 }, () => stream(port)))
    const stats = async () => (c.env.GATEWAY_WORKERS === '2' || c.server !== server ? null : JSON.parse(await get(port, '/stats')))
    const before = await stats()
    const cpuBefore = cpuMs(child.pid!)
    const requestsPerClient = quick ? 2 : 3
    const started = performance.now()
    const results = await Promise.all(
      Array.from({ length: c.concurrency }, async () => {
        const mine = []
        for (let i = 0; i < requestsPerClient; i++) mine.push(await stream(port))
        return mine
      }),
    )
    const seconds = (performance.now() - started) / 1000
    const cpu = cpuMs(child.pid!) - cpuBefore
    const after = await stats()
    const flat = results.flat()
    const tokens = flat.reduce((n, r) => n + r.tokens, 0)
    return {
      tokensPerSecond: tokens / seconds,
      ...deliveryPercentiles(flat),
      cpuMsPerMillion: (cpu / tokens) * 1e6,
      gcMsPerMillion: before && after ? ((after.gcMs - before.gcMs) / tokens) * 1e6 : null,
    }
  } finally {
    child.kill('SIGTERM')
  }
}

const replay = replayFile()
const server = join(root, 'examples', 'gateway', 'server.mjs')
const baseline = baselineServer()
// Not a gateway: Node's own cost of the same turns and writes, with nothing parsed or built (its header says why).
const floor = join(root, 'benchmark', 'http-floor-server.mjs')
const cases: Case[] = []
for (const concurrency of quick ? [64] : [64, 512]) {
  for (const interval of quick ? [1] : [1, 4]) {
    cases.push({ name: 'floor: bare node:http, one prebuilt frame a step (no gateway)', server: floor, env: {}, concurrency, interval })
    if (baseline)
      cases.push({
        name: 'before this work (75dfbe6 gateway), native',
        server: baseline,
        env: { HARMONY_STREAM_IMPL: 'native' },
        concurrency,
        interval,
      })
    for (const impl of ['native', 'js']) {
      cases.push({ name: `${impl}, SSE bytes from the adapters`, server, env: { HARMONY_STREAM_IMPL: impl }, concurrency, interval })
      cases.push({
        name: `${impl}, events + JSON.stringify`,
        server,
        env: { HARMONY_STREAM_IMPL: impl, GATEWAY_FRAMES: 'objects' },
        concurrency,
        interval,
      })
    }
    cases.push({
      name: 'native, SSE bytes, writes coalesced 5 ms',
      server,
      env: { HARMONY_STREAM_IMPL: 'native', SSE_COALESCE_MS: '5' },
      concurrency,
      interval,
    })
    cases.push({
      name: 'js, SSE bytes, writes coalesced 5 ms',
      server,
      env: { HARMONY_STREAM_IMPL: 'js', SSE_COALESCE_MS: '5' },
      concurrency,
      interval,
    })
    cases.push({
      name: 'native, SSE bytes, 2 workers',
      server,
      env: { HARMONY_STREAM_IMPL: 'native', GATEWAY_WORKERS: '2' },
      concurrency,
      interval,
    })
    cases.push({
      name: 'native, SSE bytes, 2 workers, coalesced 5 ms',
      server,
      env: { HARMONY_STREAM_IMPL: 'native', GATEWAY_WORKERS: '2', SSE_COALESCE_MS: '5' },
      concurrency,
      interval,
    })
  }
}

console.log(
  `Gateway over HTTP on 127.0.0.1: replay engine, completions of ~1,000 tokens, Chat Completions streaming${TOOLS === undefined ? '' : ', a function offered'}; one run, cases side by side\n`,
)
console.log(
  '| clients | interval | case | k tokens/s | TTFB p50 ms | chunk gap p50 / p99 ms | CPU ms per 1M tokens | GC ms per 1M tokens |',
)
console.log('|---:|---:|---|---:|---:|---:|---:|---:|')
for (const c of cases) {
  if (process.env.BENCH_FILTER !== undefined && !c.name.includes(process.env.BENCH_FILTER)) continue
  const r = await run(c, replay)
  console.log(
    `| ${c.concurrency} | ${c.interval} | ${c.name} | ${(r.tokensPerSecond / 1000).toFixed(1)} | ${r.ttfbP50.toFixed(1)} | ${r.gapP50.toFixed(2)} / ${r.gapP99.toFixed(2)} | ${r.cpuMsPerMillion.toFixed(0)} | ${r.gcMsPerMillion === null ? '' : r.gcMsPerMillion.toFixed(0)} |`,
  )
}
if (baseline) execFileSync('rm', ['-f', baseline])
