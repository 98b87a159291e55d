// Runs a benchmark on this checkout and on an earlier commit, side by side in one run, and prints each
// case's ratio: the way to say whether a change made the hot path slower (machines here are shared and
// noisy, so numbers from different runs do not compare).
//
//   node scripts/bench-against.mjs REV [bench|side-by-side|gateway|responses] [rounds]
//   BENCH_QUICK=1 BENCH_FILTER=SsePool node scripts/bench-against.mjs HEAD~3 bench 2
//
// REV is checked out (detached) under target/bench-against/REV, with this checkout's node_modules and native
// addon (rebuilt there when crate/ differs), and its own dist/ built. The two trees run alternately, `rounds`
// times each (default 2), each with its own benchmark sources (a benchmark module REV lacks is copied there from
// this checkout); a case's number is its median over the rounds.
import { execFileSync, spawnSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, readdirSync, symlinkSync } from 'node:fs'
import { join, resolve } from 'node:path'

const here = resolve(import.meta.dirname, '..')
const [rev, which = 'bench', roundsText = '2'] = process.argv.slice(2)
const BENCHES = {
  // | case | M tokens/s | …: higher is better.
  bench: { file: 'benchmark/bench.mts', key: [0], values: [{ column: 1, name: 'M tokens/s', higher: true }] },
  // | case | native M tokens/s | js M tokens/s | native ÷ js (best) | native ÷ js (median) | samples |: each tree's
  // ratios of native to js, measured side by side in its own runs.
  'side-by-side': {
    file: 'benchmark/side-by-side.mts',
    key: [0],
    values: [
      { column: 3, name: 'native ÷ js (best)', higher: true },
      { column: 4, name: 'native ÷ js (median)', higher: true },
    ],
  },
  // | clients | interval | case | k tokens/s | TTFB | gaps | CPU ms per 1M tokens | GC |
  gateway: {
    file: 'benchmark/gateway.mts',
    key: [0, 1, 2],
    values: [
      { column: 3, name: 'k tokens/s', higher: true },
      { column: 6, name: 'CPU ms / 1M tokens', higher: false },
    ],
  },
  // | clients | case | k tokens/s | first event | gaps | CPU ms per 1M tokens |
  responses: {
    file: 'benchmark/responses-transports.mts',
    key: [0, 1],
    values: [
      { column: 2, name: 'k tokens/s', higher: true },
      { column: 5, name: 'CPU ms / 1M tokens', higher: false },
    ],
  },
}
const bench = BENCHES[which]
const rounds = Number(roundsText)
if (!rev || !bench || !Number.isInteger(rounds) || rounds < 1) {
  console.error('usage: node scripts/bench-against.mjs REV [bench|side-by-side|gateway|responses] [rounds]')
  process.exit(2)
}

const git = (...args) => execFileSync('git', args, { cwd: here, encoding: 'utf8' }).trim()
const commit = git('rev-parse', '--short', rev)
const base = join(here, 'target', 'bench-against', commit)
if (!existsSync(base)) {
  mkdirSync(join(here, 'target', 'bench-against'), { recursive: true })
  git('worktree', 'add', '--detach', base, commit)
  symlinkSync(join(here, 'node_modules'), join(base, 'node_modules'))
  const sameRust =
    spawnSync('git', ['diff', '--quiet', commit, 'HEAD', '--', 'crate', 'Cargo.toml', 'Cargo.lock'], { cwd: here }).status === 0
  if (sameRust) for (const file of readdirSync(here).filter((f) => f.endsWith('.node'))) cpSync(join(here, file), join(base, file))
  else execFileSync('npm', ['run', 'build:native'], { cwd: base, stdio: 'inherit' })
  execFileSync('npm', ['run', 'build:ts'], { cwd: base, stdio: 'inherit' })
}
// The benchmarks write their inputs under target/ (ignored by git, so a new worktree has none).
mkdirSync(join(base, 'target'), { recursive: true })
// A benchmark REV does not have yet (side-by-side.mts, and the modules it added beside it) runs there as it is
// here: its modules are copied in, and REV's own are left as they are.
for (const file of readdirSync(join(here, 'benchmark'))) {
  if (file.endsWith('.mts') && !existsSync(join(base, 'benchmark', file)))
    cpSync(join(here, 'benchmark', file), join(base, 'benchmark', file))
}

/** The markdown rows of one run: key → numbers of the value columns. */
function runOnce(cwd) {
  const run = spawnSync(process.execPath, ['--import', 'tsx', bench.file], { cwd, encoding: 'utf8', env: process.env, maxBuffer: 64 << 20 })
  if (run.status !== 0) throw new Error(`${bench.file} failed in ${cwd}:\n${run.stderr}`)
  const rows = new Map()
  for (const line of run.stdout.split('\n')) {
    if (!line.startsWith('|') || line.startsWith('|--') || line.startsWith('|-')) continue
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim())
    const numbers = bench.values.map(({ column }) => Number.parseFloat(cells[column]))
    if (numbers.some(Number.isNaN)) continue
    rows.set(bench.key.map((k) => cells[k]).join(' | '), numbers)
  }
  return rows
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

const samples = { base: [], head: [] }
for (let round = 0; round < rounds; round++) {
  // Alternate which goes first, so a machine that slows down over the run favours neither.
  const order = round % 2 === 0 ? ['base', 'head'] : ['head', 'base']
  for (const side of order) {
    console.error(`round ${round + 1}/${rounds}: ${side === 'base' ? commit : 'this checkout'}`)
    samples[side].push(runOnce(side === 'base' ? base : here))
  }
}

const head = git('rev-parse', '--short', 'HEAD')
console.log(
  `${bench.file}: ${commit} (before) vs ${head}${git('status', '--porcelain') ? ' + uncommitted changes' : ''} (after), median of ${rounds} alternating runs each`,
)
console.log(`BENCH_QUICK=${process.env.BENCH_QUICK ?? ''} BENCH_FILTER=${process.env.BENCH_FILTER ?? ''}\n`)
console.log(`| case | ${bench.values.map((v) => `${v.name} before | after | after ÷ before`).join(' | ')} |`)
console.log(`|---|${bench.values.map(() => '---:|---:|---:').join('|')}|`)
for (const key of samples.head[0].keys()) {
  const cells = bench.values.map((_, v) => {
    const before = samples.base.map((rows) => rows.get(key)?.[v]).filter((x) => x !== undefined)
    const after = samples.head.map((rows) => rows.get(key)[v])
    if (before.length === 0) return `– | ${median(after)} | new`
    return `${median(before)} | ${median(after)} | ${(median(after) / median(before)).toFixed(2)}`
  })
  console.log(`| ${key} | ${cells.join(' | ')} |`)
}
