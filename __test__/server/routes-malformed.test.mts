/**
 * Every route with malformed input (issue 30): every method on every path the gateway serves, with paths that
 * are not valid percent-encoding or not URLs at all, odd queries, and bodies that are not what the route takes.
 * Each answer must be one the code decided on: a 2xx, or a 4xx with an OpenAI-style error body (Anthropic's, on
 * the Messages routes). A 5xx here is a
 * failure the code did not mean (an `internal_error`), and fails the test, naming the request.
 */
import { connect } from 'node:net'

import test from 'ava'
import { MemoryResponseStore } from 'harmony-stream/server'

import { startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'

const ANSWER = harmony('<|channel|>final<|message|>Hi.<|return|>')

/** One raw HTTP/1.1 exchange (the request line as given, no client in between): the status and the body. */
function exchange(port: number, method: string, target: string, body: string | null): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    let text = ''
    socket.on('data', (chunk) => (text += chunk))
    socket.on('error', reject)
    socket.on('close', () => {
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0)
      resolve({ status, body: text.slice(text.indexOf('\r\n\r\n') + 4) })
    })
    const head = [`${method} ${target} HTTP/1.1`, 'host: 127.0.0.1', 'connection: close']
    if (body !== null) head.push('content-type: application/json', `content-length: ${Buffer.byteLength(body)}`)
    socket.end(`${head.join('\r\n')}\r\n\r\n${body ?? ''}`)
  })
}

const PATHS = [
  '/v1/chat/completions',
  '/v1/responses',
  '/v1/responses/compact',
  '/v1/messages',
  '/v1/messages?beta=true',
  '/v1/messages/count_tokens',
  '/v1/models',
  '/health',
  '/v1/responses/resp_0123',
  '/v1/responses/resp_0123/input_items?limit=abc&order=sideways&after=x',
  '/v1/responses/resp_0123?stream=true&starting_after=-1',
  '/v1/responses/resp_0123/cancel',
  '/v1/responses/%ZZ',
  '/v1/responses/%E0%A4%A/input_items',
  '/v1/responses/%ZZ/cancel',
  '/v1/responses/%00?stream=true',
  `/v1/responses/${'a'.repeat(4000)}`,
  '/v1/models?%ZZ=%ZZ',
  '/%',
  'http://[bad/v1/models',
  '*',
  '/v1/responses/../../etc/passwd',
]
const METHODS = ['GET', 'POST', 'DELETE', 'PUT', 'OPTIONS']
const BODIES = [
  null,
  '{}',
  'not json',
  '[]',
  '{"model": 7, "messages": "hi", "input": {"x": 1}}',
  '{"model": "gpt-oss", "input": [{"type": "compaction", "encrypted_content": "hsc1.AAAA"}]}',
  '{"model": "gpt-oss", "input": [{"type": "reasoning", "encrypted_content": 5}, {"type": "item_reference", "id": 5}]}',
  '{"model": "m", "max_tokens": "x", "messages": [{"role": "user", "content": [{"type": "tool_result"}, {"type": "text"}]}], "system": [{"type": "image"}]}',
  '{"model": "m", "max_tokens": 5, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": 1, "input": "x"}, {"type": "thinking"}]}], "tools": [{"name": 5}, {"type": "bash_20250124"}, {"type": "nope"}], "tool_choice": {"type": "tool"}, "thinking": {"type": "enabled"}, "stop_sequences": [1], "output_config": {"effort": "max", "format": {"type": "x"}}}',
  '{"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "image"}]}]}, {"role": "robot", "content": "x"}]}',
  `{"model": "gpt-oss", "messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}}}}`,
]

test('every route, every method, malformed paths and bodies: no answer is a 5xx', async (t) => {
  const { port } = await startGateway(t, { replay: [ANSWER], responseStore: new MemoryResponseStore(), onError: () => {} })
  const failures: string[] = []
  let answered = 0
  for (const path of PATHS)
    for (const method of METHODS)
      for (const body of method === 'GET' || method === 'OPTIONS' ? [null] : BODIES) {
        const answer = await exchange(port, method, path, body)
        answered++
        if (answer.status === 0 || answer.status >= 500)
          failures.push(`${method} ${path.slice(0, 60)} ${body?.slice(0, 40) ?? ''} → ${answer.status} ${answer.body.slice(0, 120)}`)
        else if (answer.status >= 400 && !answer.body.includes('"error"'))
          failures.push(`${method} ${path.slice(0, 60)} → ${answer.status} without an error body`)
      }
  t.deepEqual(failures, [])
  t.true(answered > 300, `${answered} requests`)
  // And the gateway still answers.
  t.is((await exchange(port, 'GET', '/health', null)).status, 200)
})
