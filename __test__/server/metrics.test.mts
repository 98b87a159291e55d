/**
 * The gateway's Prometheus metrics (`GET /metrics`), read by Prometheus's own text parser (the Python client's
 * `text_string_to_metric_families`, in the project's .venv): every metric the operations issue names is there,
 * moves as requests run, and carries only bounded labels (route patterns, never ids).
 */
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'

import test from 'ava'
import { type Engine, EngineGroup } from 'harmony-stream/engines'

import { continuingEngine, failingEngine, startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { until } from '../helpers/until.mjs'

const PYTHON = join(import.meta.dirname, '..', '..', '.venv', 'bin', 'python')

interface Sample {
  name: string
  labels: Record<string, string>
  value: number
  type: string
}

/** `/metrics` of the gateway on `port`, parsed by Prometheus's parser. */
async function scrape(port: number): Promise<Sample[]> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`)
  if (response.status !== 200) throw new Error(`/metrics answered ${response.status}`)
  const parsed = spawnSync(PYTHON, [join(import.meta.dirname, '..', 'helpers', 'prometheus_parse.py')], {
    input: await response.text(),
    encoding: 'utf8',
  })
  if (parsed.status !== 0) throw new Error(`the Prometheus parser refused /metrics: ${parsed.stderr}`)
  return JSON.parse(parsed.stdout) as Sample[]
}

/**
 * The sum of the samples named `name` whose labels include `labels`. None is a failure, not 0: a metric that
 * vanished from /metrics must not pass for one that reads 0.
 */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const matching = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
  if (matching.length === 0) throw new Error(`/metrics has no sample ${name} ${JSON.stringify(labels)}`)
  return matching.reduce((sum, s) => sum + s.value, 0)
}

const ANSWER = harmony('<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hello there.<|return|>')
// A stop token where a message should start: the parser recovers, and says so in a diagnostic.
const MALFORMED = harmony('<|channel|>final<|message|>Hi.<|end|><|return|>')

test('every named metric is there, moves as requests run, and its labels hold no id', async (t) => {
  const { port, client } = await startGateway(t, { replay: [ANSWER, MALFORMED], onDiagnostic: () => {} })
  const before = await scrape(port)
  for (const name of ['harmony_render_queue_depth', 'harmony_background_runs']) t.is(value(before, name), 0, name)

  const stream = await client.chat.completions.create({ model: 'gpt-oss', messages: [{ role: 'user', content: 'Hi' }], stream: true })
  for await (const _ of stream);
  const stored = await client.responses.create({ model: 'gpt-oss', input: 'Hi' })
  await client.responses.retrieve(stored.id)
  await t.throwsAsync(client.responses.retrieve('resp_missing'))
  const after = await scrape(port)

  t.is(value(after, 'harmony_requests_total', { route: '/v1/chat/completions', status: '200' }), 1)
  t.is(value(after, 'harmony_requests_total', { route: '/v1/responses', status: '200' }), 1)
  t.is(value(after, 'harmony_requests_total', { route: '/v1/responses/{id}', status: '200' }), 1)
  t.is(value(after, 'harmony_requests_total', { route: '/v1/responses/{id}', status: '404' }), 1)
  for (const name of ['harmony_time_to_first_token_seconds', 'harmony_inter_token_latency_seconds', 'harmony_request_duration_seconds'])
    t.true(
      after.some((s) => s.type === 'histogram' && s.name === `${name}_bucket` && s.labels.le === '+Inf'),
      name,
    )
  t.is(value(after, 'harmony_request_duration_seconds_count', { route: '/v1/chat/completions' }), 1)
  t.is(value(after, 'harmony_time_to_first_token_seconds_count', { engine: 'replay' }), 2)
  t.is(value(after, 'harmony_generated_tokens_total', { engine: 'replay' }), ANSWER.length + MALFORMED.length)
  // One token a step: every token but each generation's first has a gap before it.
  t.is(value(after, 'harmony_inter_token_latency_seconds_count', { engine: 'replay' }), ANSWER.length + MALFORMED.length - 2)
  t.true(value(after, 'harmony_prompt_tokens_total', { engine: 'replay' }) > 0)
  t.is(value(after, 'harmony_active_streams', { engine: 'replay' }), 0)
  t.is(value(after, 'harmony_parser_diagnostics_total', { engine: 'replay', code: 'stray-tokens' }), 1, 'the stray stop token was counted')
  t.is(value(after, 'harmony_store_operations_total', { op: 'put', outcome: 'ok' }), 1)
  t.is(value(after, 'harmony_store_operations_total', { op: 'get', outcome: 'ok' }), 2)
  // Bounded labels: no label value holds an id.
  for (const sample of after) for (const label of Object.values(sample.labels)) t.notRegex(label, /resp_|chatcmpl/, sample.name)
})

test('engine failures are counted by engine and code; cached prompt tokens as the engine reports them', async (t) => {
  const cachedEngine: Engine = {
    name: 'cached',
    async *generate() {
      yield { tokens: Uint32Array.from(ANSWER) }
      yield { tokens: new Uint32Array(0), usage: { promptTokens: 20, completionTokens: ANSWER.length, cachedPromptTokens: 16 } }
    },
  }
  const failing = await startGateway(t, { engine: failingEngine, onError: () => {} })
  await t.throwsAsync(failing.client.chat.completions.create({ model: 'gpt-oss', messages: [{ role: 'user', content: 'Hi' }] }))
  const samples = await scrape(failing.port)
  t.is(value(samples, 'harmony_engine_errors_total', { engine: 'failing', code: 'engine-connection-error' }), 1)
  t.is(value(samples, 'harmony_active_streams'), 0)

  const cached = await startGateway(t, { engine: cachedEngine })
  await cached.client.chat.completions.create({ model: 'gpt-oss', messages: [{ role: 'user', content: 'Hi' }] })
  t.is(value(await scrape(cached.port), 'harmony_cached_prompt_tokens_total', { engine: 'cached' }), 16)
})

test('metrics: false serves no /metrics', async (t) => {
  const { port } = await startGateway(t, { replay: [ANSWER], metrics: false })
  t.is((await fetch(`http://127.0.0.1:${port}/metrics`)).status, 404)
})

