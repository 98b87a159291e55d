/**
 * The documents are checked like code:
 * - every code block of README.md and docs/*.md that is meant to run runs, on both backends, and prints what
 *   the text says it prints (CONTRIBUTING.md "Examples in the documents" lists the kinds of blocks);
 * - every link of README.md, CONTRIBUTING.md and docs/*.md resolves to a file of the repository, and an anchor
 *   to a heading of that file;
 * - no file of the repository cites a document that is not in it, and a citation of a section of the
 *   documents (`docs/API.md "Errors"`) names a heading that exists.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process'
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'

import test from 'ava'

import { IMPLEMENTATIONS } from '../helpers/harmony.mjs'

const root = join(import.meta.dirname, '..', '..')

/** The files of the repository as git sees them (tracked, or new and not ignored), relative to the root. */
const repositoryFiles = new Set(
  execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], { cwd: root, encoding: 'utf8' })
    .split('\0')
    .filter(Boolean),
)
const documents = [...repositoryFiles]
  .filter((file) => file === 'README.md' || file === 'CONTRIBUTING.md' || /^docs\/[^/]+\.md$/.test(file))
  .sort()
/** The documents whose code blocks are examples. */
const exampleDocuments = documents.filter((file) => file !== 'CONTRIBUTING.md')

interface Block {
  file: string
  /** 1-based line of the opening fence. */
  line: number
  /** The fence's info string, e.g. `js`, `js server`, `sh`, or '' for plain text. */
  info: string
  code: string
  /** 0-based line of the closing fence. */
  end: number
  /** The plain block that follows when the next line after this one says `prints`. */
  prints?: string
}

/** The fenced code blocks of a Markdown text, in order. */
function codeBlocks(file: string, text: string): Block[] {
  const lines = text.split('\n')
  const blocks: Block[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(.*)$/.exec(lines[i])
    if (open === null) continue
    const start = i
    i++
    const body: string[] = []
    while (i < lines.length && lines[i] !== '```') body.push(lines[i++])
    blocks.push({ file, line: start + 1, info: open[1].trim(), code: `${body.join('\n')}\n`, end: i })
  }
  // A block followed by a line `prints` and then a plain block: that block is its output.
  for (const [k, block] of blocks.entries()) {
    const next = blocks[k + 1]
    if (next === undefined || next.info !== '') continue
    const between = lines.slice(block.end + 1, next.line - 1).filter((l) => l.trim() !== '')
    if (between.length === 1 && between[0] === 'prints') block.prints = next.code
  }
  return blocks
}

/** Markdown text without its code blocks and code spans, where links are looked for. */
function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```$/gm, '').replace(/``[^`]*``|`[^`\n]*`/g, '')
}

/** The headings' texts of a Markdown file, code spans kept as their text. */
function headings(text: string): string[] {
  const withoutBlocks = text.replace(/^```[\s\S]*?^```$/gm, '')
  return [...withoutBlocks.matchAll(/^#{1,6} (.+)$/gm)].map(([, heading]) => heading.replace(/`/g, '').trim())
}

/** GitHub's anchors of the headings: lower case, punctuation dropped, spaces as hyphens; repeats get -1, -2, … */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>()
  const out = new Set<string>()
  for (const heading of headings(text)) {
    const base = heading
      .toLowerCase()
      .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
      .replace(/ /g, '-')
    const n = seen.get(base) ?? 0
    seen.set(base, n + 1)
    out.add(n === 0 ? base : `${base}-${n}`)
  }
  return out
}

const read = (file: string) => readFileSync(join(root, file), 'utf8')
const blocks = exampleDocuments.flatMap((file) => codeBlocks(file, read(file)))

/** Writes `code` as a module in the package folder, so that `import 'harmony-stream'` resolves to this package. */
function moduleFile(t: { teardown(fn: () => void): void }, block: Block, code = block.code): string {
  const file = join(root, `.docs-example-${process.pid}-${block.file.replace(/\W/g, '-')}-${block.line}.mjs`)
  writeFileSync(file, code)
  t.teardown(() => rmSync(file, { force: true }))
  return file
}

test('the documents have the examples this test runs', (t) => {
  t.true(exampleDocuments.includes('README.md') && exampleDocuments.includes('docs/API.md'), exampleDocuments.join(', '))
  const kinds = new Set(blocks.map((b) => b.info))
  t.true(kinds.has('js') && kinds.has('js server'), [...kinds].join(', '))
  t.true(
    blocks.some((b) => b.prints !== undefined),
    'some examples show their output',
  )
  for (const block of blocks) {
    t.true(
      ['js', 'js server', 'js fragment', 'ts', 'sh', ''].includes(block.info),
      `${block.file}:${block.line}: unknown block kind '${block.info}'`,
    )
  }
})

