/** The README's quick start is a real program: it runs, and prints what the README says it prints. */
import { spawnSync } from 'node:child_process'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'

import { IMPLEMENTATIONS } from './helpers/harmony.mjs'

const root = join(import.meta.dirname, '..')

test('the README quick start runs and prints what the README describes', (t) => {
  const readme = readFileSync(join(root, 'README.md'), 'utf8')
  const section = readme.slice(readme.indexOf('## Quick start'))
  const code = /```js\n([\s\S]*?)```/.exec(section)?.[1]
  t.truthy(code, 'the quick start has a js block')
  // Inside the package folder, so that `import 'harmony-stream'` resolves to this package.
  const file = join(root, `.readme-quick-start-${process.pid}.mjs`)
  writeFileSync(file, code!)
  t.teardown(() => rmSync(file, { force: true }))
  for (const implementation of IMPLEMENTATIONS) {
    const run = spawnSync(process.execPath, [file], {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, HARMONY_STREAM_IMPL: implementation },
    })
    t.is(run.status, 0, run.stderr)
    const lines = run.stdout.split('\n')
    t.deepEqual(lines.slice(0, 4), [
      'reasoning Need weather.',
      'done: analysis end',
      'tool call functions.get_weather {"city":"Paris"}',
      'done: commentary call',
    ])
  }
})

/** Runs the first js block of a README section on both implementations; it must print the block after "prints". */
function readmeExampleTest(title: string, heading: string, stem: string): void {
  test(title, (t) => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8')
    const section = readme.slice(readme.indexOf(heading))
    const code = /```js\n([\s\S]*?)```/.exec(section)?.[1]
    const expected = /prints\n\n```\n([\s\S]*?)```/.exec(section)?.[1]
    t.truthy(code, 'the section has a js block')
    t.truthy(expected, 'the section shows its output')
    const file = join(root, `.readme-${stem}-${process.pid}.mjs`)
    writeFileSync(file, code!)
    t.teardown(() => rmSync(file, { force: true }))
    for (const implementation of IMPLEMENTATIONS) {
      const run = spawnSync(process.execPath, [file], {
        cwd: root,
        encoding: 'utf8',
        env: { ...process.env, HARMONY_STREAM_IMPL: implementation },
      })
      t.is(run.status, 0, run.stderr)
      t.is(run.stdout, expected!)
    }
  })
}

readmeExampleTest(
  'the README pool example runs and prints what the README shows, on both implementations',
  '### Fast path and pools',
  'pool',
)
readmeExampleTest(
  'the README SsePool example runs and prints what the README shows, on both implementations',
  '### Many adapters per engine step',
  'sse-pool',
)
readmeExampleTest(
  'the README rendering example runs and prints what the README shows, on both implementations',
  '## Rendering requests',
  'render',
)
