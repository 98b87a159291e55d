/**
 * OpenAI's official Python client (issue 29), with its defaults, against the gateway with its defaults: Chat, a
 * tool call, `parse` with a pydantic model, a streamed Responses request continued by `previous_response_id` (its
 * input tokens counted first: a prompt's date is the same length any day), a stateless tool loop with sealed
 * reasoning, and two choices (`n`, issue 47), whole and streamed. The client runs in the project's `.venv`
 * (scripts/setup-reference.mjs), as a child process, so the gateway in this one answers it.
 */
import { spawn } from 'node:child_process'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'

import test from 'ava'
import { createGateway } from 'harmony-stream/server'

import { recordingEngine } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { decodeTokens } from '../helpers/token-bytes.mjs'

const PYTHON = join(import.meta.dirname, '..', '..', '.venv', 'bin', 'python')

const final = (text: string) => harmony(`<|channel|>final<|message|>${text}<|return|>`)
const CALL = harmony(
  '<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
)

/** Runs the client script against `baseURL`; what it printed, parsed (its stderr in the error when it fails). */
function runClient(baseURL: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [join(import.meta.dirname, '..', 'helpers', 'python_client.py'), baseURL], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (chunk) => (stdout += chunk))
    child.stderr.on('data', (chunk) => (stderr += chunk))
    child.on('error', reject)
    child.on('close', (code) =>
      code === 0 ? resolve(JSON.parse(stdout)) : reject(new Error(`python_client.py exited ${code}: ${stderr.slice(-2000)}`)),
    )
  })
}

test('OpenAI Python: Chat, tools, parse, a streamed and continued Response (counted first), a stateless tool loop, n', async (t) => {
  const { engine, prompts } = recordingEngine([
    final('Paris.'),
    CALL,
    final('{"name":"Paris","country":"France"}'),
    final('Paris.'),
    final('Rome.'),
    CALL,
    final('It is clear in Paris.'),
    final('One.'),
    final('Two, longer.'),
    final('One.'),
    final('Two, longer.'),
  ])
  const server = createGateway({ engine, onDiagnostic: () => {} })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const out = await runClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`)
  t.deepEqual(out, {
    chat: 'Paris.',
    chat_call: ['get_weather', { city: 'Paris' }, 'tool_calls'],
    parsed: { name: 'Paris', country: 'France' },
    streamed: ['Paris.', 'Paris.'],
    continued: [true, 'Rome.'],
    counted: ['response.input_tokens', prompts[4]!.length],
    stateless: [['reasoning', 'function_call'], true, 'It is clear in Paris.'],
    n: [
      [
        [0, 'One.'],
        [1, 'Two, longer.'],
      ],
      final('One.').length + final('Two, longer.').length,
      ['One.', 'Two, longer.'],
      final('One.').length + final('Two, longer.').length,
      true,
    ],
  })
  // The continuation and the stateless loop's second request were prompted with what came before them.
  t.regex(decodeTokens(prompts[4]!), /Capital of France\?.*Paris\..*And of Italy\?/s)
  t.regex(decodeTokens(prompts[6]!), /analysis<\|message\|>Need the weather\.<\|end\|>.*\{"sky":"clear"\}/s)
})