test('the README quick start runs and prints what the README describes', (t) => {
  const quickStart = read('README.md').split('\n').indexOf('## Quick start') + 1
  t.true(quickStart > 0, 'the README has a quick start')
  const block = blocks.find((b) => b.file === 'README.md' && b.info === 'js' && b.line > quickStart)
  t.truthy(block, 'the quick start has a js block')
  const file = moduleFile(t, block!)
  for (const implementation of IMPLEMENTATIONS) {
    const run = spawnSync(process.execPath, [file], {
      cwd: root,
      encoding: 'utf8',
      env: { ...process.env, HARMONY_STREAM_IMPL: implementation },
    })
    t.is(run.status, 0, run.stderr)
    t.deepEqual(run.stdout.split('\n').slice(0, 4), [
      'reasoning Need weather.',
      'done: analysis end',
      'tool call functions.get_weather {"city":"Paris"}',
      'done: commentary call',
    ])
  }
})

for (const block of blocks.filter((b) => b.info === 'js')) {
  const what = block.prints === undefined ? 'runs' : 'runs and prints what the text shows'
  test(`${block.file}:${block.line}: the example ${what}, on both backends`, (t) => {
    const file = moduleFile(t, block)
    for (const implementation of IMPLEMENTATIONS) {
      const run = spawnSync(process.execPath, [file], {
        cwd: root,
        encoding: 'utf8',
        env: { ...process.env, HARMONY_STREAM_IMPL: implementation },
      })
      t.is(run.status, 0, `${implementation}: ${run.stderr}`)
      if (block.prints !== undefined) t.is(run.stdout, block.prints, implementation)
    }
  })
}

for (const block of blocks.filter((b) => b.info === 'js fragment')) {
  test(`${block.file}:${block.line}: the fragment parses`, (t) => {
    const run = spawnSync(process.execPath, ['--check', moduleFile(t, block)], { encoding: 'utf8' })
    t.is(run.status, 0, run.stderr)
  })
}

/** Starts a server example; resolves with its port once it prints its address. */
function startServer(file: string, env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [file], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] })
  return new Promise((resolve, reject) => {
    let output = ''
    // A bound a loaded machine stays within: starting node and the package can take seconds there.
    const timer = setTimeout(() => reject(new Error(`the server printed no address in 60 s: ${output}`)), 60_000)
    const onData = (data: Buffer) => {
      output += data
      const match = /http:\/\/127\.0\.0\.1:(\d+)/.exec(output)
      if (match === null) return
      clearTimeout(timer)
      resolve({ child, port: Number(match[1]) })
    }
    child.stdout!.on('data', onData)
    child.stderr!.on('data', onData)
    child.on('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`the server exited (${code}): ${output}`))
    })
  })
}

