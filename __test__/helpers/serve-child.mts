/**
 * `harmony-stream serve` as a child process (bin/harmony-stream.cjs, on dist/ as `npm run build:ts` writes it):
 * started until it prints where it listens, and read line by line as it runs.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'

const root = join(import.meta.dirname, '..', '..')
const bin = join(root, 'bin', 'harmony-stream.cjs')

/** `serve ARGS` (a later flag wins over the memory store given first) until it prints where it listens (or exits); what it wrote. */
export async function serving(args: string[], env: NodeJS.ProcessEnv = process.env) {
  const child = spawn(process.execPath, [bin, 'serve', '--port', '0', '--response-store', 'memory', ...args], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stderr!.on('data', (chunk) => (stderr += chunk))
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on('data', (chunk) => {
      stdout += chunk
      const match = /http:\/\/127\.0\.0\.1:(\d+)\/v1/.exec(stdout)
      if (match) resolve(Number(match[1]))
    })
    child.once('exit', (code) => reject(new Error(`serve exited (${code}) before listening: ${stdout}${stderr}`)))
  })
  return { child, port, stdout: () => stdout, stderr: () => stderr }
}

/** Resolves when `child` wrote a line that `pattern` matches on `stream` (or rejects when it exits first). */
export function line(child: ChildProcess, stream: 'stdout' | 'stderr', pattern: RegExp, seen: () => string): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (pattern.test(seen())) {
        child[stream]!.off('data', check)
        resolve()
      }
    }
    child[stream]!.on('data', check)
    child.once('exit', () => (pattern.test(seen()) ? resolve() : reject(new Error(`exited without ${pattern}: ${seen()}`))))
    check()
  })
}
