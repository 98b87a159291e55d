/**
 * The gateway's Prometheus metrics (`GET /metrics`), read by Prometheus's own text parser (the Python client's
 * `text_string_to_metric_families`, in the project's .venv): every metric the operations issue names is there,
 * moves as requests run, and carries only bounded labels (route patterns, never ids).
 */
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'

import test from 'ava'
import type { Engine } from 'harmony-stream/engines'

import { failingEngine, startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'

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
  t.true(value(after, 'harmony_parser_diagnostics_total') >= 1, 'the malformed header was counted')
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
