/**
 * harmony-stream's gateway beside LiteLLM's proxy, side by side on one machine and load: each in front of an
 * engine stand-in over HTTP (engine-stand-in.mts, its own process) streaming the same gpt-oss completion, one
 * token per engine step, to the same streaming Chat Completions clients. The gateway reads vLLM's token stream
 * (`/v1/completions` with token ids) and parses the Harmony itself; LiteLLM reads the chunks vLLM's own server
 * sends once it has parsed the Harmony (`/v1/chat/completions`), which is how it serves gpt-oss. Reported: the
 * CPU each proxy process (with its children) spent per streamed token, tokens/s, time to first byte and the gaps
 * between chunks. Bounded: every client makes a fixed number of requests, and everything started is stopped.
 *
 * LiteLLM comes from PyPI into a virtualenv this benchmark makes once under ~/.cache/harmony-stream, pinned with
 * its dependencies in benchmark/peers-requirements.txt (litellm 1.108.7, one worker, its model price map read
 * from the package rather than fetched).
 *
 *   npm run bench:peers                       64 and 16 clients, 2 requests each
 *   PEERS_CLIENTS=64 npm run bench:peers       one load only
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'

import { freePort } from '../__test__/helpers/free-port.mjs'
import { deliveryPercentiles, replayFile, streamingPost } from './gateway-process.mjs'

const root = join(import.meta.dirname, '..')
const venv = join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'harmony-stream', 'peers-venv')
const requirements = join(root, 'benchmark', 'peers-requirements.txt')

/** The virtualenv with LiteLLM, made (or remade, when the requirements changed) here. */
function litellmBinary(): string {
  const stamp = join(venv, 'requirements.txt')
  const wanted = readFileSync(requirements, 'utf8')
  if (!existsSync(stamp) || readFileSync(stamp, 'utf8') !== wanted) {
    console.log(`making ${venv} (litellm from PyPI, once)`)
    execFileSync('python3', ['-m', 'venv', '--clear', venv], { stdio: 'inherit' })
    execFileSync(join(venv, 'bin', 'pip'), ['install', '--quiet', '-r', requirements], { stdio: 'inherit' })
    writeFileSync(stamp, wanted)
  }
  return join(venv, 'bin', 'litellm')
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
    const look = (data: Buffer) => {
      out += data
      const found = ready.exec(out)
      if (found) resolve({ child, match: found[1] ?? found[0] })
    }
    child.stdout!.on('data', look)
    child.stderr!.on('data', look)
    child.on('exit', (code) => reject(new Error(`${command} exited (${code}) before it was ready:\n${out.slice(-2000)}`)))
  })
}

/** CPU milliseconds of `pid` and every process under it (Linux /proc; clock ticks of 10 ms). */
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
  if (child.exitCode !== null) return
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
  await exited
  clearTimeout(timer)
}

interface Row {
  proxy: string
  clients: number
  tokensPerSecond: number
  cpuUsPerToken: number
  ttfbP50: number
  gapP50: number
  gapP99: number
}

/** `clients` streaming clients, `requests` each, against the proxy at `port` (process `pid`). */
async function load(proxy: string, port: number, pid: number, clients: number, requests: number, tokens: number): Promise<Row> {
  const body = {
    model: 'gpt-oss',
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
  }
  // Each stream's tokens as its usage says: a request that failed (no usage) fails the benchmark.
  const usage = /"completion_tokens":(\d+)/
  // Warm up: a request through, so that neither pays its first-request costs in the measurement.
  await streamingPost(port, '/v1/chat/completions', body, usage)
  const cpu = treeCpuMs(pid)
  const started = performance.now()
  const deliveries = await Promise.all(
    Array.from({ length: clients }, async () => {
      const mine = []
      for (let i = 0; i < requests; i++) mine.push(await streamingPost(port, '/v1/chat/completions', body, usage))
      return mine
    }),
  )
  const seconds = (performance.now() - started) / 1000
  const all = deliveries.flat()
  // A proxy may count the tokens again itself: a stream counts as delivered when it ended with a usage chunk.
  const failed = all.filter((d) => d.tokens === 0).length
  if (failed > 0) throw new Error(`${proxy}: ${failed} of ${all.length} streams failed (no usage chunk at their end)`)
  const streamed = clients * requests * tokens
  return {
    proxy,
    clients,
    tokensPerSecond: streamed / seconds,
    cpuUsPerToken: ((treeCpuMs(pid) - cpu) * 1000) / streamed,
    ...deliveryPercentiles(all),
  }
}

