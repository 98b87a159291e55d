/** What the gateway benchmarks share: the replay completions, a gateway started as a child process on a free port, and percentiles. */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'

import { generator } from '../__test__/helpers/generator.mjs'

const root = join(import.meta.dirname, '..')

/**
 * Starts `server` (default: the example gateway) with PORT=0 and `env`, and resolves once it prints the port it
 * bound. The caller stops it (`child.kill('SIGTERM')`).
 */
export async function startGatewayProcess(
  env: Record<string, string>,
  server = join(root, 'examples', 'gateway', 'server.mjs'),
): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [server], {
    cwd: root,
    env: { ...process.env, PORT: '0', LOG_DIAGNOSTICS: '0', ...env },
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  const port = await new Promise<number>((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (d) => {
      out += d
      const match = /127\.0\.0\.1:(\d+)/.exec(out)
      if (match) resolve(Number(match[1]))
    })
    child.on('exit', (code) => reject(new Error(`gateway exited (${code})`)))
  })
  return { child, port }
}

/** The `p`-th percentile of `values` (0 for none). */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

/** Time to first byte (p50) and the gaps between chunks (p50, p99) of some streams, in milliseconds. */
export function deliveryPercentiles(deliveries: readonly Delivery[]): { ttfbP50: number; gapP50: number; gapP99: number } {
  const gaps = deliveries.flatMap((d) => d.gaps)
  return {
    ttfbP50: percentile(
      deliveries.map((d) => d.ttfb),
      50,
    ),
    gapP50: percentile(gaps, 50),
    gapP99: percentile(gaps, 99),
  }
}

/** Completions of about 1,000 tokens: several generated completions joined. */
export function replayFile(): string {
  const streams = Array.from({ length: 400 }, generator(9)).filter((s) => s.role === 'assistant')
  const completions: number[][] = []
  let current: number[] = []
  for (const s of streams) {
    current.push(...(current.length > 0 ? [200006, 173781] : []), ...s.tokens)
    if (current.length >= 1000) {
      completions.push(current)
      current = []
    }
  }
  mkdirSync(join(root, 'target'), { recursive: true })
  const path = join(root, 'target', 'bench-replay.json')
  writeFileSync(path, JSON.stringify(completions.map((tokens) => ({ tokens }))))
  return path
}

/** CPU ms (user + system) of a process and its children, from /proc. */
export function cpuMs(pid: number): number {
  let children = ''
  try {
    children = execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' })
  } catch {
    // ps exits 1 when there are none
  }
  const pids = [
    pid,
    ...children
      .split('\n')
      .map(Number)
      .filter((n) => n > 0),
  ]
  let ticks = 0
  for (const p of pids) {
    try {
      const fields = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ')
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // gone
    }
  }
  return (ticks * 1000) / 100 // USER_HZ is 100 on Linux
}

/** What a client saw of one streamed response: the tokens its usage reports, time to first byte, gaps between arrivals. */
export interface Delivery {
  tokens: number
  ttfb: number
  gaps: number[]
}

/** One streaming POST of `body` to `path`; its tokens are read from the end of the stream with `usage` (a capture group). */
export function streamingPost(port: number, path: string, body: object, usage: RegExp): Promise<Delivery> {
  return new Promise((resolve, reject) => {
    const started = performance.now()
    let last = 0
    let ttfb = 0
    const gaps: number[] = []
    let tail = ''
    const req = request({ host: '127.0.0.1', port, method: 'POST', path, headers: { 'content-type': 'application/json' } }, (res) => {
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        const now = performance.now()
        if (ttfb === 0) ttfb = now - started
        else gaps.push(now - last)
        last = now
        tail = (tail + chunk).slice(-4000)
      })
      res.on('end', () => {
        const found = usage.exec(tail)
        resolve({ tokens: found ? Number(found[1]) : 0, ttfb, gaps })
      })
    })
    req.on('error', reject)
    req.end(JSON.stringify(body))
  })
}
