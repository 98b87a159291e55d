/**
 * Tool calls written as text reach a gateway's clients as calls by default (issue 46): the two outputs users
 * posted that only this reads as their calls (`__test__/wire/fixtures/malformed-outputs.json`), served by the
 * replay engine through the gateway to the real `openai` client, on Chat (streamed and whole) and Responses,
 * with the tools as the client declared them. The gateway passes the offered functions with their schemas
 * (`RenderedPrompt.functions`), which a preamble of arguments alone needs to name its tool.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

import test from 'ava'

import { startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'

interface Case {
  id: string
  output: string
  tools: { name: string; parameters: Record<string, unknown> }[]
  expected: { calls: { name: string; arguments: unknown }[] }
}

const { cases } = JSON.parse(readFileSync(join(import.meta.dirname, '..', 'wire', 'fixtures', 'malformed-outputs.json'), 'utf8')) as {
  cases: Case[]
}
const CASES = ['vllm-tool-choice-required-json-in-content', 'trtllm-commentary-without-recipient'].map(
  (id) => cases.find((c) => c.id === id)!,
)

for (const c of CASES) {
  test(`${c.id}: the client gets the call, on Chat streamed and whole and on Responses`, async (t) => {
    // Whole completions, as an engine gives them: the answer after the header the thread shows, ended by
    // `<|return|>`; the preamble ended by `<|call|>`, as gpt-oss ends a call (the thread's server dropped it).
    const completion = harmony(c.id.startsWith('vllm') ? `<|channel|>final<|message|>${c.output}<|return|>` : `${c.output}<|call|>`)
    const { client } = await startGateway(t, { replay: [completion], implementation: 'js' })
    const tools = c.tools.map((tool) => ({ type: 'function' as const, function: tool }))
    const messages = [{ role: 'user' as const, content: 'Go.' }]
    const expected = c.expected.calls.map((call) => ({ name: call.name, arguments: call.arguments }))

    const whole = await client.chat.completions.create({ model: 'gpt-oss', messages, tools })
    t.is(whole.choices[0]!.finish_reason, 'tool_calls')
    t.deepEqual(
      whole.choices[0]!.message.tool_calls!.map(
        (call) => call.type === 'function' && { name: call.function.name, arguments: JSON.parse(call.function.arguments) },
      ),
      expected,
    )

    const stream = client.chat.completions.stream({ model: 'gpt-oss', messages, tools })
    const streamed = await stream.finalChatCompletion()
    t.deepEqual(
      (streamed.choices[0]!.message.tool_calls ?? []).map((call) => ({
        name: call.function.name,
        arguments: JSON.parse(call.function.arguments),
      })),
      expected,
    )
    t.is(streamed.choices[0]!.message.content ?? '', '', 'the JSON is not also the answer')

    const response = await client.responses.create({
      model: 'gpt-oss',
      input: 'Go.',
      tools: c.tools.map((tool) => ({ type: 'function' as const, name: tool.name, parameters: tool.parameters, strict: false })),
    })
    t.deepEqual(
      response.output.flatMap((item) =>
        item.type === 'function_call' ? [{ name: item.name, arguments: JSON.parse(item.arguments) }] : [],
      ),
      expected,
    )
  })
}
