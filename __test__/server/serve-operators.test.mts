/**
 * `harmony-stream serve` as an operator meets it (issue 48): no silent misconfiguration (an engine URL without
 * `--engine` is served by the engine found there, or refused naming `--engine`; no engine at all is refused), a
 * startup line that says which engine and where responses are kept, a warning line (never a stack) for an engine
 * that does not answer, failures logged as one line each, shutdown said in the log, a gateway started by npm
 * that shuts down when npm goes away, and a demo whose recorded answers fit the request. The engines here answer `GET /v1/models` as each server's sources say
 * (src/server/command/engine-kind.ts cites them); a real llama-server is asked in
 * __test__/engines-real/llamacpp-serve.test.mts.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'

import test from 'ava'
import OpenAI from 'openai'

import { fakeVllm } from '../helpers/fake-engines.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { line, serving } from '../helpers/serve-child.mjs'
import { until } from '../helpers/until.mjs'

const root = join(import.meta.dirname, '..', '..')
const bin = join(root, 'bin', 'harmony-stream.cjs')

/**
 * The command run to its end, asynchronously: the engines these tests stand up answer from this process, which
 * a synchronous spawn would hold still.
 */
async function cli(args: string[]): Promise<{ status: number | null; stderr: string }> {
  const child = spawn(process.execPath, [bin, ...args], { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr!.on('data', (chunk) => (stderr += chunk))
  const [status] = (await once(child, 'close')) as [number | null]
  return { status, stderr }
}

/** An HTTP server on 127.0.0.1 that answers with `handle`; its base URL. */
async function answering(t: { teardown: (f: () => void) => void }, handle: (request: IncomingMessage, response: ServerResponse) => void) {
  const server: Server = createServer(handle)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** A server whose `/v1/models` lists one model owned by `owner` (and, for llama.cpp, says so in its `Server` header). */
function modelsOwnedBy(owner: string, headers: Record<string, string> = {}) {
  return (request: IncomingMessage, response: ServerResponse) => {
    if (request.url !== '/v1/models') {
      response.writeHead(404, headers).end()
      return
    }
    response.writeHead(200, { 'content-type': 'application/json', ...headers })
    response.end(JSON.stringify({ object: 'list', data: [{ id: 'gpt-oss', object: 'model', created: 0, owned_by: owner }] }))
  }
}

/** A port nothing listens on: taken and released. */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

test('serve with no engine named is refused, naming --engine-url and --engine replay', async (t) => {
  const run = await cli(['serve', '--port', '0', '--response-store', 'memory'])
  t.is(run.status, 2)
  t.regex(run.stderr, /^harmony-stream serve: no engine: --engine-url URL .* or --engine replay for recorded completions\n$/)
  // Another bad setting is still the one named first.
  t.regex((await cli(['serve', '--port', '-1'])).stderr, /PORT \(--port\)/)
  // And recorded completions are not served in place of a URL that was given.
  const both = await cli(['serve', '--engine', 'replay', '--engine-url', 'http://127.0.0.1:9', '--port', '0'])
  t.is(both.status, 2)
  t.regex(both.stderr, /ENGINE_URL \(--engine-url\) names an engine, and the replay engine uses none/)
})

for (const [owner, kind, headers] of [
  ['vllm', 'vllm', {}],
  ['sglang', 'sglang', {}],
  ['tensorrt_llm', 'trtllm', {}],
  ['llamacpp', 'llamacpp', { server: 'llama.cpp' }],
] as const) {
  test(`serve --engine-url alone serves the engine found there: ${owner} is ${kind}`, async (t) => {
    const url = await answering(t, modelsOwnedBy(owner, headers))
    const { child, stdout } = await serving(['--engine-url', url])
    t.teardown(() => child.kill('SIGKILL'))
    t.regex(stdout(), new RegExp(`the ${kind} engine at ${url}, responses kept in memory\\)`))
  })
}

test('serve --engine-url of a server it cannot tell, or that does not answer, exits 2 naming --engine', async (t) => {
  const unknown = await answering(t, modelsOwnedBy('ollama'))
  const told = await cli(['serve', '--engine-url', unknown, '--port', '0'])
  t.is(told.status, 2)
  t.regex(
    told.stderr,
    /the engine at http:\/\/127\.0\.0\.1:\d+ could not be told \(its models are owned_by "ollama".*\): name it with --engine vllm \| sglang \| llamacpp \| trtllm\n$/,
  )
  const locked = await answering(t, (_request, response) => response.writeHead(401).end('{"error":"Unauthorized"}'))
  t.regex((await cli(['serve', '--engine-url', locked, '--port', '0'])).stderr, /answered 401: it asks for an API key/)
  // A port nothing listens on: taken and released.
  const gone = await cli(['serve', '--engine-url', `http://127.0.0.1:${await freePort()}`, '--port', '0'])
  t.is(gone.status, 2)
  t.regex(gone.stderr, /could not be told \(it does not answer \(ECONNREFUSED\)\)/)
  t.notRegex(gone.stderr, /\n\s+at /, 'no stack')
})

test('an engine that does not answer: a warning line at start, a 502 for the client, one line in the log, no stack', async (t) => {
  const { child, port, stdout, stderr } = await serving(['--engine', 'vllm', '--engine-url', `http://127.0.0.1:${await freePort()}`])
  t.teardown(() => child.kill('SIGKILL'))
  t.regex(stdout(), /the vllm engine at http:\/\/127\.0\.0\.1:\d+, responses kept in memory\)/)
  await line(
    child,
    'stderr',
    /warning: the engine at http:\/\/127\.0\.0\.1:\d+: it does not answer \(ECONNREFUSED\); requests fail until it answers\n/,
    stderr,
  )
  const answer = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }] }),
  })
  t.is(answer.status, 502)
  await line(child, 'stderr', /harmony-stream gateway: engine-[a-z-]+: [^\n]*\n/, stderr)
  t.notRegex(stderr(), /\n\s+at /, 'no stack trace')
})

