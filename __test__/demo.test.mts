/** `npm run demo`: it runs, and refuses bad options with a message and exit code 2 instead of looping or printing NaN. */
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'

import test from 'ava'

const demo = join(import.meta.dirname, '..', 'examples', 'demo.mjs')
const run = (...args: string[]) => spawnSync(process.execPath, [demo, ...args], { encoding: 'utf8', timeout: 20_000, env: { ...process.env, HARMONY_STREAM_IMPL: 'js' } })

test('the demo streams its completion and prints the messages', (t) => {
  const ok = run('--interval', '5', '--impl', 'js')
  t.is(ok.status, 0, ok.stderr)
  t.regex(ok.stdout, /at stream interval 5/)
  t.regex(ok.stdout, /tool call functions\.get_weather/)
  t.regex(ok.stdout, /closed by <\|call\|>/)
})

test('bad options: a message and exit code 2', (t) => {
  for (const args of [['--interval', '0'], ['--interval', 'abc'], ['--interval', '-3'], ['--impl', 'wasm'], ['--frobnicate']]) {
    const bad = run(...args)
    t.is(bad.status, 2, args.join(' '))
    t.regex(bad.stderr, /^demo: /, args.join(' '))
  }
})
