/**
 * The package as users get it: ESM and CommonJS entries, typings that match the runtime exports, and the
 * loader's choice of implementation (HARMONY_STREAM_IMPL, and a machine where no native binary fits).
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { cpSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import test from 'ava'
import ts from 'typescript'

import * as esm from 'harmony-stream'

import { nativeTest } from './helpers/harmony.mjs'

const require = createRequire(import.meta.url)
const root = join(import.meta.dirname, '..')

const runtimeNames = (module: object) => Object.keys(module).filter((name) => name !== '__esModule' && name !== 'default').sort()

test('import and require expose the same objects', async (t) => {
  const cjs = require('harmony-stream') as typeof esm
  t.deepEqual(runtimeNames(esm), runtimeNames(cjs))
  t.is(esm.HarmonyStreamParser, cjs.HarmonyStreamParser, 'one class identity, so instanceof works across both')
  t.is(esm.HarmonyParseError, cjs.HarmonyParseError)
  const enginesEsm = await import('harmony-stream/engines')
  const enginesCjs = require('harmony-stream/engines') as typeof enginesEsm
  t.deepEqual(runtimeNames(enginesEsm), runtimeNames(enginesCjs))
  t.is(enginesEsm.EngineError, enginesCjs.EngineError)
  t.true(new enginesCjs.EngineError('x', 'y', { engine: 'e' }) instanceof esm.HarmonyError, 'engine errors are HarmonyErrors of the same class')
})

test('the shipped typings declare exactly the runtime exports', async (t) => {
  const engines = runtimeNames(await import('harmony-stream/engines'))
  for (const [entry, runtime] of [
    ['dist/index.d.ts', runtimeNames(esm)],
    ['dist/index.d.mts', runtimeNames(esm)],
    ['dist/engines/index.d.ts', engines],
    ['dist/engines/index.d.mts', engines],
  ] as const) {
    const program = ts.createProgram([join(root, entry)], { strict: true, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext })
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
  const script = "const m = require('harmony-stream'); console.log(m.implementation, m.parseCompletion([200005, 17196, 200008, 13225]).at(-1).content)"
  return spawnSync(process.execPath, ['-e', script], { cwd, env: { ...process.env, ...env }, encoding: 'utf8' })
}

nativeTest(test)('HARMONY_STREAM_IMPL forces an implementation', (t) => {
  t.is(load({ HARMONY_STREAM_IMPL: 'js' }).stdout, 'js Hello\n')
  t.is(load({ HARMONY_STREAM_IMPL: 'native' }).stdout, 'native Hello\n')
  t.is(load({ HARMONY_STREAM_IMPL: undefined }).stdout, 'native Hello\n', 'native is preferred where it loads')
  const bad = load({ HARMONY_STREAM_IMPL: 'wasm' })
  t.not(bad.status, 0)
  t.regex(String(bad.stderr), /HARMONY_STREAM_IMPL must be 'native' or 'js', not 'wasm'/)
})

test('where no native binary fits, the package runs on TypeScript; forcing native says why not', (t) => {
  // A copy of the package without any .node file, as on a platform with no prebuilt binary and no cargo.
  const dir = mkdtempSync(join(tmpdir(), 'harmony-stream-nonative-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const pkg = join(dir, 'node_modules', 'harmony-stream')
  for (const file of ['package.json', 'native.cjs', 'native.d.ts', 'dist']) cpSync(join(root, file), join(pkg, file), { recursive: true })
  symlinkSync(join(root, 'node_modules', 'gpt-tokenizer'), join(dir, 'node_modules', 'gpt-tokenizer'))
  const quiet = load({ HARMONY_STREAM_IMPL: undefined }, dir)
  t.is(quiet.stdout, 'js Hello\n')
  t.is(quiet.stderr, '', 'no warning on start')
  const forced = load({ HARMONY_STREAM_IMPL: 'native' }, dir)
  t.not(forced.status, 0)
  t.regex(String(forced.stderr), /HARMONY_STREAM_IMPL=native, but the native addon could not be loaded: there is no native binary for this platform \(linux-x64\)/)
  t.regex(String(forced.stderr), /npm run build:native/)
  t.notRegex(String(forced.stderr).split('\n')[0] ?? '', /optional dependencies/, 'not napi-rs\'s npm advice')
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
