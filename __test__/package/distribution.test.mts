/**
 * The package as a user installs it: packed as it is published (scripts/pack.mjs), installed with npm into an
 * empty project on a PATH without cargo. The main tarball alone runs on TypeScript and says so where native is
 * asked for; with this machine's platform package beside it, it runs native, as a small install without the
 * gateway, which then says in one line to install harmony-stream-gateway; with that package too, `harmony-stream
 * serve` answers. publint and arethetypeswrong check the tarball; every entry's typings compile in a strict
 * `nodenext` program without `skipLibCheck`; the AI SDK entry without the AI SDK names what to install, in both
 * module systems.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'

import test from 'ava'

import { nativeTest } from '../helpers/harmony.mjs'

const require = createRequire(import.meta.url)
const root = join(import.meta.dirname, '..', '..')
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  name: string
  version: string
  devDependencies: Record<string, string>
}
const { nativeDistribution } = require('../../dist/backend/native-platform.js') as typeof import('../../src/backend/native-platform.js')
const { platform, packageName } = nativeDistribution()
const native = nativeTest(test)

const work = mkdtempSync(join(tmpdir(), 'harmony-stream-distribution-'))
test.after.always(() => rmSync(work, { recursive: true, force: true }))

// A PATH without cargo: the user's machine has no Rust, and nothing may try to build.
const PATH = (process.env.PATH ?? '')
  .split(delimiter)
  .filter((dir) => !/cargo|rustup/.test(dir))
  .join(delimiter)
const env = { ...process.env, PATH, HARMONY_STREAM_IMPL: undefined, NAPI_RS_NATIVE_LIBRARY_PATH: undefined }

/**
 * The tarballs, packed once as the release packs them (`npm run pack`, through npm: its `prepack` hook runs
 * first): the main one, the gateway's, and this machine's platform package where built.
 */
const packed = (() => {
  let tarballs: string[] | undefined
  return () => {
    tarballs ??= execFileSync(
      'npm',
      ['run', '--silent', 'pack', '--', '--prebuilt', '--out', join(work, 'pack'), ...(NATIVE_BUILT ? ['--platform'] : [])],
      { cwd: root, encoding: 'utf8' },
    )
      .trim()
      .split('\n')
    return { main: tarballs[0]!, gateway: tarballs[1]!, platform: tarballs[2] }
  }
})()
const NATIVE_BUILT = readdirSync(root).includes(nativeDistribution().localFile)

function npm(cwd: string, args: string[]): { stdout: string; stderr: string; status: number | null } {
  return spawnSync('npm', [...args, '--no-audit', '--no-fund', '--prefer-offline'], { cwd, env, encoding: 'utf8' })
}

/** An empty project with `packages` installed, as `npm install` puts them. */
function project(name: string, packages: string[]): { dir: string; install: { stdout: string; stderr: string } } {
  const dir = join(work, name)
  mkdirSync(dir)
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, version: '1.0.0', private: true }))
  const install = npm(dir, ['install', ...packages])
  if (install.status !== 0) throw new Error(`npm install ${packages.join(' ')} failed:\n${install.stderr}`)
  return { dir, install }
}

function node(cwd: string, args: string[], extra: Record<string, string> = {}) {
  return spawnSync(process.execPath, args, { cwd, env: { ...env, ...extra }, encoding: 'utf8' })
}

const implementationOf = (dir: string) => ({
  commonjs: node(dir, ['-e', "console.log(require('harmony-stream').implementation)"]),
  module: node(dir, ['--input-type=module', '-e', "import { implementation } from 'harmony-stream'; console.log(implementation)"]),
})

test.serial(
  'the main tarball alone installs without a warning and runs on TypeScript, and forcing native says where it comes from',
  (t) => {
    const { dir, install } = project('main-only', [packed().main])
    t.notRegex(install.stderr, /install script|allowScripts|prepare/i, 'no lifecycle script for npm to warn about')
    const { commonjs, module } = implementationOf(dir)
    t.is(commonjs.stdout, 'js\n')
    t.is(commonjs.stderr, '', 'no notice unless native is asked for')
    t.is(module.stdout, 'js\n')
    const forced = node(dir, ['-e', "try { require('harmony-stream') } catch (e) { console.log(e.name, e.code, e.message) }"], {
      HARMONY_STREAM_IMPL: 'native',
    })
    t.true(forced.stdout.startsWith('HarmonySetupError native-unavailable HARMONY_STREAM_IMPL=native'), forced.stdout)
    t.true(forced.stdout.includes(`this platform (${platform})`), forced.stdout)
    t.true(forced.stdout.includes(`npm install ${packageName}@${manifest.version}`), forced.stdout)
    t.regex(forced.stdout, /HARMONY_STREAM_IMPL=js/)
    t.notRegex(forced.stdout, /npm run build:native/, 'no advice that needs the repository')
  },
)

