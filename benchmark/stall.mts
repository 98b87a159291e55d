/**
 * The bounded attack run: how long one hostile or merely large request can stall everyone else, and whether
 * any attack gets an answer it should not. The example gateway on 127.0.0.1 is probed on GET /health every
 * 5 ms while each attack is sent, and the probe's latency (p50, p99, max) is reported per attack: what the
 * other streams of that process wait at worst. Run with renders in worker threads (the default) and inline
 * (RENDER_WORKERS=0), side by side.
 *
 *   npm run bench:stall              the table
 *   npm run bench:stall -- --check   the same, and exit 1 when an attack gets a status it should not (a 5xx
 *                                    above all) or the gateway dies: what CI runs (.ci/run). Latency is
 *                                    reported, never asserted: CI machines are shared and noisy.
 *
 * Bounded: each attack is sent a fixed number of times, every connection is closed, the gateway is stopped.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { request } from 'node:http'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { percentile, startGatewayProcess } from './gateway-process.mjs'

const REPEATS = 3

interface Attack {
  name: string
  /** The statuses each send ends in (0: no status, the connection closed), or undefined for several. */
  send: (port: number) => Promise<number | number[] | undefined>
  /** The statuses allowed. */
  expect: number[]
}

function post(port: number, path: string, body: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode ?? 0))
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

/** A request with an optional body; resolves with its status and body. */
function exchange(port: number, method: string, path: string, body?: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, headers: { 'content-type': 'application/json' } }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => (text += chunk))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

/** Writes `head` and then `bytes` of body in 64 KiB chunks, then closes: bounded. */
async function raw(port: number, head: string, bytes: number): Promise<void> {
  const socket = connect(port, '127.0.0.1')
  socket.on('error', () => {})
  await new Promise((resolve) => socket.once('connect', resolve))
  socket.write(head)
  const chunk = `10000\r\n${'x'.repeat(0x10000)}\r\n`
  for (let sent = 0; sent < bytes && !socket.destroyed; sent += 0x10000) {
    if (!socket.write(chunk)) await Promise.race([new Promise((r) => socket.once('drain', r)), new Promise((r) => setTimeout(r, 200))])
  }
  socket.destroy()
}

const user = '{"role":"user","content":"hi"}'
const words = 'All work and no play makes Jack a dull boy. '.repeat(80_000)

/** A Chat body whose response format has `schema`. */
const withSchema = (schema: object) =>
  JSON.stringify({
    model: 'm',
    messages: [{ role: 'user', content: 'hi' }],
    response_format: { type: 'json_schema', json_schema: { name: 'f', schema } },
  })

/** An object schema of `count` string properties (about 80 bytes each), named apart by `salt` so none is cached. */
const properties = (count: number, salt: string) => ({
  type: 'object',
  properties: Object.fromEntries(
    Array.from({ length: count }, (_, i) => [`p${salt}${i}`, { type: 'string', description: 'x'.repeat(40) }]),
  ),
  additionalProperties: false,
})

/** Forty definitions, each `anyOf` the next one twice: 2^40 nodes with references followed. */
const doubling = () => {
  const $defs: Record<string, unknown> = { d40: { type: 'string' } }
  for (let i = 0; i < 40; i++) $defs[`d${i}`] = { anyOf: [{ $ref: `#/$defs/d${i + 1}` }, { $ref: `#/$defs/d${i + 1}` }] }
  return { $ref: '#/$defs/d0', $defs }
}

let salt = 0

/** A compaction item of 3.5 MB of conversation (14 KB sealed), made once per gateway. */
const compactions = new Map<number, unknown>()
async function compactionItem(port: number): Promise<unknown> {
  if (!compactions.has(port)) {
    const text = 'All work and no play makes Jack a dull boy. '.repeat(20_000)
    const input = Array.from({ length: 4 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: text }))
    const { body } = await exchange(port, 'POST', '/v1/responses/compact', JSON.stringify({ model: 'm', input }))
    compactions.set(port, (JSON.parse(body) as { output: unknown[] }).output.at(-1))
  }
  return compactions.get(port)
}

