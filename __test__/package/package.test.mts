/**
 * The package as users get it: ESM and CommonJS entries, typings that match the runtime exports, and the
 * loader's choice of implementation (HARMONY_STREAM_IMPL, and a machine where no native binary fits).
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join, relative } from 'node:path'

import test, { type ExecutionContext } from 'ava'
import * as esm from 'harmony-stream'
import ts from 'typescript'

import { nativeTest } from '../helpers/harmony.mjs'

const require = createRequire(import.meta.url)
const root = join(import.meta.dirname, '..', '..')

const runtimeNames = (module: object) =>
  Object.keys(module)
    .filter((name) => name !== '__esModule' && name !== 'default')
    .sort()

test('import and require expose the same objects', async (t) => {
  const cjs = require('harmony-stream') as typeof esm
  t.deepEqual(runtimeNames(esm), runtimeNames(cjs))
  t.is(esm.HarmonyStreamParser, cjs.HarmonyStreamParser, 'one class identity, so instanceof works across both')
  t.is(esm.HarmonyParseError, cjs.HarmonyParseError)
  const enginesEsm = await import('harmony-stream/engines')
  const enginesCjs = require('harmony-stream/engines') as typeof enginesEsm
  t.deepEqual(runtimeNames(enginesEsm), runtimeNames(enginesCjs))
  t.is(enginesEsm.EngineError, enginesCjs.EngineError)
  const serverEsm = await import('harmony-stream/server')
  const serverCjs = require('harmony-stream/server') as typeof serverEsm
  t.deepEqual(runtimeNames(serverEsm), runtimeNames(serverCjs))
  t.is(serverEsm.createGateway, serverCjs.createGateway)
  t.true(
    new enginesCjs.EngineError('x', 'y', { engine: 'e' }) instanceof esm.HarmonyError,
    'engine errors are HarmonyErrors of the same class',
  )
})

test('the shipped typings declare exactly the runtime exports', async (t) => {
  const engines = runtimeNames(await import('harmony-stream/engines'))
  const server = runtimeNames(await import('harmony-stream/server'))
  for (const [entry, runtime] of [
    ['dist/server.d.ts', server],
    ['dist/server.d.mts', server],
    ['dist/index.d.ts', runtimeNames(esm)],
    ['dist/index.d.mts', runtimeNames(esm)],
    ['dist/engines.d.ts', engines],
    ['dist/engines.d.mts', engines],
  ] as const) {
    const program = ts.createProgram([join(root, entry)], {
      strict: true,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
    })
    const checker = program.getTypeChecker()
    const source = program.getSourceFile(join(root, entry))!
    const exports = checker.getExportsOfModule(checker.getSymbolAtLocation(source)!)
    const values = exports
      .filter((symbol) => {
        const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol
        return (target.flags & ts.SymbolFlags.Value) !== 0
      })
      .map((symbol) => symbol.name)
      .sort()
    t.deepEqual(values, runtime, entry)
  }
})

/**
 * The declarations of a TypeScript file, as `path:Container.member` (top-level ones as `path:name`), each
 * with whether its doc comment has an `@internal` tag. `path` is the file's path under its root without
 * the extension, so that src/api/parser.ts and dist/api/parser.d.ts name their declarations alike.
 */
function declarationsOf(dir: string, file: string): { key: string; internal: boolean }[] {
  const path = relative(dir, file).replace(/(\.d)?\.ts$/, '')
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true)
  const found: { key: string; internal: boolean }[] = []
  const add = (node: ts.Node, name: string, container: string | null) =>
    found.push({
      key: `${path}:${container === null ? '' : `${container}.`}${name}`,
      internal: ts.getJSDocTags(node).some((tag) => tag.tagName.text === 'internal'),
    })
  for (const statement of source.statements) {
    if (ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations) add(statement, declaration.name.getText(), null)
      continue
    }
    const named = statement as ts.Statement & { name?: ts.Node }
    if (named.name === undefined) continue
    const container = named.name.getText()
    add(statement, container, null)
    if (ts.isClassDeclaration(statement) || ts.isInterfaceDeclaration(statement)) {
      for (const member of statement.members) if (member.name !== undefined) add(member, member.name.getText(), container)
    }
  }
  return found
}

