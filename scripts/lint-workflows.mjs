// Checks the GitHub Actions workflows (.github/workflows) with actionlint, which also runs shellcheck on their
// `run:` scripts where shellcheck is installed. The workflows cannot run here, so this is what stands between a
// typo in the release workflow and a failed release. actionlint is a Go program: built once with `go install`
// into ~/.cache/harmony-stream (about a minute), then reused. Without Go, CI fails and a clone notes it and
// goes on.
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'

const VERSION = 'v1.7.12'
const root = new URL('..', import.meta.url).pathname
const cache = join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'harmony-stream', `actionlint-${VERSION}`)
const binary = join(cache, process.platform === 'win32' ? 'actionlint.exe' : 'actionlint')

// Go's own installer puts it in /usr/local/go/bin, which a non-login shell may not have on PATH.
const go = spawnSync('go', ['version'], { stdio: 'ignore' }).status === 0 ? 'go' : '/usr/local/go/bin/go'

if (!existsSync(binary)) {
  if (spawnSync(go, ['version'], { stdio: 'ignore' }).status !== 0) {
    if (process.env.CI) {
      console.error('lint-workflows: Go is needed to build actionlint, and is not on PATH')
      process.exit(1)
    }
    console.warn('lint-workflows: the workflows are not checked (actionlint needs Go to build it)')
    process.exit(0)
  }
  const built = spawnSync(go, ['install', `github.com/rhysd/actionlint/cmd/actionlint@${VERSION}`], {
    env: { ...process.env, GOBIN: cache },
    stdio: 'inherit',
  })
  if (built.status !== 0) process.exit(built.status ?? 1)
}

const workflows = readdirSync(join(root, '.github', 'workflows'))
  .filter((file) => /\.ya?ml$/.test(file))
  .map((file) => join('.github', 'workflows', file))
const lint = spawnSync(binary, workflows, { cwd: root, stdio: 'inherit' })
process.exit(lint.status ?? 1)
