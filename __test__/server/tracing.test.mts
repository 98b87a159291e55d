/**
 * OpenTelemetry tracing (issue 31), seen by the OpenTelemetry SDK's own in-memory exporter: a request is a server
 * span whose parent is the client's W3C `traceparent`, with children for its preparation, its generation (the
 * first token an event) and its store operations; the engine request (over HTTP, to a vLLM stand-in) carries
 * the generation span's context as `traceparent`. The gateway uses `@opentelemetry/api` alone: the SDK here is
 * the application's, registered by the test.
 */
import { context, propagation, SpanKind, trace } from '@opentelemetry/api'
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base'
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node'
import test from 'ava'
import { createEngine } from 'harmony-stream/engines'

import { fakeVllm } from '../helpers/fake-engines.mjs'
import { startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { until } from '../helpers/until.mjs'

const exporter = new InMemorySpanExporter()
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] })
// The SDK's defaults: AsyncLocalStorage for the active context, W3C trace context (and baggage) for propagation.
provider.register()

test.after.always(async () => {
  await provider.shutdown()
  trace.disable()
  context.disable()
  propagation.disable()
})

const ANSWER = harmony('<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hello there.<|return|>')
const TRACE_ID = '0af7651916cd43dd8448eb211c80319c'
const CLIENT_SPAN = 'b7ad6b7169203331'

test('a request is a span under the client’s traceparent, with prepare, generate (first token) and store spans; the engine gets the generation’s traceparent', async (t) => {
  const fake = await fakeVllm({ completion: ANSWER })
  t.teardown(() => fake.close())
  const engine = createEngine('vllm', { url: fake.url, model: 'gpt-oss' })
  const { port } = await startGateway(t, { engine })
  const answer = await fetch(`http://127.0.0.1:${port}/v1/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', traceparent: `00-${TRACE_ID}-${CLIENT_SPAN}-01` },
    body: JSON.stringify({ model: 'gpt-oss', input: 'Hi' }),
  })
  t.is(answer.status, 200)
  await answer.text()
  // The server span ends when the answer has been sent: wait for it rather than for a time.
  await until(() => exporter.getFinishedSpans().some((s) => s.kind === SpanKind.SERVER))
  const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === TRACE_ID)
  const server = spans.find((s) => s.kind === SpanKind.SERVER)!
  t.is(server.name, 'POST /v1/responses')
  t.is(server.parentSpanContext?.spanId, CLIENT_SPAN)
  t.is(server.attributes['http.response.status_code'], 200)
  const childOf = (name: string) => spans.filter((s) => s.name === name && s.parentSpanContext?.spanId === server.spanContext().spanId)
  t.is(childOf('prepare').length, 1)
  const [generation] = childOf('generate')
  t.truthy(generation)
  t.true(generation!.events.some((event) => event.name === 'first_token'))
  t.is(generation!.attributes['gen_ai.usage.output_tokens'], ANSWER.length)
  t.true(childOf('store.put').length >= 1, 'the response was kept in a span')
  // The engine request carried the generation span's context.
  t.is(fake.headers[0]?.traceparent, `00-${TRACE_ID}-${generation!.spanContext().spanId}-01`)
})
