/**
 * The export lists of docs/API.md ("Exports of harmony-stream", "Exports of harmony-stream/engines", "Exports of harmony-stream/ai-sdk") name
 * exactly what the built package exports, runtime values and types alike, read from the shipped typings with
 * the TypeScript compiler: an export nobody documented fails, and so does a documented name that is gone.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'
import ts from 'typescript'

const root = join(import.meta.dirname, '..', '..')
const api = readFileSync(join(root, 'docs', 'API.md'), 'utf8')

/** The names of the bullets `- \`Name\`: what it is` under the heading `## {heading}`, up to the next `## `. */
function documented(heading: string): string[] {
  const start = api.indexOf(`\n## ${heading}\n`)
  if (start < 0) return []
  const end = api.indexOf('\n## ', start + 1)
  const section = api.slice(start, end < 0 ? undefined : end)
  return [...section.matchAll(/^- `([A-Za-z_$][\w$]*)`: \S/gm)].map(([, name]) => name)
}

/** Every name an entry's typings export: classes, functions, constants, interfaces and type aliases. */
function exported(typings: string): string[] {
  const file = join(root, typings)
  const program = ts.createProgram([file], {
    strict: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
  })
  const checker = program.getTypeChecker()
  return checker.getExportsOfModule(checker.getSymbolAtLocation(program.getSourceFile(file)!)!).map((symbol) => symbol.name)
}

const difference = (a: string[], b: string[]) => a.filter((name) => !b.includes(name)).sort()

for (const [entry, typings] of [
  ['harmony-stream', 'dist/index.d.ts'],
  ['harmony-stream/engines', 'dist/engines.d.ts'],
  ['harmony-stream/http', 'dist/http.d.ts'],
  ['harmony-stream/ai-sdk', 'dist/ai-sdk.d.ts'],
  ['harmony-stream/server', 'dist/server.d.ts'],
] as const) {
  test(`docs/API.md lists every export of ${entry}, and nothing else`, (t) => {
    const names = documented(`Exports of ${entry}`)
    const actual = exported(typings)
    t.true(actual.length > 0, `${typings} exports something`)
    t.true(names.length > 0, `docs/API.md has the list "Exports of ${entry}"`)
    t.deepEqual(
      names.filter((name, i) => names.indexOf(name) !== i),
      [],
      'each name is listed once',
    )
    t.deepEqual(difference(actual, names), [], `exported by ${entry} but not listed in docs/API.md`)
    t.deepEqual(difference(names, actual), [], `listed in docs/API.md but not exported by ${entry}`)
  })
}

test('the export lists hold only bullets of the documented form', (t) => {
  for (const entry of [
    'harmony-stream',
    'harmony-stream/engines',
    'harmony-stream/http',
    'harmony-stream/ai-sdk',
    'harmony-stream/server',
  ]) {
    const start = api.indexOf(`\n## Exports of ${entry}\n`)
    const end = api.indexOf('\n## ', start + 1)
    const stray = api
      .slice(start, end)
      .split('\n')
      .slice(2)
      .filter((line) => line.trim() !== '' && !/^- `[A-Za-z_$][\w$]*`: \S/.test(line))
    t.deepEqual(stray, [], `every line of "Exports of ${entry}" is "- \`Name\`: what it is"`)
  }
})