/** 400 mixed requests, 16 at a time: answers, streams, stored responses read and deleted, malformed bodies. */
async function mixed(port: number): Promise<number[]> {
  const kinds: (() => Promise<number>)[] = [
    () => post(port, '/v1/chat/completions', `{"model":"m","messages":[${user}]}`),
    () => post(port, '/v1/chat/completions', `{"model":"m","stream":true,"messages":[${user}]}`),
    () => post(port, '/v1/responses', '{"model":"m","input":"hi","stream":true}'),
    async () => {
      const { status, body } = await exchange(port, 'POST', '/v1/responses', '{"model":"m","input":"hi"}')
      if (status !== 200) return status
      const id = (JSON.parse(body) as { id: string }).id
      const read = await exchange(port, 'GET', `/v1/responses/${id}`)
      if (read.status !== 200) return read.status
      return (await exchange(port, 'DELETE', `/v1/responses/${id}`)).status
    },
    () => post(port, '/v1/chat/completions', '{"model":"m","messages":['),
    () => post(port, '/v1/responses', '{"model":"m","input":"hi","temprature":1}'),
    async () => (await exchange(port, 'GET', '/v1/responses/resp_missing')).status,
    () => post(port, '/v1/responses', '{"model":"m","input":"hi","previous_response_id":"resp_gone"}'),
  ]
  const statuses: number[] = []
  let next = 0
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      for (let i = next++; i < 400; i = next++) statuses.push(await kinds[i % kinds.length]())
    }),
  )
  return statuses
}

const ATTACKS: Attack[] = [
  {
    name: 'Responses: 1 user item + 118,000 empty assistant items (4 MB)',
    send: (port) => post(port, '/v1/responses', `{"model":"m","input":[${user}${',{"role":"assistant","content":""}'.repeat(118_000)}]}`),
    expect: [400],
  },
  {
    name: 'one 3.9 MB word',
    send: (port) => post(port, '/v1/responses', `{"model":"m","input":"${'x'.repeat(3_900_000)}"}`),
    expect: [400],
  },
  {
    name: '1,000,000 spaces',
    send: (port) => post(port, '/v1/chat/completions', `{"model":"m","messages":[{"role":"user","content":"a${' '.repeat(1_000_000)}b"}]}`),
    expect: [400],
  },
  {
    name: 'tool_choice nested 5,000 deep',
    send: (port) =>
      post(port, '/v1/chat/completions', `{"model":"m","messages":[${user}],"tool_choice":${'{"a":'.repeat(5000)}{}${'}'.repeat(5000)}}`),
    expect: [400],
  },
  {
    name: '125,000 messages',
    send: (port) => post(port, '/v1/chat/completions', `{"model":"m","messages":[${Array(125_000).fill(user).join(',')}]}`),
    expect: [400],
  },
  {
    name: 'an honest 3.5 MB request (ordinary words)',
    send: (port) => post(port, '/v1/chat/completions', JSON.stringify({ model: 'm', messages: [{ role: 'user', content: words }] })),
    expect: [200],
  },
  {
    name: 'endless chunked body to a 404 (8 MB offered)',
    send: async (port) => {
      await raw(port, 'POST /v2/none HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n', 8 << 20)
      return undefined
    },
    expect: [],
  },
  {
    name: 'a schema of 1,000 properties (81 KB)',
    send: (port) => post(port, '/v1/chat/completions', withSchema(properties(1000, `a${salt++}`))),
    expect: [200],
  },
  {
    name: 'a schema of 9,000 properties (737 KB)',
    send: (port) => post(port, '/v1/chat/completions', withSchema(properties(9000, `b${salt++}`))),
    expect: [200],
  },
  {
    name: 'four schemas of 1,000 properties at once',
    send: (port) => Promise.all([0, 1, 2, 3].map(() => post(port, '/v1/chat/completions', withSchema(properties(1000, `c${salt++}`))))),
    expect: [200],
  },
  {
    name: 'a schema whose $refs form a cycle',
    send: (port) =>
      post(
        port,
        '/v1/chat/completions',
        withSchema({ $ref: '#/$defs/a', $defs: { a: { $ref: '#/$defs/b' }, b: { anyOf: [{ $ref: '#/$defs/a' }] } } }),
      ),
    expect: [400],
  },
  {
    name: 'a schema of 2^40 nodes with references followed',
    send: (port) => post(port, '/v1/chat/completions', withSchema(doubling())),
    expect: [400],
  },
  {
    name: 'a schema of 20,001 objects',
    send: (port) => post(port, '/v1/chat/completions', withSchema({ anyOf: Array.from({ length: 20_001 }, () => ({})) })),
    expect: [400],
  },
  {
    name: 'ten continuations of a 14 KB compaction item (3.5 MB opened) at once',
    send: async (port) => {
      const item = await compactionItem(port)
      const body = JSON.stringify({ model: 'm', store: false, input: [item, { role: 'user', content: 'go on' }] })
      return Promise.all(Array.from({ length: 10 }, () => post(port, '/v1/responses', body)))
    },
    expect: [200],
  },
  { name: 'GET /v1/responses/%ZZ', send: async (port) => (await exchange(port, 'GET', '/v1/responses/%ZZ')).status, expect: [400] },
  { name: '400 mixed requests, 16 at a time', send: mixed, expect: [200, 400, 404] },
]