const typeScriptFiles = (dir: string, suffix: string) =>
  readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith(suffix))
    .map((file) => join(dir, file))

test('no shipped typings declare what src marks @internal', (t) => {
  const src = join(root, 'src')
  const internal = new Set(
    typeScriptFiles(src, '.ts')
      .flatMap((file) => declarationsOf(src, file))
      .filter((declaration) => declaration.internal)
      .map((declaration) => declaration.key),
  )
  t.true(internal.size > 0, 'src marks some declarations @internal (else this test checks nothing)')
  const dist = join(root, 'dist')
  const shipped = typeScriptFiles(dist, '.d.ts').flatMap((file) => declarationsOf(dist, file))
  t.true(shipped.length > 0)
  t.deepEqual(
    shipped.filter((declaration) => declaration.internal).map((declaration) => declaration.key),
    [],
    'no @internal tag in dist',
  )
  t.deepEqual(
    shipped.filter((declaration) => internal.has(declaration.key)).map((declaration) => declaration.key),
    [],
    'members marked @internal in src are stripped from the typings (tsconfig stripInternal)',
  )
})

test("the shipped typings compile in a user's program, without the internals", (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'harmony-stream-typings-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  mkdirSync(join(dir, 'node_modules'))
  symlinkSync(root, join(dir, 'node_modules', 'harmony-stream'))
  symlinkSync(join(root, 'node_modules', '@types'), join(dir, 'node_modules', '@types'))
  const program = `
    import { ChatCompletionsStream, type ChatCompletionChunk, HarmonyStreamParser, SsePool } from 'harmony-stream'
    import { EngineError } from 'harmony-stream/engines'

    const adapter = new ChatCompletionsStream({ model: 'gpt-oss-20b' })
    const chunks: ChatCompletionChunk[] = adapter.push([200005])
    const sse: string = adapter.pushSse(new Uint32Array([200008]))
    const id: number = new SsePool().add(adapter)
    const parser = new HarmonyStreamParser({ role: 'assistant' })
    const error: Error = new EngineError('x', 'y', { engine: 'e' })
    // @ts-expect-error SsePool's hooks are @internal: not in the published typings
    adapter.laneTemplate()
    // @ts-expect-error as above
    parser.laneStream()
    export { chunks, sse, id, error }
  `
  // One program as an ES module (dist/*.d.mts) and one as CommonJS (dist/*.d.ts).
  writeFileSync(join(dir, 'user.mts'), program)
  writeFileSync(join(dir, 'user.cts'), program)
  const files = [join(dir, 'user.mts'), join(dir, 'user.cts')]
  const check = ts.createProgram(files, {
    strict: true,
    noEmit: true,
    skipLibCheck: false,
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts'],
    types: ['node'],
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
  })
  const diagnostics = ts.getPreEmitDiagnostics(check).map((diagnostic) => {
    const where = diagnostic.file
      ? `${relative(dir, diagnostic.file.fileName)}:${diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start!).line + 1}: `
      : ''
    return where + ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')
  })
  t.deepEqual(diagnostics, [])
  const typings = check.getSourceFiles().map((file) => relative(root, realpathSync(file.fileName)))
  t.true(typings.includes(join('dist', 'index.d.mts')) && typings.includes(join('dist', 'index.d.ts')), 'both faces were checked')
})

test('the typings describe runtime values', (t) => {
  t.true(esm.implementation === 'native' || esm.implementation === 'js')
  t.deepEqual(esm.STOP_TOKENS, [200002, 200007, 200012])
  t.deepEqual(esm.ASSISTANT_ACTION_STOP_TOKENS, [200002, 200012])
  t.is(esm.HarmonyTokens.start, 200006)
  const parser = new esm.HarmonyStreamParser()
  t.is(parser.state, 'header')
  t.is(parser.finished, false)
})