for (const block of blocks.filter((b) => b.info === 'js server')) {
  test(`${block.file}:${block.line}: the gateway serves the request the text shows, on both backends`, async (t) => {
    // The request is the curl command of the sh block right after the server.
    const curl = blocks[blocks.indexOf(block) + 1]
    t.is(curl?.info, 'sh', 'a curl command follows the server')
    const path = /http:\/\/127\.0\.0\.1:\d+(\/\S*)/.exec(curl.code)?.[1]
    const body = /-d '([^']*)'/.exec(curl.code)?.[1]
    t.truthy(path && body, curl.code)
    const file = moduleFile(t, block)
    for (const implementation of IMPLEMENTATIONS) {
      const env: NodeJS.ProcessEnv = { ...process.env, PORT: '0', HARMONY_STREAM_IMPL: implementation }
      delete env.ENGINE_URL
      const { child, port } = await startServer(file, env)
      t.teardown(() => child.kill())
      const response = await fetch(`http://127.0.0.1:${port}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      })
      const text = await response.text()
      child.kill()
      t.is(response.status, 200, text)
      t.regex(response.headers.get('content-type') ?? '', /^text\/event-stream/)
      const frames = text.split('\n\n').filter(Boolean)
      t.is(frames.at(-1), 'data: [DONE]', implementation)
      // What the README says it streams: the reasoning, then the tool call, then finish_reason tool_calls.
      const chunks = frames.slice(0, -1).map((frame) => JSON.parse(frame.replace(/^data: /, '')))
      const deltas = chunks.map((chunk) => chunk.choices[0].delta)
      t.is(deltas.map((d) => d.reasoning_content ?? '').join(''), 'Need weather.', implementation)
      const calls = deltas.flatMap((d) => d.tool_calls ?? [])
      t.is(calls[0]?.function?.name, 'get_weather', implementation)
      t.is(calls.map((c) => c.function?.arguments ?? '').join(''), '{"city":"Paris"}', implementation)
      t.is(chunks.at(-1).choices[0].finish_reason, 'tool_calls', implementation)
    }
  })
}

/** Where the repository's files are on the web: README.md links there, as the registry shows it without them. */
const repositoryUrl = `${(JSON.parse(read('package.json')) as { repository: { url: string } }).repository.url.replace(/^git\+/, '').replace(/\.git$/, '')}/blob/main/`

test('every link of the documents resolves to a file of the repository, and every anchor to a heading', (t) => {
  const broken: string[] = []
  for (const file of documents) {
    for (const [, link] of prose(read(file)).matchAll(/\]\(([^)\s]+)\)/g)) {
      // The repository's own address is checked as the file it names.
      const target = link.startsWith(repositoryUrl) ? `/${link.slice(repositoryUrl.length)}` : link
      if (/^[a-z][a-z+.-]*:/i.test(target)) continue // an address outside the repository (https:, mailto:)
      const [path, anchor] = target.split('#')
      const linked = path === '' ? file : path.startsWith('/') ? path.slice(1) : normalize(join(dirname(file), path)).replace(/\/$/, '')
      const exists = repositoryFiles.has(linked) || [...repositoryFiles].some((f) => f.startsWith(`${linked}/`))
      if (linked.startsWith('..') || !exists) {
        broken.push(`${file}: ${target} (no such file in the repository)`)
        continue
      }
      if (anchor !== undefined && (!linked.endsWith('.md') || !anchors(read(linked)).has(anchor))) {
        broken.push(`${file}: ${target} (no heading with that anchor in ${linked})`)
      }
    }
  }
  t.deepEqual(broken, [])
})

test("the README's links work where the registry shows it: to a heading of its own, or the repository's address", (t) => {
  const relative = [...prose(read('README.md')).matchAll(/\]\(([^)\s]+)\)/g)]
    .map(([, link]) => link)
    .filter((link) => !link.startsWith('#') && !/^[a-z][a-z+.-]*:/i.test(link))
  t.deepEqual(relative, [])
})

/** Text files of the repository where comments and documents may cite documents. */
const citingFiles = [...repositoryFiles].filter(
  (file) => /\.(m?ts|mjs|cjs|js|rs|md|sh|toml|json)$/.test(file) && !file.startsWith('benchmark/results/') && file !== 'package-lock.json',
)
const thisFile = relative(root, import.meta.filename)

test('no file cites a document that is not in the repository', (t) => {
  // Design notes that were never part of the repository; their facts are in docs/ now.
  const outside = /\b(DESIGN\.md|harmony-reference\.md|peer-parsers-and-failures\.md|napi-notes\.md|shared\/docs)\b/
  const citations = citingFiles
    .filter((file) => file !== thisFile)
    .flatMap((file) =>
      read(file)
        .split('\n')
        .flatMap((line, i) => (outside.test(line) ? [`${file}:${i + 1}: ${line.trim()}`] : [])),
    )
  t.deepEqual(citations, [])
})

test('every citation of a section of the documents names a heading of that document', (t) => {
  const broken: string[] = []
  let checked = 0
  for (const file of citingFiles) {
    // `docs/API.md "Errors"`, `docs/API.md ("Errors")`, `SEMANTICS.md, "Header rules"`, `README "Quick start"`
    for (const [, name, heading] of read(file).matchAll(/\b((?:docs\/)?[A-Z][A-Z_]*\.md|README)\b,? \(?"([^"\n]+)"/g)) {
      const document = name === 'README' ? 'README.md' : [name, `docs/${name}`].find((f) => documents.includes(f))
      checked++
      if (document === undefined) broken.push(`${file}: ${name} is not a document of the repository`)
      else if (!headings(read(document)).includes(heading)) broken.push(`${file}: ${document} has no heading "${heading}"`)
    }
  }
  t.true(checked > 0, 'the documents are cited somewhere')
  t.deepEqual(broken, [])
})
