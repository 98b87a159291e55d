/**
 * A call's JSON arguments that the model ended short of their closing brackets (LM Studio bug tracker #942):
 * `missingClosers` finds exactly the brackets that make them JSON, and the adapters close the call with them
 * (a last arguments delta, so the streamed deltas add up to the call), on every face and both backends, unless
 * the completion was cut by the length limit.
 */
import test from 'ava'
import { AnthropicMessagesStream, ChatCompletionsStream, chatCompletion, responseObject } from 'harmony-stream'

import { missingClosers } from '../../src/wire/unclosed-arguments.ts'
import { harmony, IMPLEMENTATIONS } from '../helpers/harmony.mjs'

test('missingClosers: the brackets that close the text into JSON, and null where brackets alone do not', (t) => {
  t.is(missingClosers('{"a":{"b":[1,2'), ']}}')
  t.is(missingClosers('{"a":"}]{["'), '}', 'brackets inside strings are text')
  t.is(missingClosers('{"a":"say \\"{\\""'), '}', 'an escaped quote does not end the string')
  t.is(missingClosers('{"a":1}'), null, 'nothing open')
  t.is(missingClosers('{"a":"cut'), null, 'a string left open')
  t.is(missingClosers('{"a":1,'), null, 'a dangling comma')
  t.is(missingClosers('{"a":'), null, 'a key without its value')
  t.is(missingClosers('{"a":[1}'), null, 'a wrong bracket is no missing one')
  t.is(missingClosers('not json {'), null, 'closing does not make JSON of text')
})

const OUTPUT = '<|channel|>commentary to=functions.deploy <|constrain|>json<|message|>{"env":{"name":"pr","limits":{"cpu":"1"}}'
const TOOLS = { toolNames: ['functions.deploy'] }

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: Chat streams the missing brace as the arguments' last delta, with a diagnostic`, (t) => {
    const stream = new ChatCompletionsStream({ model: 'gpt-oss', parser: { implementation, ...TOOLS } })
    const chunks = [...harmony(OUTPUT).flatMap((id) => stream.push(Uint32Array.of(id))), ...stream.finish()]
    const streamed = chunks
      .flatMap((chunk) => chunk.choices.flatMap((choice) => choice.delta.tool_calls ?? []))
      .map((call) => call.function?.arguments ?? '')
      .join('')
    t.deepEqual(JSON.parse(streamed), { env: { name: 'pr', limits: { cpu: '1' } } })
    t.is(stream.completion().choices[0]!.message.tool_calls![0]!.function.arguments, streamed)
    const diagnostic = stream.diagnostics.find((d) => d.code === 'closed-tool-arguments')
    t.like(diagnostic, { text: '}', toolCallId: stream.completion().choices[0]!.message.tool_calls![0]!.id })
    t.false(stream.diagnostics.some((d) => d.code === 'invalid-tool-arguments'))
  })

  test(`${implementation}: Responses and Messages close the call alike`, (t) => {
    const ids = Uint32Array.from(harmony(OUTPUT))
    const response = responseObject(ids, { model: 'gpt-oss', parser: { implementation, ...TOOLS } })
    const call = response.output.find((item) => item.type === 'function_call') as { arguments: string }
    t.deepEqual(JSON.parse(call.arguments), { env: { name: 'pr', limits: { cpu: '1' } } })
    const messages = new AnthropicMessagesStream({ model: 'gpt-oss', parser: { implementation, ...TOOLS } })
    messages.push(ids)
    messages.finish()
    const use = messages.message().content.find((block) => block.type === 'tool_use') as { input: unknown }
    t.deepEqual(use.input, { env: { name: 'pr', limits: { cpu: '1' } } })
  })

  test(`${implementation}: a call cut by the length limit is not closed: its arguments stay as the model left them`, (t) => {
    const completion = chatCompletion(Uint32Array.from(harmony(OUTPUT)), {
      model: 'gpt-oss',
      parser: { implementation, ...TOOLS },
      truncated: true,
    })
    t.is(completion.choices[0]!.message.tool_calls![0]!.function.arguments, '{"env":{"name":"pr","limits":{"cpu":"1"}}')
    t.deepEqual(
      completion.diagnostics.map((d) => d.code),
      ['invalid-tool-arguments'],
    )
  })
}
