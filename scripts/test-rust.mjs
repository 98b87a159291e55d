// `npm run test:rust`: the Rust core's tests. An install without cargo runs on the TypeScript implementation,
// so its tests must not stop at "cargo: not found": they are skipped with a note, except in CI, which must
// test the native core.
import { spawnSync } from 'node:child_process'

const probe = spawnSync('cargo', ['--version'], { stdio: 'ignore' })
if (probe.error || probe.status !== 0) {
  if (process.env.CI) {
    console.error('test:rust: cargo is not available, and CI must test the Rust core')
    process.exit(1)
  }
  console.warn(
    'test:rust: cargo is not installed here: the Rust core tests are skipped (the package runs on its TypeScript implementation). Install Rust to run them.',
  )
  process.exit(0)
}
const run = spawnSync('cargo', ['test', '--workspace', '--release'], { stdio: 'inherit' })
process.exit(run.status ?? 1)
