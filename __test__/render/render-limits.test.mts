/**
 * The renderers' bounds (src/render/limits.ts), checked before any work: the request shapes that used to
 * overflow the stack, crash tiktoken-rs or hold the thread for seconds are each a HarmonyRequestError (400)
 * naming the field and the limit, on both implementations; every bound can be changed through `limits`.
 */
import test from 'ava'
import {
  type HarmonyRequestError,
  RenderCache,
  HarmonyRequestError as RequestError,
  renderChatCompletionRequest,
  renderConversation,
  renderResponsesRequest,
} from 'harmony-stream'

import { IMPLEMENTATIONS } from '../helpers/harmony.mjs'

/** `{ items: { items: … } }` nested `depth` levels, built without recursion. */
function nested(depth: number, key = 'items'): Record<string, unknown> {
  let value: Record<string, unknown> = { type: 'string' }
  for (let i = 0; i < depth; i++) value = { type: 'array', [key]: value }
  return value
}

function tool(parameters: unknown, name = 'get_weather') {
  return { type: 'function', function: { name, description: 'x', parameters } }
}

const user = (content: string) => ({ role: 'user', content })

function refused(t: import('ava').ExecutionContext, render: () => unknown, param: RegExp | string, message: RegExp): HarmonyRequestError {
  const error = t.throws(render, { instanceOf: RequestError }) as HarmonyRequestError
  if (typeof param === 'string') t.is(error.param, param)
  else t.regex(String(error.param), param)
  t.regex(error.message, message)
  t.is(error.status, 400)
  return error
}

for (const implementation of IMPLEMENTATIONS) {
  const options = { implementation, cache: null }

  test(`${implementation}: JSON nested thousands deep is a 400 naming where, in every place it used to overflow the stack`, (t) => {
    const deep = nested(5000)
    const chat = (extra: Record<string, unknown>) => () =>
      renderChatCompletionRequest({ model: 'm', messages: [user('hi')], ...extra }, options)
    refused(
      t,
      chat({ tools: [tool({ type: 'object', properties: { a: deep } })] }),
      /^tools\[0\]\.function\.parameters\.properties\.a(\.items)+$/,
      /more than 64 levels deep \(limits\.maxDepth\)/,
    )
    refused(
      t,
      chat({ tools: [tool({ type: 'object', properties: { a: { type: 'string', default: nested(5000, 'x') } } })] }),
      /default/,
      /limits\.maxDepth/,
    )
    refused(t, chat({ tool_choice: nested(5000, 'function') }), /^tool_choice(\.function)+$/, /limits\.maxDepth/)
    const call = { role: 'assistant', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: nested(5000, 'a') } }] }
    refused(t, chat({ messages: [user('hi'), call] }), /^messages\[1\]\.tool_calls\[0\]\.function\.arguments(\.a)+$/, /limits\.maxDepth/)
    // Just inside the bound renders: the limit is where the docs say.
    t.notThrows(() =>
      renderChatCompletionRequest(
        { model: 'm', messages: [user('hi')], metadata: nested(30, 'x') },
        { ...options, limits: { maxDepth: 64 } },
      ),
    )
  })

  test(`${implementation}: a million spaces (tiktoken-rs overflowed its stack) and a 3.9 MB word are 400s, before any BPE`, (t) => {
    refused(
      t,
      () => renderChatCompletionRequest({ model: 'm', messages: [user(`a${' '.repeat(1_000_000)}b`)] }, options),
      'messages[0].content',
      /run of more than 4096 characters.*the limit is 4096 \(limits\.maxRunLength\)/,
    )
    refused(
      t,
      () => renderResponsesRequest({ model: 'm', input: 'x'.repeat(3_900_000) }, options),
      'input',
      /run of more than 4096 characters/,
    )
    refused(
      t,
      () => renderChatCompletionRequest({ model: 'm', messages: [user('!'.repeat(5000))] }, options),
      'messages[0].content',
      /run of more than 4096/,
    )
    // Digits are read three at a time by the tokenizer: a long number is not a long run.
    t.notThrows(() => renderChatCompletionRequest({ model: 'm', messages: [user('7'.repeat(20_000))] }, options))
    // Text of ordinary words, however long, is fine; so are non-ASCII letters up to the bound.
    t.notThrows(() => renderChatCompletionRequest({ model: 'm', messages: [user('word '.repeat(50_000))] }, options))
    t.notThrows(() => renderChatCompletionRequest({ model: 'm', messages: [user('é'.repeat(4096))] }, options))
    refused(
      t,
      () => renderChatCompletionRequest({ model: 'm', messages: [user('é'.repeat(4097))] }, options),
      'messages[0].content',
      /run of more than 4096/,
    )
    refused(
      t,
      () => renderChatCompletionRequest({ model: 'm', messages: [user('😀'.repeat(4097))] }, options),
      'messages[0].content',
      /limits\.maxRunLength/,
    )
  })

  test(`${implementation}: counts and identifiers have bounds`, (t) => {
    const many = Array.from({ length: 125_000 }, () => user('x'))
    refused(
      t,
      () => renderChatCompletionRequest({ model: 'm', messages: many }, options),
      'messages',
      /125000 entries; the limit is 10000 \(limits\.maxMessages\)/,
    )
    const items = [user('x'), ...Array.from({ length: 118_000 }, () => ({ role: 'assistant', content: '' }))]
    refused(t, () => renderResponsesRequest({ model: 'm', input: items }, options), 'input', /limits\.maxMessages/)
    const tools = Array.from({ length: 129 }, (_, i) => tool({ type: 'object' }, `f${i}`))
    refused(
      t,
      () => renderChatCompletionRequest({ model: 'm', messages: [user('x')], tools }, options),
      'tools',
      /129 entries; the limit is 128/,
    )
    refused(
      t,
      () => renderChatCompletionRequest({ model: 'm', messages: [user('x')], tools: [tool({}, 'f'.repeat(300))] }, options),
      'tools[0].function.name',
      /300 characters long; the limit is 256/,
    )
    const call = { role: 'assistant', tool_calls: [{ id: 'c'.repeat(300), type: 'function', function: { name: 'f', arguments: '{}' } }] }
    refused(
      t,
      () => renderChatCompletionRequest({ model: 'm', messages: [user('x'), call] }, options),
      'messages[1].tool_calls[0].id',
      /limits\.maxIdentifierLength/,
    )
    refused(
      t,
      () =>
        renderResponsesRequest({ model: 'm', input: [{ type: 'function_call_output', call_id: 'c'.repeat(300), output: 'x' }] }, options),
      'input[0].call_id',
      /limits\.maxIdentifierLength/,
    )
    refused(
      t,
      () => renderConversation(Array.from({ length: 10_001 }, () => user('x')) as never, options),
      'messages',
      /limits\.maxMessages/,
    )
  })

  test(`${implementation}: every bound is configurable, and raised bounds render what the defaults refuse`, (t) => {
    const items = [user('x'), ...Array.from({ length: 20_000 }, () => ({ role: 'assistant', content: '' }))]
    const rendered = renderResponsesRequest({ model: 'm', input: items }, { ...options, limits: { maxMessages: 30_000 } })
    t.true(rendered.tokens.length > 20_000)
    refused(
      t,
      () => renderChatCompletionRequest({ model: 'm', messages: [user('abcdefghijk')] }, { ...options, limits: { maxRunLength: 10 } }),
      'messages[0].content',
      /limit is 10/,
    )
    t.notThrows(() =>
      renderChatCompletionRequest({ model: 'm', messages: [user('a'.repeat(5000))] }, { ...options, limits: { maxRunLength: 8192 } }),
    )
    t.throws(() => renderChatCompletionRequest({ model: 'm', messages: [user('x')] }, { ...options, limits: { maxDepht: 3 } as never }), {
      instanceOf: TypeError,
      message: /renderChatCompletionRequest: option 'limits': unknown option 'maxDepht' \(did you mean 'maxDepth'\?\)/,
    })
    t.throws(() => renderChatCompletionRequest({ model: 'm', messages: [user('x')] }, { ...options, limits: { maxDepth: 0 } }), {
      instanceOf: RangeError,
    })
  })
}

