// Whether the Rust steps of `npm test` can run here. An install without cargo runs on the TypeScript
// implementation, so its checks must not stop at "cargo: not found": the Rust steps are skipped with a
// note, except in CI, which must check the native core.
import { spawnSync } from 'node:child_process'

/** Exits (0 with a note, or 1 in CI) unless `cargo <subcommand> --version` runs; `skipped` says what is skipped. */
export function requireCargo(task, subcommand, skipped, install) {
  const probe = spawnSync('cargo', subcommand === null ? ['--version'] : [subcommand, '--version'], { stdio: 'ignore' })
  if (!probe.error && probe.status === 0) return
  const missing = subcommand === null ? 'cargo is' : `cargo ${subcommand} is`
  if (process.env.CI) {
    console.error(`${task}: ${missing} not available, and CI must check the Rust core`)
    process.exit(1)
  }
  console.warn(`${task}: ${missing} not installed here: ${skipped}. ${install}`)
  process.exit(0)
}
