/**
 * harmony-stream's gateway beside its peers, side by side on one machine and load: LiteLLM's proxy and SMG (the
 * Shepherd Model Gateway, the Rust router of the SGLang lineage, in HTTP mode), each in front of an engine
 * stand-in over HTTP (engine-stand-in.mts, its own process) streaming the same gpt-oss completion, one token per
 * engine step, to the same streaming Chat Completions clients. The gateway (native parser and js parser, one
 * process each) reads vLLM's token stream (`/v1/completions` with token ids) and parses the Harmony itself;
 * LiteLLM and SMG read the chunks vLLM's own server sends once it has parsed the Harmony
 * (`/v1/chat/completions`), which is how they serve gpt-oss over HTTP. Reported, per proxy and case: the CPU
 * each proxy process (with its children and threads) spent per streamed token, tokens/s, time to the first chunk
 * of the stream (TTFC) and the gaps between chunks. Bounded: every client makes a fixed number of requests, and
 * everything started is stopped.
 *
 * LiteLLM and SMG come from PyPI into a virtualenv this benchmark makes once under ~/.cache/harmony-stream,
 * pinned with their dependencies in benchmark/peers-requirements.txt (LiteLLM with one worker and its model
 * price map read from the package rather than fetched; SMG's router with the stand-in as its one worker).
 *
 *   npm run bench:peers                          3 rounds of 16 clients × 3 requests, 64 × 2, and 16 × 40 of 32 tokens
 *   PEERS_ROUNDS=1 npm run bench:peers            one round
 *   PEERS_CASES=64x2 npm run bench:peers          one case (clients x requests per client, comma-separated)
 *   PEERS_CASES=16x40x32 npm run bench:peers      …each request cut at 32 tokens (max_tokens): an agent's short turns
 *   PEERS_PROXIES=native,smg npm run bench:peers  some proxies only (native, js, litellm, smg)
 *
 * Within a round every case runs each proxy in turn, and the order of the proxies turns by one each round, so
 * that all meet the same moments of a shared machine.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { homedir, loadavg } from 'node:os'
import { join } from 'node:path'

import { freePort } from '../__test__/helpers/free-port.mjs'
import { deliveryPercentiles, percentile, replayFile, streamingPost } from './gateway-process.mjs'

const root = join(import.meta.dirname, '..')
const venv = join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'harmony-stream', 'peers-venv')
const requirements = join(root, 'benchmark', 'peers-requirements.txt')

/** The virtualenv with LiteLLM and SMG, made (or remade, when the requirements changed) here. */
function peersVenv(): string {
  const stamp = join(venv, 'requirements.txt')
  const wanted = readFileSync(requirements, 'utf8')
  if (!existsSync(stamp) || readFileSync(stamp, 'utf8') !== wanted) {
    console.log(`making ${venv} (litellm and smg from PyPI, once)`)
    execFileSync('python3', ['-m', 'venv', '--clear', venv], { stdio: 'inherit' })
    execFileSync(join(venv, 'bin', 'pip'), ['install', '--quiet', '-r', requirements], { stdio: 'inherit' })
    writeFileSync(stamp, wanted)
  }
  return join(venv, 'bin')
}

/** The version `name` is pinned at in the requirements, for the tables. */
function pinned(name: string): string {
  const found = new RegExp(`^${name}==(\\S+)$`, 'mi').exec(readFileSync(requirements, 'utf8'))
  if (!found) throw new Error(`${requirements} pins no ${name}`)
  return found[1]!
}

