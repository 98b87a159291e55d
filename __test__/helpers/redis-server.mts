/**
 * A real redis-server (Debian's package, which .ci/run installs) for the store tests, on a free 127.0.0.1
 * port, without persistence, stopped when the test file ends. Missing: the tests skip with a note saying how
 * to install it; under CI (process.env.CI) a missing server is a failure instead.
 */

import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import type test from 'ava'

import { freePort } from './free-port.mjs'

interface RedisServer {
  url: string
  close(): Promise<void>
}

/** Whether `redis-server` runs here (CI: it must). */
function redisOrSkip(): boolean {
  const found = spawnSync('redis-server', ['--version'], { encoding: 'utf8' })
  if (found.status === 0) return true
  if (process.env.CI) throw new Error('redis-server is missing, and CI must run the Redis store tests: apt-get install redis-server')
  console.warn('redis-server is not installed here: the Redis store tests are skipped (apt-get install redis-server)')
  return false
}

/** Starts redis-server and waits (at most 10 s) until it accepts connections. */
async function startRedis(): Promise<RedisServer> {
  const port = await freePort()
  const child: ChildProcess = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'yes'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let output = ''
  child.stdout!.on('data', (chunk) => {
    output += chunk
  })
  const exited = once(child, 'exit')
  const deadline = Date.now() + 10_000
  while (!output.includes('Ready to accept connections')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`redis-server did not start: ${output.slice(-2000)}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    close: async () => {
      if (child.exitCode === null) child.kill('SIGTERM')
      await exited
    },
  }
}

/** One real redis-server for a test file, when it is installed: started before its tests, stopped after them. */
export function redisForFile(avaTest: typeof test): { here: boolean; url: () => string } {
  const here = redisOrSkip()
  let redis: RedisServer | undefined
  avaTest.before(async () => {
    if (here) redis = await startRedis()
  })
  avaTest.after.always(async () => {
    await redis?.close()
  })
  return { here, url: () => redis!.url }
}