test('shutdown is said in the log: when it starts, with the grace period, and when it is done', async (t) => {
  const { child, stdout } = await serving(['--engine', 'replay', '--shutdown-grace-ms', '5000'])
  // 'close', not 'exit': the last lines may still be in the pipe when the process has exited.
  const exited = once(child, 'close')
  child.kill('SIGTERM')
  const [code] = await exited
  t.is(code, 0)
  t.regex(stdout(), /harmony-stream gateway: shutting down \(SIGTERM\): no new connections; running requests have 5000 ms\n/)
  t.regex(stdout(), /harmony-stream gateway: shut down\n$/)
})

test('a gateway started by npm shuts down when npm goes away (npm does not pass a SIGTERM on)', async (t) => {
  // The launcher stands where npm stands: the gateway's parent, with npm's variable set; it is killed outright, as
  // npm exits on a SIGTERM without passing it on. The gateway then writes to the pipes the test holds, and ends.
  const launcher = spawn(
    process.execPath,
    [
      '-e',
      `const { spawn } = require('node:child_process')
       const gateway = spawn(process.execPath, [${JSON.stringify(bin)}, 'serve', '--engine', 'replay', '--port', '0', '--response-store', 'memory'], { stdio: 'inherit', env: { ...process.env, npm_execpath: 'npm' } })
       setInterval(() => {}, 1000)`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let stdout = ''
  launcher.stdout!.on('data', (chunk) => (stdout += chunk))
  // The pipe ends once every process that holds it has exited: the launcher, and the gateway it started.
  const ended = once(launcher.stdout!, 'end')
  await line(launcher, 'stdout', /harmony-stream gateway on http:\/\/127\.0\.0\.1:\d+\/v1/, () => stdout)
  launcher.kill('SIGKILL')
  await ended
  t.regex(stdout, /shutting down \(its launcher exited\)/)
  t.regex(stdout, /harmony-stream gateway: shut down\n$/)
})

test('the demo answers what fits the request: a call only where functions are offered, never a cut answer', async (t) => {
  const { child, port } = await serving(['--engine', 'replay'])
  t.teardown(() => child.kill('SIGKILL'))
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'unused', maxRetries: 0 })
  const messages = [{ role: 'user' as const, content: 'What is the weather in Paris?' }]
  const tools = [
    {
      type: 'function' as const,
      function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
    },
  ]
  // Twice round the four recordings, each way: round robin would give a call and a cut answer in every four.
  const plain: string[] = []
  const offered: string[] = []
  for (let i = 0; i < 8; i++) {
    plain.push((await client.chat.completions.create({ model: 'gpt-oss', messages })).choices[0]!.finish_reason)
    offered.push((await client.chat.completions.create({ model: 'gpt-oss', messages, tools })).choices[0]!.finish_reason)
  }
  t.deepEqual(new Set(plain), new Set(['stop']), 'no functions offered: answers only')
  t.true(offered.includes('tool_calls'), 'functions offered: calls too')
  t.false(offered.includes('length'), 'never a cut answer')
  // Asked for by its number, any recording is served, the cut one too.
  const cut = await client.chat.completions.create({ model: 'gpt-oss', messages }, { headers: { 'x-harmony-replay': '3' } })
  t.is(cut.choices[0]!.finish_reason, 'length')
})

