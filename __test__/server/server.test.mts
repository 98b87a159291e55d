/**
 * harmony-stream/server as a user meets it: `createGateway`'s options checked by the option kit, the
 * `harmony-stream serve` command (flags, --help, a streamed chat, shutdown on SIGTERM), and the parser entry
 * loading none of the gateway's packages. The gateway's behaviour itself is the subject of the gateway-* and
 * response-* suites, which drive the same `createGateway` through examples/gateway/server.mjs.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'

import test from 'ava'
import { HarmonySetupError } from 'harmony-stream'
import { ReplayEngine } from 'harmony-stream/engines'
import { createGateway, MemoryResponseStore, SETTINGS, serveSettings } from 'harmony-stream/server'
import OpenAI from 'openai'

import { until } from '../helpers/until.mjs'

const require = createRequire(import.meta.url)
const root = join(import.meta.dirname, '..', '..')
const bin = join(root, 'bin', 'harmony-stream.cjs')
// The module the package's entry uses (one HarmonySetupError class with it).
const { requireOptional } = require(join(root, 'src', 'base', 'optional-package.ts')) as {
  requireOptional: (name: string, usedBy: string) => unknown
}
const engine = new ReplayEngine({ completions: [[200005, 17196, 200008, 12194, 200002]] })

test('createGateway: a misspelt option is a TypeError naming it and the option meant', (t) => {
  const error = t.throws(() => createGateway({ engin: engine } as never), { instanceOf: TypeError })
  t.is((error as { code?: string }).code, 'invalid-option')
  t.regex(error.message, /unknown option 'engin' \(did you mean 'engine'\?\)/)
})

test('createGateway: no engine is a TypeError naming engine; wrong types and ranges name their option', (t) => {
  t.throws(() => createGateway({}), { instanceOf: TypeError, message: /option 'engine' is required/ })
  t.throws(() => createGateway({ engine: {} as never }), { instanceOf: TypeError, message: /option 'engine' must be an engine/ })
  t.throws(() => createGateway({ engine, bodyLimit: 0 }), { instanceOf: RangeError, message: /option 'bodyLimit'/ })
  t.throws(() => createGateway({ engine, unknownFields: 'drop' as never }), { instanceOf: TypeError, message: /'unknownFields'/ })
  t.throws(() => createGateway({ engine, responseStore: 'memory' as never }), { instanceOf: TypeError, message: /'responseStore'/ })
})

test('serveSettings: a bad variable is named with its flag; the engine is checked before anything listens', (t) => {
  t.throws(() => serveSettings({ PORT: 'eighty' }), { message: /PORT \(--port\) must be an integer/ })
  t.throws(() => serveSettings({ UNKNOWN_FIELDS: 'drop' }), { message: /UNKNOWN_FIELDS \(--unknown-fields\) must be refuse or ignore/ })
  t.throws(() => serveSettings({ HARMONY_ENGINE: 'vllm' }), { message: /needs ENGINE_URL \(--engine-url\)/ })
  t.throws(() => serveSettings({ HARMONY_ENGINE: 'ollama' }), { message: /HARMONY_ENGINE \(--engine\) must be replay, vllm/ })
  t.throws(() => serveSettings({ HARMONY_COMPACTION_KEY: 'secret' }), { message: /64 hex digits \(its value is not shown\)/ })
  const settings = serveSettings({ PORT: '0', HOST: '127.0.0.1', RENDER_WORKERS: '0' })
  t.like(settings, { port: 0, host: '127.0.0.1', workers: 1 })
})

function cli(args: string[]) {
  return spawnSync(process.execPath, [bin, ...args], { cwd: root, encoding: 'utf8', env: { ...process.env, NO_COLOR: '' } })
}

test('serve --help lists every setting, each flag with its variable', (t) => {
  const run = cli(['serve', '--help'])
  t.is(run.status, 0, run.stderr)
  for (const setting of SETTINGS) {
    t.true(run.stdout.includes(`[${setting.env}]`), setting.env)
    if (setting.flag !== null) t.true(run.stdout.includes(setting.flag), setting.flag)
  }
})

test('serve: an unknown flag or a bad value exits 2 naming it, before anything listens', (t) => {
  const unknown = cli(['serve', '--prot', '0'])
  t.is(unknown.status, 2)
  t.regex(unknown.stderr, /unknown option "--prot" \(did you mean --port\?\)/)
  const bad = cli(['serve', '--port', '-1'])
  t.is(bad.status, 2)
  t.regex(bad.stderr, /PORT \(--port\) needs a value|PORT \(--port\) must be an integer/)
  const noValue = cli(['serve', '--engine'])
  t.is(noValue.status, 2)
  t.regex(noValue.stderr, /--engine needs a value/)
})

test('serve: a port already taken is one line and exit status 2, not a stack', async (t) => {
  const taken = createServer()
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
  t.teardown(() => taken.close())
  const { port } = taken.address() as AddressInfo
  const child = spawn(process.execPath, [bin, 'serve', '--engine', 'replay', '--port', String(port), '--response-store', 'memory'], {
    cwd: root,
  })
  let stderr = ''
  child.stderr.on('data', (chunk) => (stderr += chunk))
  // 'close', not 'exit': a process can exit before its stderr has been read to the end.
  const [code] = await once(child, 'close')
  t.is(code, 2)
  t.regex(stderr, /^harmony-stream serve: listen EADDRINUSE: address already in use 127\.0\.0\.1:\d+\n$/)
})

/** `harmony-stream serve ARGS` until it prints where it listens; its port. */
async function serving(args: string[]): Promise<{ child: ChildProcess; port: number; output: () => string }> {
  const child = spawn(process.execPath, [bin, 'serve', ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stderr!.on('data', (chunk) => (output += chunk))
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.on('data', (chunk) => {
      output += chunk
      const match = /http:\/\/127\.0\.0\.1:(\d+)\/v1/.exec(output)
      if (match) resolve(Number(match[1]))
    })
    child.once('exit', (code) => reject(new Error(`serve exited (${code}) before listening: ${output}`)))
  })
  return { child, port, output: () => output }
}

