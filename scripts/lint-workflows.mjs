// Checks the GitHub Actions workflows (.github/workflows/*.yml) with actionlint, which also runs shellcheck on
// their `run:` scripts when shellcheck is on PATH. The workflows cannot run here, so this is what stands between a
// typo in the release workflow and a failed release. actionlint is a Go program: built once with `go install`
// into $XDG_CACHE_HOME/harmony-stream (~/.cache without it), then reused. Without Go, or without shellcheck,
// CI fails, saying so; a clone notes it once and goes on (without Go, the workflows are not checked).
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'

const VERSION = 'v1.7.12'
const root = resolve(import.meta.dirname, '..')
const dir = join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'harmony-stream', 'actionlint', VERSION)
const binary = join(dir, process.platform === 'win32' ? 'actionlint.exe' : 'actionlint')
const found = (command) => spawnSync(command, ['--version'], { stdio: 'ignore' }).status === 0
// CI must check the workflows fully; a clone notes what is left unchecked and goes on.
const missing = (command, unchecked) => {
  if (process.env.CI) {
    console.error(`lint-workflows: ${command} is not on PATH, and CI needs it to check the workflows`)
    process.exit(1)
  }
  console.warn(`lint-workflows: ${command} is not on PATH, so ${unchecked} not checked`)
}

// Go's own installer puts it in /usr/local/go/bin, which a non-login shell may not have on PATH.
// `go version`, not `--version`: go has no such flag.
const go = spawnSync('go', ['version'], { stdio: 'ignore' }).status === 0 ? 'go' : '/usr/local/go/bin/go'

if (!existsSync(binary)) {
  if (spawnSync(go, ['version'], { stdio: 'ignore' }).status !== 0) {
    missing('go (actionlint is built with it)', 'the workflows are')
    process.exit(0)
  }
  console.warn(`lint-workflows: building actionlint ${VERSION} into ${dir} (once)`)
  const built = spawnSync(go, ['install', `github.com/rhysd/actionlint/cmd/actionlint@${VERSION}`], {
    env: { ...process.env, GOBIN: dir },
    stdio: 'inherit',
  })
  if (built.status !== 0 || !existsSync(binary)) {
    console.error(`lint-workflows: go install of actionlint ${VERSION} failed`)
    process.exit(built.status || 1)
  }
}

if (!found('shellcheck')) missing('shellcheck', 'the run: scripts of the workflows are')

const workflows = readdirSync(join(root, '.github', 'workflows'))
  .filter((file) => file.endsWith('.yml'))
  .map((file) => `.github/workflows/${file}`)
const lint = spawnSync(binary, workflows, { cwd: root, stdio: 'inherit' })
if (lint.error) console.error(`lint-workflows: ${binary} did not run: ${lint.error.message}`)
process.exit(lint.status ?? 1)