/** A chat request on a connection of its own (so that the cluster may hand it to either worker); its status. */
function chatOnItsOwnConnection(port: number, requestId: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }] })
    const sent = httpRequest(
      {
        host: '127.0.0.1',
        port,
        path: '/v1/chat/completions',
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'x-request-id': requestId,
          connection: 'close',
        },
      },
      (response) => {
        response.resume()
        response.on('end', () => resolve(response.statusCode ?? 0))
      },
    )
    sent.on('error', reject)
    sent.end(body)
  })
}

test("serve --workers 2: one scrape of /metrics counts every worker's requests (counters summed, histograms merged)", async (t) => {
  const engine = await fakeVllm({ completion: harmony('<|channel|>final<|message|>Hello.<|return|>') })
  t.teardown(() => engine.close())
  const { child, port, stdout } = await serving(['--workers', '2', '--engine', 'vllm', '--engine-url', engine.url, '--render-workers', '0'])
  t.teardown(() => child.kill('SIGTERM'))
  // The request log names the process that answered (`pid`): requests are sent, each on a connection of its own,
  // until both workers answered some. Each line is waited for: it is written when the answer has ended, with the
  // metrics counted in the same turn of that worker's event loop.
  const pids = new Set<number>()
  let sent = 0
  while (pids.size < 2 && sent < 40) {
    const id = `cluster-${sent++}`
    t.is(await chatOnItsOwnConnection(port, id), 200)
    t.true(await until(() => stdout().includes(`"id":"${id}"`)), `the line of ${id}`)
    const logged = stdout()
      .split('\n')
      .find((text) => text.includes(`"id":"${id}"`))!
    pids.add((JSON.parse(logged) as { pid: number }).pid)
  }
  t.is(pids.size, 2, `both workers answered within ${sent} requests`)
  t.is(engine.bodies.length, sent)
  const scrape = await fetch(`http://127.0.0.1:${port}/metrics`)
  t.is(scrape.status, 200)
  const text = await scrape.text()
  // Prometheus's text format, read a sample at a time: a metric's name, its labels, its value.
  const samples = text
    .split('\n')
    .filter((row) => row !== '' && !row.startsWith('#'))
    .map((row) => {
      const [, name, labels, value] = /^(\w+)(?:\{(.*)\})? (\S+)$/.exec(row)!
      return {
        name,
        labels: Object.fromEntries([...(labels ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]])),
        value: Number(value),
      }
    })
  const value = (name: string, labels: Record<string, string>) =>
    samples.find((one) => one.name === name && Object.entries(labels).every(([key, v]) => one.labels[key] === v))?.value
  const chat = { route: '/v1/chat/completions' }
  t.is(value('harmony_requests_total', { ...chat, status: '200' }), sent, text)
  t.is(value('harmony_request_duration_seconds_count', chat), sent)
  t.is(value('harmony_request_duration_seconds_bucket', { ...chat, le: '+Inf' }), sent)
  t.is(value('harmony_time_to_first_token_seconds_count', { engine: 'vllm' }), sent)
})
