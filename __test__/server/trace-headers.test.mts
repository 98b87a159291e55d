/**
 * The trace context an engine request carries when no OpenTelemetry SDK is registered (this file registers
 * none): the client's `traceparent` and `tracestate` as they came, so an engine that traces (vLLM) joins the
 * client's trace even through a gateway that exports nothing; a malformed one is not passed on.
 */
import test from 'ava'
import { createEngine } from 'harmony-stream/engines'

import { fakeVllm } from '../helpers/fake-engines.mjs'
import { startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'

const ANSWER = harmony('<|channel|>final<|message|>Hello.<|return|>')
const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'

test("without an SDK the engine gets the client's trace headers as they came; malformed ones are left out", async (t) => {
  const fake = await fakeVllm({ completion: ANSWER })
  t.teardown(() => fake.close())
  const { port } = await startGateway(t, { engine: createEngine('vllm', { url: fake.url, model: 'gpt-oss' }) })
  const send = (headers: Record<string, string>) =>
    fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ model: 'gpt-oss', messages: [{ role: 'user', content: 'Hi' }] }),
    }).then((response) => response.text())
  await send({ traceparent: TRACEPARENT, tracestate: 'vendor=value' })
  t.is(fake.headers[0]?.traceparent, TRACEPARENT)
  t.is(fake.headers[0]?.tracestate, 'vendor=value')
  await send({ traceparent: '00-not-a-trace-01' })
  t.is(fake.headers[1]?.traceparent, undefined)
  await send({})
  t.is(fake.headers[2]?.traceparent, undefined)
})