function load(env: Record<string, string | undefined>, cwd = root): ReturnType<typeof spawnSync> {
  const script =
    "const m = require('harmony-stream'); console.log(m.implementation, m.parseCompletion([200005, 17196, 200008, 13225]).at(-1).content)"
  return spawnSync(process.execPath, ['-e', script], { cwd, env: { ...process.env, ...env }, encoding: 'utf8' })
}

/** The error of loading the package in `cwd` with native forced, as `{ message, cause }`. */
function forceNative(cwd: string, nativeLibraryPath?: string): { message: string; cause: string } {
  const script =
    "try { require('harmony-stream') } catch (e) { console.log(JSON.stringify({ message: e.message, cause: String(e.cause?.message) })) }"
  const env = { ...process.env, HARMONY_STREAM_IMPL: 'native', NAPI_RS_NATIVE_LIBRARY_PATH: nativeLibraryPath }
  const run = spawnSync(process.execPath, ['-e', script], { cwd, env, encoding: 'utf8' })
  return JSON.parse(run.stdout || 'null') ?? { message: `no error: ${run.stdout}${run.stderr}`, cause: '' }
}

test('HARMONY_STREAM_IMPL=js forces js, and other values are refused', (t) => {
  t.is(load({ HARMONY_STREAM_IMPL: 'js' }).stdout, 'js Hello\n')
  const bad = load({ HARMONY_STREAM_IMPL: 'wasm' })
  t.not(bad.status, 0)
  t.regex(String(bad.stderr), /HARMONY_STREAM_IMPL must be 'native' or 'js', not 'wasm'/)
})

nativeTest(test)('HARMONY_STREAM_IMPL=native forces native, which is also the default where it loads', (t) => {
  t.is(load({ HARMONY_STREAM_IMPL: 'native' }).stdout, 'native Hello\n')
  t.is(load({ HARMONY_STREAM_IMPL: undefined }).stdout, 'native Hello\n', 'native is preferred where it loads')
})

/** A copy of the package without any .node file, as on a machine where the install had no cargo; `node_modules` holds it. */
function packageWithoutAddon(t: ExecutionContext): { dir: string; pkg: string } {
  const dir = mkdtempSync(join(tmpdir(), 'harmony-stream-nonative-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const pkg = join(dir, 'node_modules', 'harmony-stream')
  for (const file of ['package.json', 'native.cjs', 'native.d.ts', 'dist']) cpSync(join(root, file), join(pkg, file), { recursive: true })
  // The package's runtime dependencies, as an install would put them beside it (theirs resolve from the real path).
  const { dependencies } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }
  for (const name of Object.keys(dependencies)) {
    // A scoped name (`@redis/client`) sits in its scope's folder.
    mkdirSync(dirname(join(dir, 'node_modules', name)), { recursive: true })
    symlinkSync(join(root, 'node_modules', name), join(dir, 'node_modules', name))
  }
  return { dir, pkg }
}

const { nativeDistribution } = require('../../dist/backend/native-platform.js') as typeof import('../../src/backend/native-platform.js')
const { platform, platforms, packageName, localFile } = nativeDistribution()
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string }

test('where no native binary fits, the package runs on TypeScript; forcing native names the platform package and the ways to get it', (t) => {
  const { dir } = packageWithoutAddon(t)
  const quiet = load({ HARMONY_STREAM_IMPL: undefined, NAPI_RS_NATIVE_LIBRARY_PATH: undefined }, dir)
  t.is(quiet.stdout, 'js Hello\n')
  t.is(quiet.stderr, '', 'no warning on start')
  const forced = load({ HARMONY_STREAM_IMPL: 'native', NAPI_RS_NATIVE_LIBRARY_PATH: undefined }, dir)
  t.not(forced.status, 0)
  t.true(
    String(forced.stderr).includes(
      `HARMONY_STREAM_IMPL=native, but the native addon could not be loaded: there is no native binary for this platform (${platform}). It comes in the package ${packageName}`,
    ),
    String(forced.stderr),
  )
  const { message, cause } = forceNative(dir)
  t.true(message.includes(`npm install ${packageName}@${version}`), message)
  t.regex(message, /cargo \(Rust\)/)
  t.regex(message, /HARMONY_STREAM_IMPL=js/)
  t.regex(cause, /^Cannot find native binding/, "napi-rs's error is kept as the cause")
})

