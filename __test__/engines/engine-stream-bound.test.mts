/**
 * The per-stream byte bound of every HTTP engine client (`maxStreamBytes`): an engine that streams without end
 * and without ids (keep-alive events, or a runaway generation with no token limit) is cut once its stream
 * passes the bound, with an `engine-protocol-error`, and its connection is closed. Each client is given a
 * local server that sends such a stream in its own framing.
 */
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

import test from 'ava'
import { createEngine, DEFAULT_MAX_STREAM_BYTES, EngineError, type EngineName } from 'harmony-stream/engines'
import { until } from '../helpers/until.mjs'

/** The options each engine needs besides `url` (vLLM and TensorRT-LLM name the served model). */
const base = (name: string) => (name === 'vllm' || name === 'trtllm' ? { model: 'gpt-oss' } : {})

/** An event that carries no id in each engine's framing (an empty delta). */
const EMPTY_EVENT: Record<Exclude<EngineName, 'replay'>, string> = {
  vllm: `data: ${JSON.stringify({ choices: [{ index: 0, text: '', token_ids: [], finish_reason: null }] })}\n\n`,
  sglang: `data: ${JSON.stringify({ text: '', output_ids: [], meta_info: { finish_reason: null } })}\n\n`,
  llamacpp: `data: ${JSON.stringify({ content: '', tokens: [], stop: false, tokens_predicted: 0 })}\n\n`,
  trtllm: `data: ${JSON.stringify({ choices: [{ index: 0, text: '', token_ids: [], finish_reason: null }] })}\n\n`,
}

for (const name of Object.keys(EMPTY_EVENT) as (keyof typeof EMPTY_EVENT)[]) {
  test(`${name}: a stream past maxStreamBytes is cut with engine-protocol-error, and its connection closed`, async (t) => {
    let closed = false
    let sent = 0
    const server = createServer((_request: IncomingMessage, response: ServerResponse) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' })
      response.on('close', () => (closed = true))
      // Bounded: at most 4 MiB are offered, far past the bound below.
      const pump = () => {
        while (!closed && sent < 4 << 20) {
          sent += EMPTY_EVENT[name].length
          if (!response.write(EMPTY_EVENT[name])) return void response.once('drain', pump)
        }
        response.end()
      }
      pump()
    })
    server.listen(0, '127.0.0.1')
    await once(server, 'listening')
    t.teardown(() => server.close())
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    const engine = createEngine(name, { url, ...base(name), maxStreamBytes: 64 * 1024 } as never)
    const error = await t.throwsAsync(
      (async () => {
        for await (const _ of engine.generate({ tokens: [1, 2, 3] }));
      })(),
      { instanceOf: EngineError },
    )
    t.is(error?.code, 'engine-protocol-error')
    t.regex(error?.message ?? '', /maxStreamBytes/)
    t.true(await until(() => closed, 10_000), 'the connection was closed')
    t.true(sent < 4 << 20, `the engine was stopped early (${sent} bytes offered)`)
  })
}

test('maxStreamBytes is checked like every option, and defaults to 256 MiB', (t) => {
  t.is(DEFAULT_MAX_STREAM_BYTES, 256 * 1024 * 1024)
  for (const name of Object.keys(EMPTY_EVENT) as (keyof typeof EMPTY_EVENT)[]) {
    t.throws(() => createEngine(name, { url: 'http://127.0.0.1:1', ...base(name), maxStreamBytes: 0 } as never), {
      instanceOf: TypeError,
      message: /option 'maxStreamBytes' must be a positive integer/,
    })
  }
})
