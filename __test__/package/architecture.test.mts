/**
 * docs/ARCHITECTURE.md stays true to the tree: every source file of src/ is named in the module list of its
 * layer (`### layer/`), and every file it names there exists. A file added without a line there fails here.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { basename, join } from 'node:path'

import test from 'ava'

const root = join(import.meta.dirname, '..', '..')
const architecture = readFileSync(join(root, 'docs', 'ARCHITECTURE.md'), 'utf8')
const sources = readdirSync(join(root, 'src'), { recursive: true, encoding: 'utf8' })
  .filter((file) => file.endsWith('.ts'))
  .map((file) => file.replaceAll('\\', '/'))
  .sort()

/** The text of the section `### {layer}/`, up to the next heading. */
function section(layer: string): string | null {
  const start = architecture.indexOf(`\n### ${layer}/\n`)
  if (start < 0) return null
  const end = architecture.slice(start + 1).search(/\n#{2,3} /)
  return architecture.slice(start, end < 0 ? undefined : start + 1 + end)
}

/** The file names in backticks of a text (`a/b.ts`, `b.ts`). */
const named = (text: string) => [...text.matchAll(/`([\w./-]+\.ts)`/g)].map(([, name]) => name!)

test('docs/ARCHITECTURE.md names every source file in the section of its layer', (t) => {
  const missing: string[] = []
  for (const file of sources) {
    const slash = file.indexOf('/')
    if (slash < 0) {
      // The entries: named with their path.
      if (!architecture.includes(`src/${file}`)) missing.push(file)
      continue
    }
    const text = section(file.slice(0, slash))
    const rest = file.slice(slash + 1)
    if (text === null || !(named(text).includes(rest) || named(text).includes(basename(rest)))) missing.push(file)
  }
  t.deepEqual(missing, [], 'source files with no line in docs/ARCHITECTURE.md')
})

test('every file the module lists name exists', (t) => {
  const stale: string[] = []
  for (const layer of new Set(sources.filter((f) => f.includes('/')).map((f) => f.slice(0, f.indexOf('/'))))) {
    const text = section(layer) ?? ''
    for (const name of named(text)) {
      const found = sources.some((file) => file === `${layer}/${name}` || (file.startsWith(`${layer}/`) && file.endsWith(`/${name}`)))
      if (!found && !existsSync(join(root, 'src', layer, name))) stale.push(`${layer}/: ${name}`)
    }
  }
  t.deepEqual(stale, [], 'named in docs/ARCHITECTURE.md but not in src/')
})