test('the platform names are the ones napi-rs gives its targets and platform packages', (t) => {
  // npm/ holds a package per target of package.json's `napi.targets`, made by `napi create-npm-dirs`.
  t.deepEqual([...platforms].sort(), readdirSync(join(root, 'npm')).sort())
  for (const platform of readdirSync(join(root, 'npm'))) {
    const pkg = JSON.parse(readFileSync(join(root, 'npm', platform, 'package.json'), 'utf8')) as {
      name: string
      version: string
      main: string
    }
    t.deepEqual([pkg.name, pkg.version, pkg.main], [`harmony-stream-${platform}`, version, `harmony-stream.${platform}.node`])
  }
})

test('a native binary that is there but does not load is named, not called missing', (t) => {
  const { dir, pkg } = packageWithoutAddon(t)
  writeFileSync(join(pkg, localFile), 'not a shared library')
  const { message, cause } = forceNative(dir)
  t.true(message.includes(`the native binary ${localFile} is there but did not load`), message)
  t.regex(message, /`npm run build:native`/)
  t.regex(cause, /^Cannot find native binding/)
})

nativeTest(test)('a platform package of another version does not load, and the message says which version to install', (t) => {
  const { dir } = packageWithoutAddon(t)
  const platformPackage = join(dir, 'node_modules', packageName)
  mkdirSync(platformPackage)
  cpSync(join(root, localFile), join(platformPackage, localFile))
  writeFileSync(join(platformPackage, 'package.json'), JSON.stringify({ name: packageName, version: '0.0.1', main: localFile }))
  t.is(load({ HARMONY_STREAM_IMPL: undefined, NAPI_RS_NATIVE_LIBRARY_PATH: undefined }, dir).stdout, 'js Hello\n')
  const { message, cause } = forceNative(dir)
  t.true(message.includes(`the package ${packageName}@0.0.1 is installed but did not load`), message)
  t.true(message.includes(`reinstall ${packageName}@${version}`), message)
  t.is(cause, `${packageName} is 0.0.1, but harmony-stream ${version} needs the same version: install ${packageName}@${version}`)
  // The same package at harmony-stream's version is the native backend.
  writeFileSync(join(platformPackage, 'package.json'), JSON.stringify({ name: packageName, version, main: localFile }))
  t.is(load({ HARMONY_STREAM_IMPL: 'native', NAPI_RS_NATIVE_LIBRARY_PATH: undefined }, dir).stdout, 'native Hello\n')
})

test("napi-rs's NAPI_RS_NATIVE_LIBRARY_PATH naming a file that does not load is what the message names", (t) => {
  const { message } = forceNative(root, '/nonexistent/harmony-stream.node')
  t.true(message.includes('NAPI_RS_NATIVE_LIBRARY_PATH names /nonexistent/harmony-stream.node, which did not load'), message)
})

nativeTest(test)('the native parser works from worker threads', (t) => {
  const script = `
    const { Worker } = require('node:worker_threads')
    const code = "const m = require('harmony-stream'); require('node:worker_threads').parentPort.postMessage(m.implementation + ' ' + m.parseCompletion([200005, 17196, 200008, 13225]).at(-1).content)"
    let done = 0
    for (let i = 0; i < 4; i++) new Worker(code, { eval: true }).on('message', (m) => { console.log(m); if (++done === 4) process.exit(0) })`
  const output = execFileSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8' })
  t.deepEqual(output.trim().split('\n'), Array(4).fill('native Hello'))
})