const replay = replayFile()
const [{ tokens: completion }] = JSON.parse(readFileSync(replay, 'utf8')) as { tokens: number[] }[]
const loads = process.env.PEERS_CLIENTS ? [Number(process.env.PEERS_CLIENTS)] : [64, 16]
const requests = 2
const litellm = litellmBinary()
const standIn = (face: string) =>
  start(
    process.execPath,
    ['--import', 'tsx', join(root, 'benchmark', 'engine-stand-in.mts'), face, replay],
    {},
    /listening on (http:\/\/\S+)/,
  )

const rows: Row[] = []
const started: ChildProcess[] = []
try {
  const vllm = await standIn('vllm')
  const chat = await standIn('chat')
  started.push(vllm.child, chat.child)
  const gateway = await start(
    process.execPath,
    [join(root, 'examples', 'gateway', 'server.mjs')],
    {
      PORT: '0',
      HARMONY_ENGINE: 'vllm',
      ENGINE_URL: vllm.match,
      ENGINE_MODEL: 'gpt-oss',
      GATEWAY_WORKERS: '1',
      REQUEST_LOG: '0',
      LOG_DIAGNOSTICS: '0',
    },
    /127\.0\.0\.1:(\d+)/,
  )
  started.push(gateway.child)
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
  const proxy = await start(
    litellm,
    ['--config', config, '--host', '127.0.0.1', '--port', String(await freePort()), '--num_workers', '1'],
    {
      LITELLM_LOCAL_MODEL_COST_MAP: 'True',
      NO_DOCS: 'True',
      // No keys on either side (the gateway runs without them too), on 127.0.0.1 only.
      LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY: 'true',
    },
    /Uvicorn running on http:\/\/127\.0\.0\.1:(\d+)/,
  )
  started.push(proxy.child)
  for (const clients of loads) {
    // Alternating, so that both meet the same moment of a shared machine.
    rows.push(
      await load(
        'harmony-stream gateway (vLLM token stream)',
        Number(gateway.match),
        gateway.child.pid!,
        clients,
        requests,
        completion.length,
      ),
    )
    rows.push(
      await load('LiteLLM proxy 1.108.7 (chat chunks)', Number(proxy.match), proxy.child.pid!, clients, requests, completion.length),
    )
  }
} finally {
  for (const child of started.reverse()) await stop(child)
}

console.log(`\nPeers: ${completion.length}-token completion, one token per engine step, ${requests} requests per client\n`)
console.log('| proxy | clients | tokens/s | CPU µs per token | TTFB p50 | gap p50 | gap p99 |')
console.log('|---|---:|---:|---:|---:|---:|---:|')
for (const r of rows) {
  console.log(
    `| ${r.proxy} | ${r.clients} | ${Math.round(r.tokensPerSecond)} | ${r.cpuUsPerToken.toFixed(1)} | ${r.ttfbP50.toFixed(1)} ms | ${r.gapP50.toFixed(2)} ms | ${r.gapP99.toFixed(2)} ms |`,
  )
}
for (const clients of loads) {
  const [ours, theirs] = rows.filter((r) => r.clients === clients)
  if (ours && theirs)
    console.log(`${clients} clients: LiteLLM spent ${(theirs.cpuUsPerToken / ours.cpuUsPerToken).toFixed(0)}× the CPU per token`)
}