test('npx harmony-stream serve --engine replay --port 0 serves /health and a streamed chat, and stops cleanly on SIGTERM', async (t) => {
  const { child, port, output } = await serving([
    '--engine',
    'replay',
    '--port',
    '0',
    '--response-store',
    'memory',
    '--render-workers',
    '1',
  ])
  const exited = once(child, 'exit')
  try {
    const health = (await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as { status: string; engine: string }
    t.like(health, { status: 'ok', engine: 'replay' })
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'x', maxRetries: 0 })
    const stream = await client.chat.completions.create({ model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }], stream: true })
    let content = ''
    let finish: string | null = null
    for await (const chunk of stream) {
      content += chunk.choices[0]?.delta?.content ?? ''
      finish = chunk.choices[0]?.finish_reason ?? finish
    }
    // The example completions the package ships: the first one's answer.
    t.true(content.length > 0)
    t.is(finish, 'stop')
    // And its line in the request log, JSON on stdout.
    // Written by another process when its answer has ended: waited for, bounded by time (a count of turns of
    // this process's event loop was no bound on when the other's line comes).
    let logged: Record<string, unknown> | undefined
    await until(() => {
      logged = output()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .find((line) => line.route === '/v1/chat/completions')
      return logged !== undefined
    })
    t.like(logged, { msg: 'request', method: 'POST', status: 200, engine: 'replay' })
  } finally {
    child.kill('SIGTERM')
  }
  const [code, signal] = await exited
  t.is(code, 0, `exit ${code} ${signal}`)
})

