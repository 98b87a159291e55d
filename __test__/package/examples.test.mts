/**
 * The single-topic examples of examples/ run as a user runs them (`node examples/NAME.mjs`), on both backends,
 * and print exactly what their header says under `Prints:`. (demo.mjs and gateway/ have suites of their own.)
 */
import { spawnSync } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'

import { IMPLEMENTATIONS } from '../helpers/harmony.mjs'

const root = join(import.meta.dirname, '..', '..')
const examples = readdirSync(join(root, 'examples')).filter((file) => file.endsWith('.mjs') && file !== 'demo.mjs')

/** The lines after `// Prints:` in the header comment, up to the first line that is not a comment. */
function expected(source: string): string | null {
  const lines = source.split('\n')
  const start = lines.indexOf('// Prints:')
  if (start < 0) return null
  const out: string[] = []
  for (const line of lines.slice(start + 1)) {
    if (!line.startsWith('// ')) break
    out.push(line.slice(3))
  }
  return `${out.join('\n')}\n`
}

test('there are examples, each saying what it prints', (t) => {
  t.true(examples.length >= 3, examples.join(', '))
  for (const file of examples) t.truthy(expected(readFileSync(join(root, 'examples', file), 'utf8')), `${file} has a Prints: block`)
})

for (const file of examples) {
  test(`examples/${file} prints what its header says, on both backends`, (t) => {
    const want = expected(readFileSync(join(root, 'examples', file), 'utf8'))
    for (const implementation of IMPLEMENTATIONS) {
      const run = spawnSync(process.execPath, [join(root, 'examples', file)], {
        cwd: root,
        encoding: 'utf8',
        env: { ...process.env, HARMONY_STREAM_IMPL: implementation },
        timeout: 60_000,
      })
      t.is(run.status, 0, `${implementation}: ${run.stderr}`)
      t.is(run.stdout, want ?? '', implementation)
    }
  })
}
