// The Rust part of `npm run lint`: rustfmt (rustfmt.toml) and clippy with warnings as errors, on the workspace
// (crate/core, crate/node, all targets) and on the fuzz crate, which is a workspace of its own. Every step
// runs, so one report shows every failure. Skipped with a note where cargo, rustfmt or clippy is missing,
// except in CI (cargo.mjs).
import { spawnSync } from 'node:child_process'
import { requireCargo } from './cargo.mjs'

const skipped = 'the Rust lint is skipped (the package runs on its TypeScript implementation)'
requireCargo('lint', null, skipped, 'Install Rust to run it.')
requireCargo('lint', 'fmt', skipped, 'Run: rustup component add rustfmt clippy')
requireCargo('lint', 'clippy', skipped, 'Run: rustup component add rustfmt clippy')

const FUZZ = ['--manifest-path', 'crate/core/fuzz/Cargo.toml']
const steps = [
  ['fmt', '--all', '--', '--check'],
  ['fmt', ...FUZZ, '--', '--check'],
  ['clippy', '--workspace', '--all-targets', '--', '-D', 'warnings'],
  ['clippy', ...FUZZ, '--all-targets', '--', '-D', 'warnings'],
]
const failed = steps.filter((args) => spawnSync('cargo', args, { stdio: 'inherit' }).status !== 0)
for (const args of failed) console.error(`lint: cargo ${args.join(' ')} failed`)
process.exit(failed.length === 0 ? 0 : 1)