test('serve closes its store on SIGTERM: the SQLite store leaves no owner behind', async (t) => {
  const { mkdtempSync, readdirSync, rmSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const dir = mkdtempSync(join(tmpdir(), 'harmony-close-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const path = join(dir, 'responses.sqlite')
  const { child, port } = await serving(['--engine', 'replay', '--port', '0', '--response-store', `sqlite:${path}`])
  const exited = once(child, 'exit')
  try {
    t.is((await fetch(`http://127.0.0.1:${port}/health`)).status, 200)
    // The store registers this process while it is open.
    t.is(readdirSync(`${path}.owners`).length, 1)
  } finally {
    child.kill('SIGTERM')
  }
  const [code] = await exited
  t.is(code, 0)
  t.deepEqual(readdirSync(`${path}.owners`), [], 'the store was closed with the process')
})

test('importing harmony-stream loads none of the gateway, the stores, the validator or ws', (t) => {
  const run = spawnSync(
    process.execPath,
    ['-e', "require('harmony-stream'); require('harmony-stream/engines'); console.log(JSON.stringify(Object.keys(require.cache)))"],
    { cwd: root, encoding: 'utf8' },
  )
  t.is(run.status, 0, run.stderr)
  const loaded = JSON.parse(run.stdout) as string[]
  for (const name of ['@redis', 'node-sqlite3-wasm', '@cfworker', 'ws', 'dist/server']) {
    t.deepEqual(
      loaded.filter((path) => path.includes(`/${name}/`) || path.includes(`/${name}.`)),
      [],
      name,
    )
  }
})

test("the stores' drivers and the validator are optional dependencies, and a missing one is named with how to install it", (t) => {
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as Record<string, Record<string, string>>
  const gateway = JSON.parse(readFileSync(join(root, 'packages', 'gateway', 'package.json'), 'utf8')) as Record<
    string,
    Record<string, string>
  >
  // The stores' drivers come with the gateway (harmony-stream-gateway); the validator is the parser's own.
  for (const [name, owner] of [
    ['@redis/client', gateway],
    ['node-sqlite3-wasm', gateway],
    ['@cfworker/json-schema', manifest],
  ] as const) {
    t.false(name in owner.dependencies!, name)
    t.truthy(owner.optionalDependencies![name], name)
  }
  const error = t.throws(() => requireOptional('harmony-stream-no-such-package', 'RedisResponseStore'), { instanceOf: HarmonySetupError })
  t.is((error as HarmonySetupError).code, 'package-missing')
  t.regex(error.message, /RedisResponseStore needs the package harmony-stream-no-such-package.*npm install harmony-stream-no-such-package/)
  // A package that is there but fails to load is its own error, not "missing".
  t.notThrows(() => require.resolve('@cfworker/json-schema'))
})

test('the routes answer an id that is not valid percent-encoding with a 400, and a non-string previous_response_id with a 400 naming it', async (t) => {
  const server = createGateway({ engine, responseStore: new MemoryResponseStore() })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const { port } = server.address() as AddressInfo
  for (const path of ['/v1/responses/%E0', '/v1/responses/%E0/input_items']) {
    const answer = await fetch(`http://127.0.0.1:${port}${path}`)
    t.is(answer.status, 400, path)
    t.like(((await answer.json()) as { error: object }).error, { code: 'invalid_path' })
  }
  const cancel = await fetch(`http://127.0.0.1:${port}/v1/responses/%E0/cancel`, { method: 'POST' })
  t.is(cancel.status, 400)
  const answer = await fetch(`http://127.0.0.1:${port}/v1/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-oss', input: 'hi', previous_response_id: { id: 'resp_x' } }),
  })
  t.is(answer.status, 400)
  t.like(((await answer.json()) as { error: object }).error, { code: 'invalid_parameter', param: 'previous_response_id' })
})

test('serve: a replay file that is missing or not JSON is one line and exit status 2', (t) => {
  for (const file of [join(root, 'no-such-replay.json'), join(root, 'package.json')]) {
    const run = cli(['serve', '--replay', file, '--port', '0'])
    t.is(run.status, 2, run.stderr)
    t.regex(run.stderr, /^harmony-stream serve: .*(no-such-replay\.json: ENOENT|package\.json: expected)[^\n]*\n$/)
  }
})

test('serve: a SQLite file another process holds locked at startup is waited for, not a failure (--workers start together)', async (t) => {
  const { mkdtempSync, mkdirSync, rmSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const { responseStoreFromEnvironment } = await import('harmony-stream/server')
  const dir = mkdtempSync(join(tmpdir(), 'harmony-lock-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'responses.sqlite')
  // node-sqlite3-wasm's lock: a directory beside the file, which another process removes a moment later.
  mkdirSync(`${file}.lock`)
  const holder = spawn(process.execPath, [
    '-e',
    `setTimeout(() => require('node:fs').rmSync(${JSON.stringify(`${file}.lock`)}, { recursive: true }), 400)`,
  ])
  const store = responseStoreFromEnvironment({ HARMONY_RESPONSE_STORE: `sqlite:${file}` })
  t.teardown(() => store?.close())
  await once(holder, 'exit')
  t.truthy(store)
  t.is(await store!.get('resp_none'), null)
})

test('serve --api-keys-file: requests need a key of the file; a bad file is one line and exit 2, showing no key', async (t) => {
  const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const dir = mkdtempSync(join(tmpdir(), 'harmony-keys-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const good = join(dir, 'keys.json')
  writeFileSync(good, JSON.stringify([{ key: 'sk-file-key-1', name: 'ops' }]))
  const bad = join(dir, 'bad.json')
  writeFileSync(bad, JSON.stringify([{ key: 'sk-file-secret', name: 'ops', limits: { requestsPerMinute: -1 } }]))
  const refused = cli(['serve', '--engine', 'replay', '--api-keys-file', bad, '--port', '0'])
  t.is(refused.status, 2, refused.stderr)
  t.regex(
    refused.stderr,
    /^harmony-stream serve: GATEWAY_API_KEYS_FILE \(--api-keys-file\): [^\n]*bad.json\[0\].limits[^\n]*requestsPerMinute[^\n]*\n$/,
  )
  t.false(refused.stderr.includes('sk-file-secret'))
  const { child, port } = await serving(['--engine', 'replay', '--port', '0', '--response-store', 'memory', '--api-keys-file', good])
  t.teardown(() => child.kill('SIGTERM'))
  t.is((await fetch(`http://127.0.0.1:${port}/v1/models`)).status, 401)
  t.is((await fetch(`http://127.0.0.1:${port}/v1/models`, { headers: { authorization: 'Bearer sk-file-key-1' } })).status, 200)
  t.is((await fetch(`http://127.0.0.1:${port}/health`)).status, 200)
})
