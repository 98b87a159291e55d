/** `npm run demo`: it runs, and refuses bad options with a message and exit code 2 instead of looping or printing NaN. */
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'

import test from 'ava'

const demo = join(import.meta.dirname, '..', '..', 'examples', 'demo.mjs')
/** The demo with `args`, on js unless `env` says otherwise; the timeout ends a demo that would loop forever. */
const runWith = (env: Record<string, string>, ...args: string[]) =>
  spawnSync(process.execPath, [demo, ...args], {
    encoding: 'utf8',
    timeout: 20_000,
    env: { ...process.env, HARMONY_STREAM_IMPL: 'js', ...env },
  })
const run = (...args: string[]) => runWith({}, ...args)

test('the demo streams its completion and prints the messages', (t) => {
  const ok = run('--interval', '5', '--impl', 'js')
  t.is(ok.status, 0, ok.stderr)
  t.regex(ok.stdout, /at stream interval 5/)
  t.regex(ok.stdout, /tool call functions\.get_weather/)
  t.regex(ok.stdout, /closed by <\|call\|>/)
  const defaults = run()
  t.is(defaults.status, 0, defaults.stderr)
  t.regex(defaults.stdout, /at stream interval 20\n/)
})

test('bad options: a message and exit code 2', (t) => {
  for (const args of [['--interval', '0'], ['--interval', 'abc'], ['--interval', '-3'], ['--impl', 'wasm'], ['--frobnicate']]) {
    const bad = run(...args)
    t.is(bad.status, 2, args.join(' '))
    t.regex(bad.stderr, /^demo: /, args.join(' '))
    t.notRegex(bad.stdout + bad.stderr, /NaN/, args.join(' '))
  }
  t.regex(run('--interval', 'abc').stderr, /--interval must be a positive integer, not "abc"/)
})

test('--impl native where the addon does not load: the reason and what to do, not a stack trace', (t) => {
  // napi-rs's loader tries only this file, so the addon does not load even where it is built.
  const missing = runWith({ NAPI_RS_NATIVE_LIBRARY_PATH: '/nonexistent/harmony-stream.node' }, '--impl', 'native')
  t.is(missing.status, 1)
  t.regex(missing.stderr, /^demo: the native implementation is not available: NAPI_RS_NATIVE_LIBRARY_PATH names .*HARMONY_STREAM_IMPL=js/)
  t.notRegex(missing.stderr, /\n\s+at /, 'no stack trace')
})
