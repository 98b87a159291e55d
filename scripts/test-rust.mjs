// `npm run test:rust`: the Rust core's tests (skipped with a note where cargo is missing, except in CI: cargo.mjs).
import { spawnSync } from 'node:child_process'
import { requireCargo } from './cargo.mjs'

requireCargo(
  'test:rust',
  null,
  'the Rust core tests are skipped (the package runs on its TypeScript implementation)',
  'Install Rust to run them.',
)
const run = spawnSync('cargo', ['test', '--workspace', '--release'], { stdio: 'inherit' })
process.exit(run.status ?? 1)
