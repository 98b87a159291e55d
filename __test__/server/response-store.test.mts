/**
 * The response stores (issue 21, first step): one contract for the store in memory, SQLite (a real SQLite,
 * as WebAssembly, in a temporary file) and Redis (a real redis-server on 127.0.0.1): records come back as they
 * went in, expire, are bounded (a record too large is a HarmonyLimitError; memory and SQLite evict the least
 * recently used), and a closed store refuses use. SQLite and Redis keep records across store instances, which
 * is how two gateway processes share them.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient } from '@redis/client'

import test, { type ExecutionContext } from 'ava'
import { HarmonyLimitError, HarmonyStateError } from 'harmony-stream'
import {
  MemoryResponseStore,
  RedisResponseStore,
  type ResponseStore,
  SqliteResponseStore,
  type StoredResponse,
} from 'harmony-stream/server'

import { random } from '../helpers/random.mjs'
import { redisForFile } from '../helpers/redis-server.mjs'

/** The stores' clock (seconds), a field the tests may move: the module the package entry uses. */
const { clock } = createRequire(import.meta.url)(join(import.meta.dirname, '..', '..', 'src', 'server', 'stores', 'store.ts')) as {
  clock: { now: () => number }
}

const redis = redisForFile(test)
const redisHere = redis.here