test('the renderers refuse the same requests on both implementations, with the same error', (t) => {
  const bodies = [
    { model: 'm', messages: [user(' '.repeat(10_000))] },
    { model: 'm', messages: [user('x')], tools: [tool(nested(100))] },
    { model: 'm', messages: Array.from({ length: 10_001 }, () => user('x')) },
  ]
  for (const body of bodies) {
    const errors = IMPLEMENTATIONS.map((implementation) => {
      try {
        renderChatCompletionRequest(body, { implementation, cache: null })
        return null
      } catch (error) {
        return { message: (error as Error).message, param: (error as HarmonyRequestError).param }
      }
    })
    t.not(errors[0], null)
    for (const other of errors) t.deepEqual(other, errors[0])
  }
})

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: a long text's longest run is read once per cache, and a smaller bound still refuses it`, (t) => {
    const cache = new RenderCache()
    const runOf = (text: string) => (cache as unknown as { runOf(text: string): number | undefined }).runOf(text)
    // Runs of 3,000 letters between spaces: within the default bound (4,096).
    const text = Array.from({ length: 4 }, () => 'b'.repeat(3000)).join(' ')
    const body = { model: 'm', messages: [user(text)] }
    renderChatCompletionRequest(body, { implementation, cache })
    // Internal, but the way to see that the next request with this text does not read it again.
    t.is(runOf(text), 3000)
    t.notThrows(() => renderChatCompletionRequest({ ...body }, { implementation, cache }))
    refused(
      t,
      () => renderChatCompletionRequest(body, { implementation, cache, limits: { maxRunLength: 2999 } }),
      'messages[0].content',
      /limit is 2999/,
    )
    // A text over the bound is refused, and nothing of it is remembered (its run was cut short at the bound).
    const hostile = { model: 'm', messages: [user('c'.repeat(5000))] }
    refused(t, () => renderChatCompletionRequest(hostile, { implementation, cache }), 'messages[0].content', /limit is 4096/)
    t.is(runOf('c'.repeat(5000)), undefined)
    refused(t, () => renderChatCompletionRequest(hostile, { implementation, cache }), 'messages[0].content', /limit is 4096/)
  })
}
