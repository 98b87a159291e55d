#!/usr/bin/env node
/**
 * A real llama.cpp server and a tiny model for the engine integration tests (__test__/engines-real/).
 *
 *   node scripts/llama-server.mjs           builds what is missing, then prints {server, model, chains} as JSON
 *   node scripts/llama-server.mjs --check   builds nothing; prints the same, with null for what is not built
 *
 * The server: `llama-server` built from the llama.cpp sources that llama-cpp-python's sdist vendors (a pinned
 * version, fetched with pip, so the tests meet one known server), CPU only, Release, no HTTPS, no web UI, no
 * tests or examples, statically linked. The model: a bigram GGUF with gpt-oss's o200k_harmony vocabulary,
 * written by scripts/make-bigram-model.py with the `gguf` package (pinned) from a virtualenv; its sidecar JSON
 * names the prompt id that starts each designed chain of ids.
 *
 * Everything lives outside the repository, in one folder keyed by the version (a cold build takes minutes, a
 * later run seconds): $HARMONY_LLAMA_CACHE, or ~/.cache/harmony-stream/llama-server-<version>/ (XDG_CACHE_HOME
 * is honoured). The model's file name carries a hash of its script, so editing the script makes a new model.
 */
import { spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The llama-cpp-python release whose vendored llama.cpp is built. */
export const LLAMA_CPP_PYTHON_VERSION = '0.3.36'
/** The `gguf` package (the one that sdist's llama.cpp vendors as gguf-py) the model script writes with. */
export const GGUF_VERSION = '0.19.0'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const MODEL_SCRIPT = join(root, 'scripts', 'make-bigram-model.py')
const VOCABULARY = join(root, 'node_modules', 'gpt-tokenizer', 'data', 'o200k_base.tiktoken')

// CPU only and self-contained: no HTTPS (nothing to download at run time), no web UI (neither built with npm
// nor fetched prebuilt), static libraries (the binary is copied out of the build tree), no -march=native
// (a cached binary must not die on another CPU of the same kind of machine).
const CMAKE_FLAGS = [
  '-DCMAKE_BUILD_TYPE=Release',
  '-DBUILD_SHARED_LIBS=OFF',
  '-DGGML_NATIVE=OFF',
  '-DGGML_BACKEND_DL=OFF',
  '-DLLAMA_CURL=OFF',
  '-DLLAMA_OPENSSL=OFF',
  '-DLLAMA_BUILD_TESTS=OFF',
  '-DLLAMA_BUILD_EXAMPLES=OFF',
  '-DLLAMA_BUILD_TOOLS=ON',
  '-DLLAMA_BUILD_SERVER=ON',
  '-DLLAMA_BUILD_APP=OFF',
  '-DLLAMA_BUILD_UI=OFF',
  '-DLLAMA_USE_PREBUILT_UI=OFF',
]

/** The cache folder for this version (see the top of this file). */
export function cacheDir(env = process.env) {
  if (env.HARMONY_LLAMA_CACHE) return env.HARMONY_LLAMA_CACHE
  const base = env.XDG_CACHE_HOME || join(homedir(), '.cache')
  return join(base, 'harmony-stream', `llama-server-${LLAMA_CPP_PYTHON_VERSION}`)
}

/** Where the server binary, the model and its chains file are (or will be). */
export function paths(dir = cacheDir()) {
  const key = createHash('sha256').update(readFileSync(MODEL_SCRIPT)).update(GGUF_VERSION).digest('hex').slice(0, 12)
  return {
    dir,
    server: join(dir, 'bin', 'llama-server'),
    model: join(dir, 'models', `bigram-${key}.gguf`),
    chains: join(dir, 'models', `bigram-${key}.json`),
    // The second design (make-bigram-model.py --design tools): a model that calls python at every turn.
    toolModel: join(dir, 'models', `bigram-tools-${key}.gguf`),
    toolChains: join(dir, 'models', `bigram-tools-${key}.json`),
    python: join(dir, 'venv', 'bin', 'python'),
  }
}

function run(command, args, options = {}) {
  const result = spawnSync(command, args, { stdio: ['ignore', 'inherit', 'inherit'], ...options })
  if (result.error) throw new Error(`${command}: ${result.error.message}`)
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed (${result.signal ?? `exit ${result.status}`})`)
}

const log = (message) => console.error(`llama-server: ${message}`)

/** The virtualenv both steps use (pip to fetch the sdist, `gguf` for the model). */
function ensureVenv(p) {
  if (!existsSync(p.python)) {
    log(`creating a virtualenv in ${dirname(dirname(p.python))}`)
    run('python3', ['-m', 'venv', dirname(dirname(p.python))])
  }
}

/** Builds bin/llama-server unless it is there. */
export function ensureServer(p = paths()) {
  if (existsSync(p.server)) return p.server
  ensureVenv(p)
  const work = join(p.dir, 'work')
  rmSync(work, { recursive: true, force: true })
  mkdirSync(work, { recursive: true })
  const started = Date.now()
  log(`fetching the llama-cpp-python ${LLAMA_CPP_PYTHON_VERSION} sdist`)
  run(p.python, [
    '-m',
    'pip',
    'download',
    '--quiet',
    '--disable-pip-version-check',
    '--no-deps',
    '--no-binary',
    ':all:',
    `llama-cpp-python==${LLAMA_CPP_PYTHON_VERSION}`,
    '-d',
    work,
  ])
  const sdist = join(work, `llama_cpp_python-${LLAMA_CPP_PYTHON_VERSION}.tar.gz`)
  run('tar', ['xzf', sdist, '-C', work])
  const source = join(work, `llama_cpp_python-${LLAMA_CPP_PYTHON_VERSION}`, 'vendor', 'llama.cpp')
  const build = join(work, 'build')
  log(`configuring ${source}`)
  run('cmake', ['-S', source, '-B', build, ...CMAKE_FLAGS], { stdio: ['ignore', 'ignore', 'inherit'] })
  log('building llama-server (-j2)')
  run('cmake', ['--build', build, '--target', 'llama-server', '-j2'], { stdio: ['ignore', 'ignore', 'inherit'] })
  mkdirSync(dirname(p.server), { recursive: true })
  // Copied under a temporary name, then renamed: a build cut short leaves no binary that looks complete.
  copyFileSync(join(build, 'bin', 'llama-server'), `${p.server}.partial`)
  renameSync(`${p.server}.partial`, p.server)
  writeFileSync(
    join(dirname(p.server), 'build.json'),
    `${JSON.stringify({ version: LLAMA_CPP_PYTHON_VERSION, flags: CMAKE_FLAGS }, null, 2)}\n`,
  )
  rmSync(work, { recursive: true, force: true })
  log(`built in ${Math.round((Date.now() - started) / 1000)} s`)
  return p.server
}

/** Writes the bigram model and its chains file unless they are there. */
export function ensureModel(p = paths()) {
  if ([p.model, p.chains, p.toolModel, p.toolChains].every((file) => existsSync(file))) return p.model
  ensureVenv(p)
  const ready = spawnSync(
    p.python,
    ['-c', `import sys, importlib.metadata as m; sys.exit(m.version('gguf') != ${JSON.stringify(GGUF_VERSION)})`],
    {
      stdio: 'ignore',
    },
  )
  if (ready.status !== 0) {
    log(`installing gguf ${GGUF_VERSION} into the virtualenv`)
    run(p.python, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', `gguf==${GGUF_VERSION}`])
  }
  mkdirSync(dirname(p.model), { recursive: true })
  // Models of earlier versions of the script are of no more use.
  for (const file of readdirSync(dirname(p.model))) if (file.startsWith('bigram-')) rmSync(join(dirname(p.model), file))
  const started = Date.now()
  log(`writing ${p.model}`)
  run(p.python, [MODEL_SCRIPT, '--vocabulary', VOCABULARY, '--model', p.model, '--chains', p.chains])
  run(p.python, [MODEL_SCRIPT, '--vocabulary', VOCABULARY, '--model', p.toolModel, '--chains', p.toolChains, '--design', 'tools'])
  log(`model written in ${Math.round((Date.now() - started) / 1000)} s`)
  return p.model
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const check = process.argv.includes('--check')
  const p = paths()
  if (!check) {
    ensureServer(p)
    ensureModel(p)
  }
  const built = (file) => (existsSync(file) ? file : null)
  console.log(
    JSON.stringify(
      {
        server: built(p.server),
        model: built(p.model),
        chains: built(p.chains),
        toolModel: built(p.toolModel),
        toolChains: built(p.toolChains),
      },
      null,
      2,
    ),
  )
}