test("metrics: 'cluster' outside a cluster's worker answers for this process; another value is refused naming metrics", async (t) => {
  const { port, client } = await startGateway(t, { replay: [ANSWER], metrics: 'cluster' })
  await client.chat.completions.create({ model: 'gpt-oss', messages: [{ role: 'user', content: 'Hi' }] })
  t.is(value(await scrape(port), 'harmony_requests_total', { route: '/v1/chat/completions', status: '200' }), 1)
  await t.throwsAsync(async () => startGateway(t, { replay: [ANSWER], metrics: 'workers' }), { instanceOf: TypeError, message: /metrics/ })
})

/** The `harmony_parser_diagnostics_total` samples, each as `engine code` (a sample without an engine label: `undefined`). */
function diagnosticSeries(samples: Sample[]): Record<string, number> {
  const series: Record<string, number> = {}
  for (const s of samples) if (s.name === 'harmony_parser_diagnostics_total') series[`${s.labels.engine} ${s.labels.code}`] = s.value
  return series
}

test('parser diagnostics count under the engine whose output they are about, the request’s own under none', async (t) => {
  const clean = continuingEngine('clean', ANSWER)
  const broken = continuingEngine('broken', MALFORMED)
  const told: { code: string; engine?: string }[] = []
  const { port, client } = await startGateway(t, {
    // By load alone, in turn: clean, broken, clean, broken… (which is which is counted, not assumed).
    engine: new EngineGroup([clean.engine, broken.engine], { affinity: false }),
    observability: { onDiagnostic: (diagnostic: { code: string; engine?: string }) => told.push(diagnostic) },
  })
  const messages = [{ role: 'user' as const, content: 'Hi' }]
  for (let i = 0; i < 2; i++) {
    const stream = await client.chat.completions.create({ model: 'gpt-oss', messages, stream: true })
    for await (const _ of stream);
    await client.chat.completions.create({ model: 'gpt-oss', messages })
    // A background run's diagnostics are told when it ends, before its stream does.
    const background = await client.responses.create({ model: 'gpt-oss', input: 'Hi', background: true, stream: true })
    for await (const _ of background);
  }
  // What the request asked for and gpt-oss cannot do: the request's, no engine's output.
  await client.chat.completions.create({ model: 'gpt-oss', messages, reasoning_effort: 'minimal' })
  t.true(broken.calls() >= 3 && clean.calls() >= 3, `both engines served (clean ${clean.calls()}, broken ${broken.calls()})`)

  t.deepEqual(diagnosticSeries(await scrape(port)), { 'broken stray-tokens': broken.calls(), 'none not-applied': 1 })
  t.deepEqual(
    told.filter((d) => d.code === 'stray-tokens').map((d) => d.engine),
    Array.from({ length: broken.calls() }, () => 'broken'),
  )
  t.is(told.find((d) => d.code === 'not-applied')?.engine, undefined)
})