/** Starts `command` and resolves with it once a line of its output matches `ready` (its first group, if any). */
function start(
  command: string,
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
): Promise<{ child: ChildProcess; match: string }> {
  const child = spawn(command, args, { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  return new Promise((resolve, reject) => {
    let out = ''
    let done = false
    const look = (data: Buffer) => {
      // Once ready, the output is still read (a full pipe would stall the child) but no longer kept or searched.
      if (done) return
      out += data
      const found = ready.exec(out)
      if (found) {
        done = true
        out = ''
        resolve({ child, match: found[1] ?? found[0] })
      }
    }
    child.stdout!.on('data', look)
    child.stderr!.on('data', look)
    child.on('exit', (code) => reject(new Error(`${command} exited (${code}) before it was ready:\n${out.slice(-2000)}`)))
  })
}

/** CPU milliseconds of `pid` (all its threads) and every process under it (Linux /proc; clock ticks of 10 ms). */
function treeCpuMs(pid: number): number {
  let total = 0
  const children = new Map<number, number[]>()
  for (const entry of execFileSync('ps', ['-e', '-o', 'pid=,ppid='], { encoding: 'utf8' }).trim().split('\n')) {
    const [child, parent] = entry.trim().split(/\s+/).map(Number)
    children.set(parent, [...(children.get(parent) ?? []), child])
  }
  const visit = (id: number) => {
    try {
      const fields = readFileSync(`/proc/${id}/stat`, 'utf8').split(') ')[1].split(' ')
      total += (Number(fields[11]) + Number(fields[12])) * 10
    } catch {
      return // gone meanwhile
    }
    for (const child of children.get(id) ?? []) visit(child)
  }
  visit(pid)
  return total
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
  await exited
  clearTimeout(timer)
}

interface Proxy {
  key: string
  name: string
  port: number
  pid: number
  /** The stand-in it reads from, whose CPU is shown beside its own: both share the machine's cores. */
  enginePid: number
}

interface Case {
  clients: number
  requests: number
  /** Each request's `max_tokens` (the completion cut there), or null: the whole completion. */
  maxTokens: number | null
}

/** How a case is named in the output: `16 × 3`, or `16 × 40 × 32 tokens`. */
function caseName({ clients, requests, maxTokens }: Case): string {
  return `${clients} × ${requests}${maxTokens === null ? '' : ` × ${maxTokens} tokens`}`
}

interface Row {
  proxy: string
  round: number
  case: string
  tokensPerSecond: number
  cpuUsPerToken: number
  engineCpuUsPerToken: number
  ttfbP50: number
  gapP50: number
  gapP99: number
}

/** Waves of warm-up requests before each measurement (`load`). */
const WARM_UP_WAVES = 3
/** Short requests (`max_tokens` 32), 16 at a time, that warm the path of beginning and ending a request first. */
const WARM_UP_SHORT_REQUESTS = 512

/** `clients` streaming clients, `requests` each, against `proxy`. */
async function load(proxy: Proxy, round: number, each: Case, completionTokens: number): Promise<Row> {
  const { clients, requests, maxTokens } = each
  const tokens = maxTokens === null ? completionTokens : Math.min(maxTokens, completionTokens)
  const body = {
    model: 'gpt-oss',
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    ...(maxTokens === null ? {} : { max_tokens: maxTokens }),
  }
  // Each stream's tokens as its usage says: a request that failed (no usage) fails the benchmark.
  const usage = /"completion_tokens":(\d+)/
  // Warm up: waves of as many requests at once as the case has clients, so that the measurement pays neither a
  // first request's costs nor, for the gateway, V8 compiling its hot paths (one request left the first case's CPU
  // per token 1.3-1.7x the second's: the same load, the code not yet optimised; one wave left beginning a request
  // at about 2 ms, where warm V8 code takes 0.6: docs/PERFORMANCE.md), that path first by short requests, which
  // take little time. A gateway serves warm for hours; every proxy gets the same.
  const post = (request: object) => streamingPost(proxy.port, '/v1/chat/completions', request, usage)
  const wave = (size: number, request: object) => Promise.all(Array.from({ length: size }, () => post(request)))
  const short = { ...body, max_tokens: 32 }
  for (let i = 0; i < WARM_UP_SHORT_REQUESTS / 16; i++) await wave(16, short)
  for (let i = 0; i < WARM_UP_WAVES; i++) await wave(clients, body)
  const cpu = treeCpuMs(proxy.pid)
  const engineCpu = treeCpuMs(proxy.enginePid)
  const started = performance.now()
  const deliveries = await Promise.all(
    Array.from({ length: clients }, async () => {
      const mine = []
      for (let i = 0; i < requests; i++) mine.push(await post(body))
      return mine
    }),
  )
  const seconds = (performance.now() - started) / 1000
  const all = deliveries.flat()
  // A proxy may count the tokens again itself: a stream counts as delivered when it ended with a usage chunk.
  const failed = all.filter((d) => d.tokens === 0).length
  if (failed > 0) throw new Error(`${proxy.name}: ${failed} of ${all.length} streams failed (no usage chunk at their end)`)
  const streamed = clients * requests * tokens
  return {
    proxy: proxy.name,
    round,
    case: caseName(each),
    tokensPerSecond: streamed / seconds,
    cpuUsPerToken: ((treeCpuMs(proxy.pid) - cpu) * 1000) / streamed,
    engineCpuUsPerToken: ((treeCpuMs(proxy.enginePid) - engineCpu) * 1000) / streamed,
    ...deliveryPercentiles(all),
  }
}

function positive(name: string, value: string): number {
  const n = Number(value)
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name}: ${JSON.stringify(value)} is not a whole number above 0`)
  return n
}

const rounds = positive('PEERS_ROUNDS', process.env.PEERS_ROUNDS ?? '3')
const cases: Case[] = (process.env.PEERS_CASES ?? '16x3,64x2,16x40x32').split(',').map((text) => {
  const [clients, requests, maxTokens, extra] = text.trim().split('x')
  if (clients === undefined || requests === undefined || extra !== undefined)
    throw new Error(`PEERS_CASES: ${JSON.stringify(text)} is not CLIENTSxREQUESTS[xMAX_TOKENS], e.g. 64x2 or 16x40x32`)
  return {
    clients: positive('PEERS_CASES clients', clients),
    requests: positive('PEERS_CASES requests', requests),
    maxTokens: maxTokens === undefined ? null : positive('PEERS_CASES max tokens', maxTokens),
  }
})
const known = ['native', 'js', 'litellm', 'smg']
const wanted = (process.env.PEERS_PROXIES ?? known.join(',')).split(',').map((key) => key.trim())
for (const key of wanted) if (!known.includes(key)) throw new Error(`PEERS_PROXIES: ${key} is none of ${known.join(', ')}`)

const replay = replayFile()
const [{ tokens: completion }] = JSON.parse(readFileSync(replay, 'utf8')) as { tokens: number[] }[]
const bin = wanted.includes('litellm') || wanted.includes('smg') ? peersVenv() : ''
const standIn = (face: string) =>
  start(
    process.execPath,
    ['--import', 'tsx', join(root, 'benchmark', 'engine-stand-in.mts'), face, replay],
    {},
    /listening on (http:\/\/\S+)/,
  )
const loads = () =>
  loadavg()
    .map((n) => n.toFixed(2))
    .join(', ')

const rows: Row[] = []
const started: ChildProcess[] = []
const proxies: Proxy[] = []
try {
  const vllm = await standIn('vllm')
  const chat = await standIn('chat')
  started.push(vllm.child, chat.child)
  for (const impl of ['native', 'js'].filter((key) => wanted.includes(key))) {
    const gateway = await start(
      process.execPath,
      [join(root, 'examples', 'gateway', 'server.mjs')],
      {
        PORT: '0',
        HARMONY_ENGINE: 'vllm',
        HARMONY_STREAM_IMPL: impl,
        ENGINE_URL: vllm.match,
        ENGINE_MODEL: 'gpt-oss',
        GATEWAY_WORKERS: '1',
        REQUEST_LOG: '0',
        LOG_DIAGNOSTICS: '0',
      },
      /127\.0\.0\.1:(\d+)/,
    )
    started.push(gateway.child)
    proxies.push({
      key: impl,
      name: `harmony-stream gateway, ${impl} (vLLM token stream)`,
      port: Number(gateway.match),
      pid: gateway.child.pid!,
      enginePid: vllm.child.pid!,
    })
  }
  if (wanted.includes('litellm')) {
    const config = join(root, 'target', 'peers-litellm.yaml')
    writeFileSync(
      config,
      [
        'model_list:',
        '  - model_name: gpt-oss',
        '    litellm_params:',
        '      model: openai/gpt-oss',
        `      api_base: ${chat.match}/v1`,
        '      api_key: none',
        'litellm_settings:',
        '  telemetry: false',
        '',
      ].join('\n'),
    )
    const litellm = await start(
      join(bin, 'litellm'),
      ['--config', config, '--host', '127.0.0.1', '--port', String(await freePort()), '--num_workers', '1'],
      {
        LITELLM_LOCAL_MODEL_COST_MAP: 'True',
        NO_DOCS: 'True',
        // No keys on either side (the gateway runs without them too), on 127.0.0.1 only.
        LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY: 'true',
      },
      /Uvicorn running on http:\/\/127\.0\.0\.1:(\d+)/,
    )
    started.push(litellm.child)
    proxies.push({
      key: 'litellm',
      name: `LiteLLM proxy ${pinned('litellm')} (chat chunks)`,
      port: Number(litellm.match),
      pid: litellm.child.pid!,
      enginePid: chat.child.pid!,
    })
  }
  if (wanted.includes('smg')) {
    // `smg launch` (smg/cli.py, smg/launch_router.py, smg/router_args.py in the wheel): the router in front of
    // the given worker URLs; an http:// URL makes it an HTTP worker, whose streamed chat chunks the router relays
    // as bytes (lightseekorg/smg model_gateway/src/routers/http/router.rs, send_typed_request). One worker, so
    // round_robin: nothing to balance, and no cache-aware tree kept for it. Its Prometheus listener, on
    // 0.0.0.0:29000 by default, is put on 127.0.0.1 and a free port. It logs through RUST_LOG
    // (model_gateway/src/observability/logging.rs): warnings, as the gateway runs without its request log, and
    // the one line that says the worker has been registered (workflow/steps/shared/activate.rs), which is when
    // the router routes to it.
    const port = await freePort()
    const smg = await start(
      join(bin, 'smg'),
      [
        'launch',
        '--worker-urls',
        chat.match,
        '--host',
        '127.0.0.1',
        '--port',
        String(port),
        '--policy',
        'round_robin',
        '--prometheus-host',
        '127.0.0.1',
        '--prometheus-port',
        String(await freePort()),
      ],
      { RUST_LOG: 'warn,smg::workflow::steps::shared::activate=info' },
      /Activated 1 of 1 worker/,
    )
    started.push(smg.child)
    proxies.push({
      key: 'smg',
      name: `SMG ${pinned('smg')} router, HTTP mode (chat chunks)`,
      port,
      pid: smg.child.pid!,
      enginePid: chat.child.pid!,
    })
  }
  proxies.sort((a, b) => wanted.indexOf(a.key) - wanted.indexOf(b.key))
  for (let round = 1; round <= rounds; round++) {
    console.log(`round ${round} of ${rounds}: load average ${loads()}`)
    for (const each of cases) {
      const turned = proxies.map((_, i) => proxies[(i + round - 1) % proxies.length]!)
      for (const proxy of turned) {
        const row = await load(proxy, round, each, completion.length)
        rows.push(row)
        console.log(
          `  ${row.case} ${proxy.name}: ${row.cpuUsPerToken.toFixed(1)} µs CPU per token, ${Math.round(row.tokensPerSecond)} tokens/s`,
        )
      }
    }
  }
  console.log(`after the last round: load average ${loads()}`)
} finally {
  for (const child of started.reverse()) await stop(child)
}

const median = (values: number[]) => percentile(values, 50)
const range = (values: number[], digits: number) => `${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)}`

console.log(`\nPeers: ${completion.length}-token completion, one token per engine step; ${rounds} round(s), every row one proxy process\n`)
console.log(
  '| proxy | clients × requests | round | tokens/s | CPU µs per token | stand-in CPU µs per token | TTFC p50 | gap p50 | gap p99 |',
)
console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
for (const r of rows) {
  console.log(
    `| ${r.proxy} | ${r.case} | ${r.round} | ${Math.round(r.tokensPerSecond)} | ${r.cpuUsPerToken.toFixed(1)} | ${r.engineCpuUsPerToken.toFixed(1)} | ${r.ttfbP50.toFixed(1)} ms | ${r.gapP50.toFixed(2)} ms | ${r.gapP99.toFixed(2)} ms |`,
  )
}
console.log(`\nMedians of the ${rounds} round(s) (CPU: lowest–highest round)\n`)
console.log('| proxy | clients × requests | k tokens/s | CPU µs per token | stand-in CPU µs per token | TTFC p50 | gap p50 / p99 |')
console.log('|---|---:|---:|---:|---:|---:|---:|')
const ratios: string[] = []
for (const each of cases) {
  const mine = rows.filter((r) => r.case === caseName(each))
  const of = (proxy: Proxy, value: (r: Row) => number) => median(mine.filter((r) => r.proxy === proxy.name).map(value))
  for (const proxy of proxies) {
    const cpu = mine.filter((r) => r.proxy === proxy.name).map((r) => r.cpuUsPerToken)
    console.log(
      `| ${proxy.name} | ${caseName(each)} | ${(of(proxy, (r) => r.tokensPerSecond) / 1000).toFixed(1)} | ${median(cpu).toFixed(1)} (${range(cpu, 1)}) | ${of(proxy, (r) => r.engineCpuUsPerToken).toFixed(1)} | ${of(proxy, (r) => r.ttfbP50).toFixed(1)} ms | ${of(proxy, (r) => r.gapP50).toFixed(2)} / ${of(proxy, (r) => r.gapP99).toFixed(2)} ms |`,
    )
  }
  const base = of(proxies[0]!, (r) => r.cpuUsPerToken)
  for (const proxy of proxies.slice(1))
    ratios.push(
      `${caseName(each)}: ${proxy.name} spent ${(of(proxy, (r) => r.cpuUsPerToken) / base).toPrecision(2)}× the CPU per token of ${proxies[0]!.name}`,
    )
}
console.log(`\n${ratios.join('\n')}`)
