/**
 * The request log (issue 31): one structured line per request, with its id (the client's `x-request-id` when
 * sane, answered back), route pattern, status, time, key name, engine, tokens, time to first token and the
 * codes of the diagnostics; never the prompt's or the answer's text, nor a key.
 */
import test from 'ava'

import { startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { until } from '../helpers/until.mjs'

const ANSWER = harmony(
  '<|channel|>analysis<|message|>Private thoughts.<|end|><|start|>assistant<|channel|>final<|message|>Secret answer.<|return|>',
)

test('one line per request, saying what happened and nothing of what was said', async (t) => {
  const lines: Record<string, unknown>[] = []
  const { port } = await startGateway(t, {
    replay: [ANSWER],
    apiKeys: [{ key: 'sk-log-key-0123', name: 'team' }],
    requestLog: { info: (fields: object, message?: string) => lines.push({ ...fields, msg: message }) },
  })
  const headers = { authorization: 'Bearer sk-log-key-0123', 'content-type': 'application/json' }
  const answered = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { ...headers, 'x-request-id': 'client-id-1' },
    body: JSON.stringify({
      model: 'gpt-oss',
      messages: [{ role: 'user', content: 'My confidential question' }],
      reasoning_effort: 'minimal',
    }),
  })
  t.is(answered.headers.get('x-request-id'), 'client-id-1')
  await answered.text()
  const missing = await fetch(`http://127.0.0.1:${port}/v1/responses/resp_abc`, {
    headers: { ...headers, 'x-request-id': 'bad id\twith tab' },
  })
  t.regex(missing.headers.get('x-request-id') ?? '', /^req_[0-9a-f]{32}$/, 'an id that is not plain is replaced')
  await missing.text()
  // The lines are written when each answer has ended: wait for them, not for a time.
  await until(() => lines.length >= 2)
  t.like(lines[0], {
    msg: 'request',
    id: 'client-id-1',
    method: 'POST',
    route: '/v1/chat/completions',
    status: 200,
    key: 'team',
    engine: 'replay',
    generatedTokens: ANSWER.length,
    diagnostics: { 'not-applied': 1 },
  })
  t.true((lines[0]!.promptTokens as number) > 0)
  t.is(typeof lines[0]!.firstTokenMs, 'number')
  t.is(typeof lines[0]!.ms, 'number')
  t.like(lines[1], { route: '/v1/responses/{id}', status: 404, key: 'team' })
  const text = JSON.stringify(lines)
  for (const secret of ['confidential', 'Secret answer', 'Private thoughts', 'sk-log-key', 'resp_abc'])
    t.false(text.includes(secret), secret)
})

test('what preparing noted of the request is in its line too: a prompt re-rendered, counted under no engine', async (t) => {
  const lines: Record<string, unknown>[] = []
  const { port, client } = await startGateway(t, {
    replay: [ANSWER],
    onDiagnostic: () => {},
    requestLog: { info: (fields: object) => lines.push({ ...fields }) },
  })
  // The results of calls this gateway never returned: no ids behind them, so the request is re-rendered.
  await client.chat.completions.create({
    model: 'gpt-oss',
    messages: [
      { role: 'user', content: 'Weather in Paris?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_elsewhere', type: 'function', function: { name: 'get_weather', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'call_elsewhere', content: 'sunny' },
    ],
    tools: [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: {} } } }],
  })
  await until(() => lines.length >= 1)
  t.like(lines[0], { route: '/v1/chat/completions', engine: 'replay', diagnostics: { 'prompt-re-rendered': 1 } })
  const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text()
  t.regex(metrics, /^harmony_parser_diagnostics_total\{engine="none",code="prompt-re-rendered"\} 1$/m)
})
