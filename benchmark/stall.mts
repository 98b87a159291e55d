/**
 * How long one hostile or merely large request can stall everyone else: the example gateway on 127.0.0.1 is
 * probed on GET /health every 5 ms while each attack of the bounded attack run is sent, and the probe's
 * latency (p50, p99, max) is reported per attack: what the other streams of that process wait at worst.
 * Run with renders in worker threads (the default) and inline (RENDER_WORKERS=0), side by side.
 *
 *   npm run bench:stall
 *
 * Bounded: each attack is sent a fixed number of times, every connection is closed, the gateway is stopped.
 */
import { request } from 'node:http'
import { connect } from 'node:net'
import { percentile, startGatewayProcess } from './gateway-process.mjs'

const REPEATS = 3

interface Attack {
  name: string
  send: (port: number) => Promise<unknown>
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
const ATTACKS: Attack[] = [
  {
    name: 'Responses: 1 user item + 118,000 empty assistant items (4 MB)',
    send: (port) => post(port, '/v1/responses', `{"model":"m","input":[${user}${',{"role":"assistant","content":""}'.repeat(118_000)}]}`),
  },
  { name: 'one 3.9 MB word', send: (port) => post(port, '/v1/responses', `{"model":"m","input":"${'x'.repeat(3_900_000)}"}`) },
  {
    name: '1,000,000 spaces',
    send: (port) => post(port, '/v1/chat/completions', `{"model":"m","messages":[{"role":"user","content":"a${' '.repeat(1_000_000)}b"}]}`),
  },
  {
    name: 'tool_choice nested 5,000 deep',
    send: (port) =>
      post(port, '/v1/chat/completions', `{"model":"m","messages":[${user}],"tool_choice":${'{"a":'.repeat(5000)}{}${'}'.repeat(5000)}}`),
  },
  {
    name: '125,000 messages',
    send: (port) => post(port, '/v1/chat/completions', `{"model":"m","messages":[${Array(125_000).fill(user).join(',')}]}`),
  },
  {
    name: 'an honest 3.5 MB request (ordinary words)',
    send: (port) => post(port, '/v1/chat/completions', JSON.stringify({ model: 'm', messages: [{ role: 'user', content: words }] })),
  },
  {
    name: 'endless chunked body to a 404 (8 MB offered)',
    send: (port) =>
      raw(port, 'POST /v2/none HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n', 8 << 20),
  },
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

console.log('Worst /health latency while each attack runs (example gateway, replay engine, 127.0.0.1), ms\n')
console.log('| attack | renders | statuses | /health p50 | p99 | max |')
console.log('|---|---|---|---:|---:|---:|')
for (const [label, env] of [
  ['in a worker', {}],
  ['inline', { RENDER_WORKERS: '0' }],
] as const) {
  const gateway = await startGatewayProcess(env)
  try {
    // Warm up: the first request loads the tokenizer.
    await post(gateway.port, '/v1/chat/completions', `{"model":"m","messages":[${user}]}`)
    for (const attack of [{ name: 'nothing (baseline)', send: () => new Promise((r) => setTimeout(r, 300)) }, ...ATTACKS]) {
      const probing = probe(gateway.port)
      const statuses: unknown[] = []
      for (let i = 0; i < REPEATS; i++) statuses.push(await attack.send(gateway.port))
      const latencies = await probing.stop()
      const shown = [...new Set(statuses.map(String))].join(' ')
      console.log(
        `| ${attack.name} | ${label} | ${shown} | ${percentile(latencies, 50).toFixed(1)} | ${percentile(latencies, 99).toFixed(1)} | ${Math.max(...latencies).toFixed(1)} |`,
      )
    }
  } finally {
    gateway.child.kill('SIGTERM')
  }
}
