/**
 * The Responses API over its two transports, side by side in one run: streamed `POST /v1/responses` (SSE, a
 * request per response) and the WebSocket mode (one connection per client, its responses one after another).
 * The example gateway on 127.0.0.1 with the replay engine (completions of ~1,000 tokens) and an in-memory
 * response store, N clients each making a fixed number of responses; tokens/s delivered, time to the first
 * event, the gap between arrivals (p50/p99), and the gateway's CPU per 1M tokens, on both parser backends.
 * Bounded: the run stops by itself.
 *
 *   npm run bench:responses
 *   BENCH_QUICK=1 npm run bench:responses
 */
import { WebSocket } from 'ws'

import { cpuMs, type Delivery, percentile, replayFile, startGatewayProcess, streamingPost } from './gateway-process.mjs'

const quick = process.env.BENCH_QUICK === '1'

const BODY = { model: 'gpt-oss', input: 'hi', store: false }

/** One streamed `POST /v1/responses`: its output tokens (from the last response's usage), TTFB, gaps. */
function overSse(port: number): Promise<Delivery> {
  return streamingPost(port, '/v1/responses', { ...BODY, stream: true }, /"output_tokens":(\d+)/)
}

/** A WebSocket client: `count` responses one after another on one connection. */
async function overSocket(port: number, count: number): Promise<Delivery[]> {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/v1/responses`)
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
  const deliveries: Delivery[] = []
  try {
    for (let i = 0; i < count; i++) {
      deliveries.push(
        await new Promise<Delivery>((resolve, reject) => {
          const started = performance.now()
          let last = 0
          let ttfb = 0
          const gaps: number[] = []
          const onMessage = (data: { toString(): string }) => {
            const now = performance.now()
            if (ttfb === 0) ttfb = now - started
            else gaps.push(now - last)
            last = now
            const text = data.toString()
            // The turn's terminal frame (the replayed completions may end cut: incomplete).
            if (!/^\{"type":"(response\.(completed|incomplete|failed)|error)"/.test(text)) return
            socket.off('message', onMessage)
            const usage = /"output_tokens":(\d+)/.exec(text)
            if (usage === null) reject(new Error(text.slice(0, 200)))
            else resolve({ tokens: Number(usage[1]), ttfb, gaps })
          }
          socket.on('message', onMessage)
          socket.send(JSON.stringify({ type: 'response.create', ...BODY }))
        }),
      )
    }
  } finally {
    socket.close()
  }
  return deliveries
}

interface Case {
  name: string
  transport: 'sse' | 'socket'
  env: Record<string, string>
}

async function run(c: Case, replay: string, clients: number) {
  const { child, port } = await startGatewayProcess({ HARMONY_REPLAY: replay, HARMONY_RESPONSE_STORE: 'memory', ...c.env })
  try {
    const responsesPerClient = quick ? 2 : 4
    const client = async () => {
      if (c.transport === 'socket') return overSocket(port, responsesPerClient)
      const mine: Delivery[] = []
      for (let i = 0; i < responsesPerClient; i++) mine.push(await overSse(port))
      return mine
    }
    await Promise.all(Array.from({ length: 8 }, client))
    const cpuBefore = cpuMs(child.pid!)
    const started = performance.now()
    const results = (await Promise.all(Array.from({ length: clients }, client))).flat()
    const seconds = (performance.now() - started) / 1000
    const cpu = cpuMs(child.pid!) - cpuBefore
    const tokens = results.reduce((n, r) => n + r.tokens, 0)
    const gaps = results.flatMap((r) => r.gaps)
    return {
      tokensPerSecond: tokens / seconds,
      ttfb: percentile(
        results.map((r) => r.ttfb),
        50,
      ),
      gapP50: percentile(gaps, 50),
      gapP99: percentile(gaps, 99),
      cpuPerMillion: (cpu / tokens) * 1e6,
    }
  } finally {
    child.kill('SIGTERM')
  }
}

const replay = replayFile()
const cases: Case[] = []
for (const impl of ['native', 'js']) {
  cases.push({ name: `${impl}, SSE (a POST per response)`, transport: 'sse', env: { HARMONY_STREAM_IMPL: impl } })
  cases.push({ name: `${impl}, WebSocket mode (one connection per client)`, transport: 'socket', env: { HARMONY_STREAM_IMPL: impl } })
}
console.log('Responses over SSE and over the WebSocket mode, replay engine, ~1,000-token completions, store in memory; one run\n')
console.log('| clients | case | k tokens/s | first event p50 ms | gap p50 / p99 ms | CPU ms per 1M tokens |')
console.log('|---:|---|---:|---:|---:|---:|')
for (const clients of quick ? [64] : [64, 256]) {
  for (const c of cases) {
    const r = await run(c, replay, clients)
    console.log(
      `| ${clients} | ${c.name} | ${(r.tokensPerSecond / 1000).toFixed(1)} | ${r.ttfb.toFixed(1)} | ${r.gapP50.toFixed(2)} / ${r.gapP99.toFixed(2)} | ${r.cpuPerMillion.toFixed(0)} |`,
    )
  }
}