/** Probes /health every 5 ms until `stop()`; returns the latencies in ms. */
function probe(port: number): { stop: () => Promise<number[]> } {
  const latencies: number[] = []
  let running = true
  const loop = (async () => {
    while (running) {
      const started = performance.now()
      await new Promise<void>((resolve) => {
        const req = request({ host: '127.0.0.1', port, path: '/health', agent: false }, (res) => {
          res.resume()
          res.on('end', () => resolve())
        })
        req.on('error', () => resolve())
        req.end()
      })
      latencies.push(performance.now() - started)
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  })()
  return {
    stop: async () => {
      running = false
      await loop
      return latencies
    },
  }
}

const check = process.argv.includes('--check')
const unexpected: string[] = []
// The default store, SQLite, in a folder of its own.
const folder = mkdtempSync(join(tmpdir(), 'harmony-attack-'))
console.log('Worst /health latency while each attack runs (example gateway, replay engine, SQLite store, 127.0.0.1), ms\n')
console.log('| attack | renders | statuses | /health p50 | p99 | max |')
console.log('|---|---|---|---:|---:|---:|')
try {
  for (const [label, env] of [
    ['in a worker', {}],
    ['inline', { RENDER_WORKERS: '0' }],
  ] as const) {
    const gateway = await startGatewayProcess({ ...env, HARMONY_RESPONSE_STORE: `sqlite:${join(folder, `${label.length}.sqlite`)}` })
    let exited: number | null | undefined
    gateway.child.on('exit', (code) => (exited = code))
    try {
      // Warm up: the first request loads the tokenizer.
      await post(gateway.port, '/v1/chat/completions', `{"model":"m","messages":[${user}]}`)
      const baseline: Attack = {
        name: 'nothing (baseline)',
        send: () => new Promise((r) => setTimeout(() => r(undefined), 300)),
        expect: [],
      }
      for (const attack of [baseline, ...ATTACKS]) {
        const probing = probe(gateway.port)
        const statuses: number[] = []
        for (let i = 0; i < REPEATS; i++) {
          // A connection that ends without an answer is status 0.
          const got = await attack.send(gateway.port).catch(() => 0)
          if (got !== undefined) statuses.push(...[got].flat())
        }
        const latencies = await probing.stop()
        const shown = [...new Set(statuses)].sort().join(' ')
        console.log(
          `| ${attack.name} | ${label} | ${shown} | ${percentile(latencies, 50).toFixed(1)} | ${percentile(latencies, 99).toFixed(1)} | ${Math.max(...latencies).toFixed(1)} |`,
        )
        const wrong = attack.expect.length === 0 ? [] : statuses.filter((status) => !attack.expect.includes(status))
        if (wrong.length > 0)
          unexpected.push(
            `${attack.name} (${label}): ${wrong.length} answered ${[...new Set(wrong)].join(', ')}, expected ${attack.expect.join(' or ')}`,
          )
        if (exited !== undefined) {
          unexpected.push(`the gateway exited (${exited}) during ${attack.name} (${label})`)
          break
        }
      }
    } finally {
      gateway.child.kill('SIGTERM')
    }
  }
} finally {
  rmSync(folder, { recursive: true, force: true })
}
if (unexpected.length > 0) {
  console.error(`\n${unexpected.length} attack(s) got answers they should not:\n${unexpected.map((line) => `- ${line}`).join('\n')}`)
  if (check) process.exitCode = 1
} else console.log('\nEvery attack got the answer it should; the gateway served on.')
