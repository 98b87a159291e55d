/**
 * The Open Responses dialect (issue 29): where the specification (openresponses/openresponses, 2026-04-24)
 * differs from OpenAI's Responses API, a gateway with `responsesDialect: 'open-responses'`, or a request with an
 * `OpenResponses-Version` header, follows the specification: raw reasoning streams as `response.reasoning.delta`
 * and `.done`, and an SSE stream ends with `data: [DONE]`. Everything else is the same stream. Measured outside
 * these tests with the specification's own compliance suite: docs/API.md "The Open Responses dialect".
 */
import test from 'ava'
import WebSocket from 'ws'

import { recordingEngine, startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'

const ANSWER = harmony('<|channel|>analysis<|message|>Say it.<|end|><|start|>assistant<|channel|>final<|message|>Hello.<|return|>')

/** A streamed Responses request's raw SSE text. */
async function streamText(port: number, headers: Record<string, string> = {}): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${port}/v1/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'gpt-oss', input: 'Hi', stream: true }),
  })
  return response.text()
}

const eventTypes = (sse: string) => [...sse.matchAll(/^event: (\S+)$/gm)].map((match) => match[1]!)

test("the OpenAI dialect by default; the specification's with the gateway's option or the request's OpenResponses-Version header", async (t) => {
  const { port } = await startGateway(t, { engine: recordingEngine([ANSWER]).engine })
  const openai = await streamText(port)
  const asked = await streamText(port, { 'OpenResponses-Version': 'latest' })
  const { port: specPort, client } = await startGateway(t, { engine: recordingEngine([ANSWER]).engine, responsesDialect: 'open-responses' })
  const spec = await streamText(specPort)
  t.true(eventTypes(openai).includes('response.reasoning_text.delta'))
  t.false(openai.includes('[DONE]'))
  for (const sse of [asked, spec]) {
    const types = eventTypes(sse)
    t.true(types.includes('response.reasoning.delta') && types.includes('response.reasoning.done'), types.join(' '))
    t.false(types.some((type) => type.startsWith('response.reasoning_text')))
    t.true(sse.endsWith('data: [DONE]\n\n'))
    // The same events otherwise, in the same order.
    const renamed = types.map((type) => type.replace('response.reasoning.', 'response.reasoning_text.'))
    t.deepEqual(renamed, eventTypes(openai))
  }
  // The official client reads the specification's stream to its end.
  let text = ''
  for await (const event of await client.responses.create({ model: 'gpt-oss', input: 'Hi', stream: true }))
    if (event.type === 'response.output_text.delta') text += event.delta
  t.is(text, 'Hello.')
})

test('the WebSocket mode in the Open Responses dialect: its event names, and no [DONE] (events are messages)', async (t) => {
  const { port } = await startGateway(t, { engine: recordingEngine([ANSWER]).engine, responsesDialect: 'open-responses' })
  const socket = new WebSocket(`ws://127.0.0.1:${port}/v1/responses`)
  t.teardown(() => socket.close())
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
  const types: string[] = []
  const done = new Promise<void>((resolve) =>
    socket.on('message', (data) => {
      const event = JSON.parse(String(data)) as { type: string }
      types.push(event.type)
      if (event.type === 'response.completed') resolve()
    }),
  )
  socket.send(JSON.stringify({ type: 'response.create', model: 'gpt-oss', input: 'Hi' }))
  await done
  t.true(types.includes('response.reasoning.delta'), types.join(' '))
  t.false(types.some((type) => type.startsWith('response.reasoning_text')))
})

test('an unknown dialect is a TypeError naming the option', (t) => {
  return startGateway(t, { engine: recordingEngine([ANSWER]).engine, responsesDialect: 'openresponses' }).then(
    () => t.fail('accepted'),
    (error: Error) => t.regex(error.message, /responsesDialect/),
  )
})