// Two messages each followed by a stray `<|end|>`: a `stray-tokens` diagnostic at each, one in each engine's part.
const STRAYING = harmony(
  '<|channel|>analysis<|message|>Think.<|end|><|end|><|start|>assistant<|channel|>analysis<|message|>More.<|end|><|end|><|start|>assistant<|channel|>final<|message|>Hello.<|return|>',
)

for (const stream of [true, false])
  test(`after a failover mid-stream, each diagnostic counts under the engine whose ids it points at (${stream ? 'streamed' : 'whole'})`, async (t) => {
    // The first engine breaks after 10 ids: past the first stray <|end|> (the 7th id), before the second.
    const first = continuingEngine('first', STRAYING, 10)
    const second = continuingEngine('second', STRAYING)
    const told: { code: string; engine?: string }[] = []
    const lines: Record<string, unknown>[] = []
    const { port } = await startGateway(t, {
      engines: [first.engine, second.engine],
      observability: {
        onError: () => {},
        onDiagnostic: (diagnostic: { code: string; engine?: string }) => told.push(diagnostic),
        requestLog: { info: (fields: object) => lines.push({ ...fields }) },
      },
    })
    const response = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-oss', messages: [{ role: 'user', content: 'Hi' }], stream }),
    })
    t.is(response.status, 200)
    const body = await response.text()
    const answer = stream
      ? body
          .split('\n\n')
          .filter((event) => event.startsWith('data: {'))
          .map((event) => JSON.parse(event.slice('data: '.length)).choices[0]?.delta?.content ?? '')
          .join('')
      : JSON.parse(body).choices[0].message.content
    t.is(answer, 'Hello.', 'the answer, whole')
    t.is(first.calls(), 1)
    t.is(second.calls(), 1)

    t.deepEqual(diagnosticSeries(await scrape(port)), {
      'first stray-tokens': 1,
      'second stray-tokens': 1,
      // As harmony_engine_failovers_total counts it: under the engine that failed.
      'first engine-failover': 1,
    })
    t.deepEqual(told.map((d) => `${d.engine} ${d.code}`).sort(), ['first engine-failover', 'first stray-tokens', 'second stray-tokens'])
    // The request's line: the engine that ended the output, and every engine whose ids it holds.
    await until(() => lines.length >= 1)
    t.like(lines[0], { engine: 'second', engines: ['first', 'second'], diagnostics: { 'stray-tokens': 2, 'engine-failover': 1 } })
  })

test('an engine that failed before its first id has no part in the output: its diagnostics and line are the next one’s', async (t) => {
  const down = continuingEngine('down', MALFORMED, 0)
  const broken = continuingEngine('broken', MALFORMED)
  const lines: Record<string, unknown>[] = []
  const { port, client } = await startGateway(t, {
    engines: [down.engine, broken.engine],
    observability: { onError: () => {}, onDiagnostic: () => {}, requestLog: { info: (fields: object) => lines.push({ ...fields }) } },
  })
  await client.chat.completions.create({ model: 'gpt-oss', messages: [{ role: 'user', content: 'Hi' }] })
  t.is(down.calls(), 1, 'the group tried the failing engine first')
  t.deepEqual(diagnosticSeries(await scrape(port)), { 'broken stray-tokens': 1 })
  await until(() => lines.length >= 1)
  t.like(lines[0], { engine: 'broken', diagnostics: { 'stray-tokens': 1 } })
  t.false('engines' in lines[0]!, 'one engine’s output')
})
