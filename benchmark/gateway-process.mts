/** What the gateway benchmarks share: a gateway started as a child process on a free port, and percentiles. */
import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'

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
