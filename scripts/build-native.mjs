// Builds the native addon in release mode with @napi-rs/cli. Installing must not depend on it: without
// cargo, or if the build fails, this says so once and exits 0, and the package runs on the TypeScript
// implementation. HARMONY_STREAM_SKIP_NATIVE=1 skips the build.
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

const root = new URL('..', import.meta.url)
const skip = (why) => {
  console.warn(`harmony-stream: native addon not built (${why}); the TypeScript implementation will be used.`)
  process.exit(0)
}

if (process.env.HARMONY_STREAM_SKIP_NATIVE === '1') skip('HARMONY_STREAM_SKIP_NATIVE=1')
if (spawnSync('cargo', ['--version'], { stdio: 'ignore' }).status !== 0) skip('cargo was not found')

let napi
try {
  const cli = createRequire(import.meta.url).resolve('@napi-rs/cli/package.json')
  napi = join(dirname(cli), 'dist', 'cli.js')
} catch {
  skip('@napi-rs/cli is not installed (it is a devDependency)')
}
const args = [
  napi,
  'build',
  '--platform',
  '--release',
  '--manifest-path',
  'crate/node/Cargo.toml',
  '--package-json-path',
  'package.json',
  '--output-dir',
  '.',
  '--js',
  'native.cjs',
  '--dts',
  'native.d.ts',
]
const result = spawnSync(process.execPath, args, { cwd: root, stdio: 'inherit' })
if (result.status !== 0) skip(`the build failed with status ${result.status}`)