function record(id: string, size = 10): StoredResponse {
  return {
    id,
    createdAt: 1_700_000_000,
    response: {
      id,
      object: 'response',
      status: 'completed',
      output: [{ type: 'message', content: [{ type: 'output_text', text: 'x'.repeat(size) }] }],
    },
    input: [{ id: `msg_${id}`, type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Hi 🪽' }] }],
    promptTokens: [1, 2, 200_006],
    outputTokens: [200_005, 200_002],
  }
}

interface Kind {
  name: string
  /** A new store over the same data (`shared`): what a second process would open. */
  open(t: ExecutionContext, bounds?: Record<string, number>, shared?: string): ResponseStore
  evicts: boolean
}

function temporary(t: ExecutionContext): string {
  const dir = mkdtempSync(join(tmpdir(), 'harmony-store-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return join(dir, 'responses.sqlite')
}

const KINDS: Kind[] = [
  { name: 'memory', open: (_t, bounds = {}) => new MemoryResponseStore(bounds), evicts: true },
  {
    name: 'sqlite',
    open: (t, bounds = {}, shared) => new SqliteResponseStore({ path: shared ?? temporary(t), ...bounds }),
    evicts: true,
  },
  {
    name: 'redis',
    // A generous connect timeout: a loaded CI machine once took more than the default 5 s to connect.
    open: (t, bounds = {}, shared) =>
      new RedisResponseStore({
        url: redis.url(),
        keyPrefix: shared ?? `test:${t.title.length}:${Math.random()}:`,
        timeoutMs: 30_000,
        ...bounds,
      }),
    evicts: false,
  },
]

for (const kind of KINDS) {
  const available = kind.name !== 'redis' || redisHere ? test : test.skip

  available(`${kind.name}: a record comes back as it went in; unknown and deleted ids are null`, async (t) => {
    const store = kind.open(t)
    t.teardown(() => store.close())
    t.is(await store.get('resp_missing'), null)
    await store.put(record('resp_a'))
    t.deepEqual(await store.get('resp_a'), record('resp_a'))
    // Replaced under its id.
    await store.put({ ...record('resp_a'), createdAt: 1 })
    t.is((await store.get('resp_a'))?.createdAt, 1)
    t.true(await store.delete('resp_a'))
    t.false(await store.delete('resp_a'))
    t.is(await store.get('resp_a'), null)
  })

  // Memory and SQLite read the stores' clock, which the test moves (serially: no other test of this file runs
  // meanwhile). Redis expires records by its own clock: its test checks the expiry the store set on the key, a
  // long one, instead of waiting for a short one to pass.
  const expiry = kind.name === 'redis' ? available : test.serial
  expiry(`${kind.name}: records expire after ttlSeconds`, async (t) => {
    if (kind.name === 'redis') {
      const prefix = `ttl:${Math.random()}:`
      const store = kind.open(t, { ttlSeconds: 3600 }, prefix)
      const client = createClient({ url: redis.url() })
      client.on('error', () => {})
      await client.connect()
      t.teardown(async () => {
        await store.close()
        await client.close()
      })
      await store.put(record('resp_short'))
      const ttl = await client.pTTL(`${prefix}resp_short`)
      // Set by the put, in seconds (not milliseconds), and not yet run down by more than a minute of this test.
      t.true(ttl > 3_540_000 && ttl <= 3_600_000, `the key expires in ${ttl} ms`)
      t.truthy(await store.get('resp_short'))
      return
    }
    const store = kind.open(t, { ttlSeconds: 1 })
    t.teardown(() => store.close())
    // Frozen, not real time plus an offset: on a loaded machine more than half a second can pass between the
    // put and the first get.
    const now = clock.now
    const start = now()
    let offset = 0
    clock.now = () => start + offset
    t.teardown(() => {
      clock.now = now
    })
    await store.put(record('resp_short'))
    offset = 0.5
    t.truthy(await store.get('resp_short'))
    offset = 1.5
    t.is(await store.get('resp_short'), null)
  })

  available(`${kind.name}: a record over maxRecordBytes is refused with a HarmonyLimitError, and nothing is kept`, async (t) => {
    const store = kind.open(t, { maxRecordBytes: 2_000 })
    t.teardown(() => store.close())
    const error = await t.throwsAsync(store.put(record('resp_big', 5_000)), { instanceOf: HarmonyLimitError })
    t.regex(error!.message, /resp_big/)
    t.is(await store.get('resp_big'), null)
    await t.throwsAsync(store.put({ id: '', createdAt: 1, response: {}, input: [] }), { instanceOf: TypeError })
  })

  available(`${kind.name}: a closed store refuses use`, async (t) => {
    const store = kind.open(t)
    await store.put(record('resp_c'))
    await store.close()
    await t.throwsAsync(store.get('resp_c'), { instanceOf: HarmonyStateError, message: /closed/ })
    await t.throwsAsync(store.put(record('resp_c')), { instanceOf: HarmonyStateError })
  })

  if (kind.evicts) {
    test(`${kind.name}: the least recently used go first beyond maxEntries or maxBytes`, async (t) => {
      const store = kind.open(t, { maxEntries: 3 })
      t.teardown(() => store.close())
      for (const id of ['resp_1', 'resp_2', 'resp_3']) await store.put(record(id))
      await store.get('resp_1') // used: resp_2 is now the least recently used
      await store.put(record('resp_4'))
      t.is(await store.get('resp_2'), null)
      for (const id of ['resp_1', 'resp_3', 'resp_4']) t.truthy(await store.get(id), id)
      // What the memory store counts beside a record's JSON, as it reports it.
      const one = new MemoryResponseStore()
      await one.put(record('resp_x', 1_000))
      const overhead = kind.name === 'memory' ? one.stats.bytes - JSON.stringify(record('resp_x', 1_000)).length : 0
      const size = JSON.stringify(record('resp_x', 1_000)).length + overhead
      const bytes = kind.open(t, { maxBytes: size * 2 + 10 })
      t.teardown(() => bytes.close())
      for (const id of ['resp_x', 'resp_y', 'resp_z']) await bytes.put({ ...record('resp_x', 1_000), id })
      t.is(await bytes.get('resp_x'), null)
      t.truthy(await bytes.get('resp_y'))
      t.truthy(await bytes.get('resp_z'))
      // One record larger than the whole store is refused rather than evicting itself.
      await t.throwsAsync(bytes.put(record('resp_huge', size * 3)), { instanceOf: HarmonyLimitError })
    })
  }
}

test('sqlite: records outlive the store that wrote them (a second process opening the file sees them)', async (t) => {
  const path = temporary(t)
  const first = new SqliteResponseStore({ path })
  await first.put(record('resp_kept'))
  await first.close()
  const second = new SqliteResponseStore({ path })
  t.teardown(() => second.close())
  t.deepEqual(await second.get('resp_kept'), record('resp_kept'))
})

;(redisHere ? test : test.skip)('redis: two stores on one Redis see each other, and an unreachable Redis fails at once', async (t) => {
  const prefix = `shared:${Math.random()}:`
  const a = new RedisResponseStore({ url: redis.url(), keyPrefix: prefix, timeoutMs: 30_000 })
  const b = new RedisResponseStore({ url: redis.url(), keyPrefix: prefix, timeoutMs: 30_000 })
  t.teardown(async () => {
    await a.close()
    await b.close()
  })
  await a.put(record('resp_shared'))
  t.deepEqual(await b.get('resp_shared'), record('resp_shared'))
  t.true(await b.delete('resp_shared'))
  t.is(await a.get('resp_shared'), null)
  // Port 9 on 127.0.0.1: nothing listens there.
  const gone = new RedisResponseStore({ url: 'redis://127.0.0.1:9', timeoutMs: 500 })
  await t.throwsAsync(gone.get('resp_x'))
  await gone.close()
})

test('stores check their options', (t) => {
  t.throws(() => new MemoryResponseStore({ maxEntries: 0 }), { instanceOf: RangeError, message: /maxEntries/ })
  t.throws(() => new MemoryResponseStore({ ttl: 5 } as never), { instanceOf: TypeError, message: /ttl/ })
  t.throws(() => new SqliteResponseStore({} as never), { instanceOf: TypeError, message: /path/ })
  t.throws(() => new RedisResponseStore({ url: 'redis://127.0.0.1:9', maxEntries: 3 } as never), {
    instanceOf: TypeError,
    message: /maxEntries/,
  })
})

/**
 * A child process holding the file's lock (inside a transaction, with its store registered), as a gateway
 * killed mid-write leaves it; resolves once the lock is held, with the child.
 */
function holdingLock(path: string): Promise<ChildProcess> {
  const script = `
    const { SqliteResponseStore } = require(${JSON.stringify(join(import.meta.dirname, '..', '..', 'dist', 'server.js'))})
    const { Database } = require('node-sqlite3-wasm')
    new SqliteResponseStore({ path: process.argv[1] })
    const db = new Database(process.argv[1])
    db.exec('BEGIN')
    db.run("INSERT OR REPLACE INTO responses VALUES ('resp_half', '{}', 2, 1e12, 0)")
    process.stdout.write('locked\\n')
    setInterval(() => {}, 1000)`
  const child = spawn(process.execPath, ['-e', script, path], { stdio: ['ignore', 'pipe', 'inherit'] })
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', () => resolve(child))
    child.once('exit', (code) => reject(new Error(`the child exited (${code}) before it held the lock`)))
  })
}

test('sqlite: a process killed holding the lock (kill -9) leaves it behind; the next store opens and writes all the same', async (t) => {
  const path = temporary(t)
  const waiting = new SqliteResponseStore({ path, busyTimeoutMs: 50 })
  const child = await holdingLock(path)
  t.true(existsSync(`${path}.lock`), 'the child holds the lock')
  // While its owner lives, the lock is not taken from it: a write waits, then fails as locked.
  await t.throwsAsync(waiting.put(record('resp_a')), { message: /locked/ })
  child.kill('SIGKILL')
  await new Promise((resolve) => child.once('exit', resolve))
  t.true(existsSync(`${path}.lock`), 'left behind by the killed process')
  // Its owner gone, the lock is stale: a store opened now (a restart) and the one already open both write.
  const next = new SqliteResponseStore({ path })
  t.teardown(() => next.close())
  await next.put(record('resp_b'))
  await waiting.put(record('resp_a'))
  await waiting.close()
  t.deepEqual(await next.get('resp_a'), record('resp_a'))
  t.deepEqual(await next.get('resp_b'), record('resp_b'))
  t.is(await next.get('resp_half'), null, "the killed transaction's write was not kept")
  t.false(existsSync(`${path}.lock`))
})

test('the memory store counts what it holds: its bytes match the memory its records take, whatever their characters', (t) => {
  // In a process of its own, with the collector exposed: records of one-byte and two-byte characters, and
  // many small ones (where the per-record cost dominates), put until the store evicts, against what the heap
  // and the buffers grew by.
  // Freed buffers are released by V8 after the collection that found them: \`settled\` collects until the memory
  // in use stops changing.
  const script = `
    const { MemoryResponseStore } = require(${JSON.stringify(join(import.meta.dirname, '..', '..', 'dist', 'server.js'))})
    const inUse = () => { const m = process.memoryUsage(); return m.heapUsed + m.external }
    const settled = async () => {
      let last = -1
      for (let i = 0; i < 100; i++) {
        global.gc(); await new Promise((resolve) => setTimeout(resolve, 10))
        const now = inUse(); if (Math.abs(now - last) < 2 ** 16) return now
        last = now
      }
      return last
    }
    const run = async (make, count) => {
      const store = new MemoryResponseStore({ maxBytes: 8 * 2 ** 20, maxEntries: 1e6 })
      const before = await settled()
      for (let i = 0; i < count; i++) {
        const text = make(i)
        await store.put({ id: 'resp_' + i, createdAt: 1, response: { id: 'resp_' + i, text }, input: [{ role: 'user', content: text }] })
      }
      const held = (await settled()) - before
      const counted = store.stats.bytes
      await store.close()
      return { counted, held }
    }
    const wide = '\\u6c34'.repeat(50000), narrow = 'a'.repeat(150000)
    Promise.resolve().then(async () => console.log(JSON.stringify([
      await run((i) => (i % 2 ? wide : narrow) + i, 100),
      await run((i) => 'hi ' + i, 30000),
    ])))`
  const run = spawnSync(process.execPath, ['--expose-gc', '-e', script], { encoding: 'utf8' })
  t.is(run.status, 0, run.stderr)
  for (const { counted, held } of JSON.parse(run.stdout) as { counted: number; held: number }[]) {
    t.log(`counted ${(counted / 2 ** 20).toFixed(1)} MiB, held ${(held / 2 ** 20).toFixed(1)} MiB`)
    t.true(counted <= 8 * 2 ** 20)
    t.true(held / counted > 0.7 && held / counted < 1.3, `held ${held} for ${counted} counted`)
  }
})

/** Text of `length` code points from `alphabet` (one to four bytes each in UTF-8, one or two UTF-16 units). */
function textOf(next: () => number, alphabet: string, length: number): string {
  const letters = [...alphabet]
  return Array.from({ length }, () => letters[Math.floor(next() * letters.length)]).join('')
}

const ALPHABETS = {
  ascii: 'abc xyz 019',
  latin1: 'éàçüßñ', // one UTF-16 unit, two bytes
  cjk: '水火木金土日月', // one unit, three bytes
  emoji: '🪽🙂🚀🌍', // two units, four bytes
  escaped: '"\\\n\t\u0001\u001f', // JSON escapes: two to six bytes for one unit
  mixed: 'a é 水 🪽 "\n',
}

test('the memory store counts at least the bytes it keeps for a record, whatever its characters and shape', async (t) => {
  const next = random(7)
  const shapes: [string, StoredResponse][] = [
    ['an empty record', { id: 'resp_e', createdAt: 1, response: {}, input: [] }],
    ['a side record', { id: 'cancel-request:resp_e', createdAt: 1, response: { at: 1 }, input: [], owner: 'team-a' }],
    ['the ids of a long prompt', { ...record('resp_ids'), promptTokens: Array.from({ length: 50_000 }, (_, i) => 200_000 + (i % 1000)) }],
  ]
  for (const [name, alphabet] of Object.entries(ALPHABETS))
    for (const length of [1, 511, 512, 513, 3_000, 200_000])
      shapes.push([
        `${name} × ${length}`,
        {
          ...record(`resp_${name}_${length}`),
          input: [{ id: 'msg_1', type: 'message', role: 'user', content: [{ type: 'input_text', text: textOf(next, alphabet, length) }] }],
        },
      ])
  for (const [name, kept] of shapes) {
    const store = new MemoryResponseStore()
    await store.put(kept)
    // What it keeps for the record: its JSON in UTF-8 (its entry beside it is counted on top, not checked here).
    const bytes = Buffer.byteLength(JSON.stringify(kept), 'utf8')
    t.true(store.stats.bytes >= bytes, `${name}: counted ${store.stats.bytes} for ${bytes} bytes kept`)
    t.deepEqual(await store.get(kept.id), kept, name)
    await store.close()
  }
})

test('the memory store holds no more than maxBytes, and its records come back whole through churn (records in scattered blocks, characters cut at their ends)', async (t) => {
  const next = random(11)
  const maxBytes = 256 * 1024
  const store = new MemoryResponseStore({ maxBytes, maxEntries: 1_000_000 })
  t.teardown(() => store.close())
  const alphabets = Object.values(ALPHABETS)
  const kept = new Map<string, StoredResponse>()
  for (let i = 0; i < 3_000; i++) {
    const id = `resp_${i % 400}`
    const size = next() < 0.1 ? Math.floor(next() * 40_000) : Math.floor(next() * 2_000)
    const one: StoredResponse = {
      ...record(id),
      input: [
        {
          id: 'msg_1',
          type: 'message',
          role: 'user',
          content: [{ type: 'input_text', text: textOf(next, alphabets[i % alphabets.length]!, size) }],
        },
      ],
    }
    await store.put(one)
    kept.set(id, one)
    if (next() < 0.2) {
      const gone = `resp_${Math.floor(next() * 400)}`
      await store.delete(gone)
      kept.delete(gone)
    }
    t.true(store.stats.bytes <= maxBytes && store.stats.held <= maxBytes, `after ${i}: ${JSON.stringify(store.stats)}`)
    // Every record still there reads back as it went in; one that is gone was evicted (least recently used first).
    if (i % 100 === 99)
      for (const [key, value] of kept) {
        const back = await store.get(key)
        if (back === null) kept.delete(key)
        else t.deepEqual(back, value, key)
      }
  }
  t.true(kept.size > 10, `${kept.size} records kept at the end`)
})