test.serial('harmony-stream/ai-sdk without the AI SDK names the package to install, in both module systems', (t) => {
  const { dir } = project('no-ai-sdk', [packed().main])
  const script = (load: string) =>
    `${load}.then((m) => m.createHarmony({ engine: { generate() {} } }))` +
    '.catch((e) => console.log(e.name, e.code, e.message)).then(() => console.log("still running"))'
  for (const [system, load] of [
    ['commonjs', "Promise.resolve().then(() => require('harmony-stream/ai-sdk'))"],
    ['module', "import('harmony-stream/ai-sdk')"],
  ] as const) {
    const run = node(dir, system === 'module' ? ['--input-type=module', '-e', script(load)] : ['-e', script(load)])
    t.is(run.status, 0, `${system}: ${run.stderr}`)
    t.regex(run.stdout, /^HarmonySetupError package-missing harmony-stream\/ai-sdk needs the package @ai-sdk\/provider/, system)
    t.regex(run.stdout, /npm install ai@6/, system)
    t.regex(run.stdout, /still running\n$/, system)
  }
})

native('with the platform package beside it, the package runs native', (t) => {
  const { main, platform: platformTarball } = packed()
  const { dir } = project('with-platform', [main, platformTarball!])
  // The parser's install: no server's packages. (Before harmony-stream-gateway held them: 138 packages, 77.7 MB.)
  const { packages, bytes } = installed(dir)
  t.true(packages <= 25, `${packages} packages`)
  t.true(bytes <= 45e6, `${(bytes / 1e6).toFixed(1)} MB`)
  t.log(`harmony-stream with its platform package: ${packages} packages, ${(bytes / 1e6).toFixed(1)} MB`)
  const { commonjs, module } = implementationOf(dir)
  t.is(commonjs.stdout, 'native\n', commonjs.stderr)
  t.is(module.stdout, 'native\n', module.stderr)
  const parsed = node(
    dir,
    ['-e', "console.log(require('harmony-stream').parseCompletion([200005, 17196, 200008, 13225]).at(-1).content)"],
    {
      HARMONY_STREAM_IMPL: 'native',
    },
  )
  t.is(parsed.stdout, 'Hello\n')
})

/** What an install put in node_modules: its packages (npm's own record of them) and the bytes of their files. */
function installed(dir: string): { packages: number; bytes: number } {
  const record = JSON.parse(readFileSync(join(dir, 'node_modules', '.package-lock.json'), 'utf8')) as { packages: object }
  let bytes = 0
  for (const file of readdirSync(join(dir, 'node_modules'), { recursive: true, encoding: 'utf8' })) {
    const stat = lstatSync(join(dir, 'node_modules', file))
    if (stat.isFile()) bytes += stat.size
  }
  return { packages: Object.keys(record.packages).length, bytes }
}

native('without harmony-stream-gateway, the gateway says in one line to install it: harmony-stream/server throws, serve exits 2', (t) => {
  const { main, platform: platformTarball } = packed()
  const { dir } = project('no-gateway', [main, platformTarball!])
  const install = `npm install harmony-stream-gateway@${manifest.version}`
  const loaded = node(dir, [
    '-e',
    "try { require('harmony-stream/server') } catch (e) { console.log(JSON.stringify([e.name, e.code, e.message])) }",
  ])
  const [name, code, message] = JSON.parse(loaded.stdout) as string[]
  t.deepEqual([name, code], ['HarmonySetupError', 'package-missing'])
  t.true(message!.endsWith(install), message)
  t.false(message!.includes('\n'), 'one line')
  const imported = node(dir, [
    '--input-type=module',
    '-e',
    "import('harmony-stream/server').catch((e) => console.log(e.code)).then(() => console.log('still running'))",
  ])
  t.is(imported.stdout, 'package-missing\nstill running\n', 'an import that fails is a rejection to catch, not a crash')
  const served = spawnSync('npx', ['--no', 'harmony-stream', 'serve', '--engine', 'replay'], { cwd: dir, env, encoding: 'utf8' })
  t.is(served.status, 2)
  t.is(served.stderr, `harmony-stream serve: ${message}\n`, 'one line, no stack')
  t.is(served.stdout, '')
})

/** The processes under `pid` (children, theirs, …), from `ps`. */
function descendants(pid: number): number[] {
  const parents = execFileSync('ps', ['-eo', 'pid=,ppid='], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((line) => line.trim().split(/\s+/).map(Number) as [number, number])
  const found: number[] = []
  for (let i = -1; i < found.length; i++) {
    const parent = i < 0 ? pid : found[i]
    for (const [child, of] of parents) if (of === parent) found.push(child)
  }
  return found
}

/**
 * `harmony-stream serve ARGS` in `dir`, the command npm linked (node_modules/.bin, what npx runs, without npx
 * between: a SIGTERM goes to the gateway itself), until it prints where it listens; its base URL.
 */
async function serving(dir: string, args: string[]): Promise<{ child: ChildProcess; url: string }> {
  const bin = join(dir, 'node_modules', '.bin', 'harmony-stream')
  const child = spawn(process.execPath, [bin, 'serve', ...args], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stderr!.on('data', (chunk) => (output += chunk))
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (chunk) => {
      output += chunk
      const match = /(http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(output)
      if (match) resolve(match[1]!)
    })
    child.once('exit', (code) => reject(new Error(`serve exited (${code}) before listening: ${output}`)))
  })
  return { child, url }
}

test.serial(
  'with harmony-stream-gateway beside it, harmony-stream serve answers Chat, Responses kept and read back, and Messages',
  async (t) => {
    const { main, gateway, platform: platformTarball } = packed()
    const { dir } = project('with-gateway', [main, gateway, ...(platformTarball === undefined ? [] : [platformTarball])])
    t.log(`with harmony-stream-gateway: ${installed(dir).packages} packages, ${(installed(dir).bytes / 1e6).toFixed(1)} MB`)
    // The default store, SQLite: its driver is one of the gateway's optional packages, found from its folder.
    const store = `sqlite:${join(dir, 'responses.sqlite')}`
    const { child, url } = await serving(dir, ['--engine', 'replay', '--port', '0', '--response-store', store, '--render-workers', '1'])
    const exited = once(child, 'exit')
    t.teardown(() => child.kill())
    const post = (path: string, body: object) =>
      fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) })

    const chat = await post('/v1/chat/completions', { model: 'gpt-oss', stream: true, messages: [{ role: 'user', content: 'hi' }] })
    t.is(chat.status, 200)
    t.regex(chat.headers.get('content-type') ?? '', /^text\/event-stream/)
    const events = await chat.text()
    t.regex(events, /^data: \{"id":"chatcmpl-/)
    t.true(events.endsWith('data: [DONE]\n\n'), events.slice(-200))

    const created = (await (await post('/v1/responses', { model: 'gpt-oss', input: 'hi', store: true })).json()) as {
      id: string
      status: string
    }
    t.is(created.status, 'completed')
    const kept = await fetch(`${url}/v1/responses/${created.id}`)
    t.is(kept.status, 200)
    t.like(await kept.json(), { id: created.id, object: 'response', status: 'completed' })

    const message = await post('/v1/messages', { model: 'gpt-oss', max_tokens: 200, messages: [{ role: 'user', content: 'hi' }] })
    t.is(message.status, 200)
    t.like(await message.json(), { type: 'message', role: 'assistant' })

    child.kill('SIGTERM')
    const [code] = await exited
    t.is(code, 0)

    // Through npx, as the README starts it: a supervisor signals what it started, npx, which exits without
    // passing the signal on; the gateway, its launcher gone, shuts down as on SIGTERM (docs/OPERATIONS.md).
    const npx = spawn('npx', ['--no', 'harmony-stream', 'serve', '--engine', 'replay', '--port', '0', '--response-store', 'memory'], {
      cwd: dir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let said = ''
    npx.stdout!.on('data', (chunk) => (said += chunk))
    // The pipe ends once every process holding it has exited: npx and the gateway it started.
    const ended = once(npx.stdout!, 'end')
    const served = await new Promise<string>((resolve, reject) => {
      npx.stdout!.on('data', () => {
        const match = /(http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(said)
        if (match) resolve(match[1]!)
      })
      npx.once('exit', (exit) => reject(new Error(`npx exited (${exit}) before the gateway listened: ${said}`)))
    })
    // Should the gateway outlive the test, it is not left running.
    const gateways = descendants(npx.pid!)
    t.teardown(() => {
      for (const pid of gateways) {
        try {
          process.kill(pid, 'SIGKILL')
        } catch {
          // gone, as it should be
        }
      }
    })
    t.is((await fetch(`${served}/health`)).status, 200)
    npx.kill('SIGTERM')
    await ended
    t.regex(said, /shutting down \(its launcher exited\)/)
    t.regex(said, /harmony-stream gateway: shut down\n$/)
    await t.throwsAsync(fetch(`${served}/health`), undefined, 'nothing listens any more')
  },
)

test.serial("every entry's typings compile in a strict nodenext program without skipLibCheck, in both module systems", (t) => {
  const pinned = (name: string) => `${name}@${manifest.devDependencies[name]}`
  // harmony-stream/server's typings name the gateway's packages' types: it is used with harmony-stream-gateway.
  const { dir } = project('typings', [
    packed().main,
    packed().gateway,
    pinned('typescript'),
    pinned('@types/node'),
    pinned('@ai-sdk/provider'),
  ])
  const program = `
    import { HarmonyStreamParser, implementation, type HarmonyBatch } from 'harmony-stream'
    import { createEngine, EngineGroup } from 'harmony-stream/engines'
    import { createHarmony, type HarmonyProvider } from 'harmony-stream/ai-sdk'
    import { createGateway, type GatewayOptions } from 'harmony-stream/server'

    const batch: HarmonyBatch = new HarmonyStreamParser().push([200005])
    const which: 'native' | 'js' = implementation
    const engine = createEngine('replay', { completions: [[200005]] })
    const group = new EngineGroup([engine])
    const provider: HarmonyProvider = createHarmony({ engine })
    const options: GatewayOptions = { engine: group }
    export { batch, which, provider, options, createGateway }
  `
  writeFileSync(join(dir, 'user.mts'), program)
  writeFileSync(join(dir, 'user.cts'), program)
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        skipLibCheck: false,
        module: 'nodenext',
        moduleResolution: 'nodenext',
        target: 'es2022',
      },
      files: ['user.mts', 'user.cts'],
    }),
  )
  const check = node(dir, [join(dir, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'])
  t.is(check.stdout + check.stderr, '')
  t.is(check.status, 0)
})

test.serial('publint and arethetypeswrong find no problem in the tarball', (t) => {
  const { main, gateway } = packed()
  const bin = (name: string) => join(root, 'node_modules', '.bin', name)
  for (const tarball of [main, gateway]) {
    const publint = spawnSync(bin('publint'), ['run', tarball, '--strict'], { cwd: root, env, encoding: 'utf8' })
    t.is(publint.status, 0, publint.stdout + publint.stderr)
    t.notRegex(publint.stdout, /Suggestions|Warnings|Errors/, publint.stdout)
  }
  const attw = spawnSync(bin('attw'), [main, '--format', 'json'], { cwd: root, env, encoding: 'utf8' })
  const report = JSON.parse(attw.stdout) as { analysis: { problems: unknown[] } }
  t.deepEqual(report.analysis.problems, [])
  t.is(attw.status, 0)
})

test.serial('the tarball holds what it needs and nothing of the repository: maps carry their sources, no addon, no scripts', (t) => {
  const { main } = packed()
  const listing = execFileSync('tar', ['-tzf', main], { encoding: 'utf8' }).trim().split('\n')
  t.false(
    listing.some((file) => file.endsWith('.node')),
    'the addon comes in the platform packages',
  )
  for (const needed of ['package/LICENSE', 'package/README.md', 'package/CHANGELOG.md', 'package/native.cjs', 'package/dist/index.mjs'])
    t.true(listing.includes(needed), needed)
  const stage = join(work, 'pack', manifest.name)
  const published = JSON.parse(readFileSync(join(stage, 'package.json'), 'utf8')) as Record<string, unknown>
  t.is(published.scripts, undefined)
  t.is(published.devDependencies, undefined)
  t.is((published.optionalDependencies as Record<string, string>)[packageName], manifest.version)
  const maps = listing.filter((file) => file.endsWith('.js.map'))
  t.true(maps.length > 50)
  for (const map of maps) {
    const { sources, sourcesContent } = JSON.parse(readFileSync(join(stage, map.slice('package/'.length)), 'utf8')) as {
      sources: string[]
      sourcesContent?: string[]
    }
    t.is(sourcesContent?.length, sources.length, `${map} carries its sources`)
  }
})

test.serial(
  "the gateway's packages are harmony-stream-gateway's dependencies, at harmony-stream's version, and not harmony-stream's",
  (t) => {
    packed()
    const read = (name: string) =>
      JSON.parse(readFileSync(join(work, 'pack', name, 'package.json'), 'utf8')) as {
        version: string
        dependencies: Record<string, string>
        optionalDependencies?: Record<string, string>
      }
    const main = read(manifest.name)
    const gateway = read('harmony-stream-gateway')
    // The repository's file says what is published (a release sets its version with the others').
    const source = JSON.parse(readFileSync(join(root, 'packages', 'gateway', 'package.json'), 'utf8')) as typeof gateway
    t.deepEqual([source.version, source.dependencies[manifest.name]], [manifest.version, manifest.version])
    t.is(gateway.version, manifest.version)
    t.is(gateway.dependencies[manifest.name], manifest.version, 'exactly the harmony-stream of its own version')
    const { [manifest.name]: _, ...own } = gateway.dependencies
    for (const [name, version] of Object.entries({ ...own, ...gateway.optionalDependencies })) {
      t.is(version, manifest.devDependencies[name], `${name}: the version the repository tests with`)
      t.false(name in main.dependencies || name in (main.optionalDependencies ?? {}), `${name} is not harmony-stream's`)
    }
    t.deepEqual(Object.keys(own).sort(), ['@opentelemetry/api', 'pino', 'prom-client', 'ws'])
  },
)
