/**
 * The adapters announce what the model chose as soon as a header completes (a tool call's id and name, a
 * Responses item), before any delta, on both implementations and at every step size.
 */
import test from 'ava'

import { ChatCompletionsStream, chatCompletion, ResponsesStream, responseObject } from 'harmony-stream'

import { batches, harmony, IMPLEMENTATIONS } from '../helpers/harmony.mjs'

const COMPLETION = harmony(
  '<|channel|>analysis<|message|>Need the weather.<|end|>' +
    '<|start|>assistant<|channel|>commentary<|message|>Checking.<|end|>' +
    '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
)
const CALL_HEADER_END = COMPLETION.lastIndexOf(200008) // the tool call's <|message|>

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: Chat announces a tool call (id, type, name, empty arguments) in the step its header completes, once`, (t) => {
    for (const size of [1, 2, 3, 7, COMPLETION.length]) {
      const chat = new ChatCompletionsStream({ model: 'm', id: 'chatcmpl-x', parser: { implementation } })
      const steps = batches(COMPLETION, size)
      let consumed = 0
      const announcements: { step: number; delta: unknown }[] = []
      const argumentsText: string[] = []
      steps.forEach((step, i) => {
        const chunks = chat.push(step)
        consumed += step.length
        for (const chunk of chunks) {
          for (const call of chunk.choices[0]?.delta.tool_calls ?? []) {
            if (call.id !== undefined) announcements.push({ step: i, delta: call })
            argumentsText.push(call.function.arguments)
          }
        }
        if (consumed > CALL_HEADER_END && consumed - step.length <= CALL_HEADER_END) {
          t.is(announcements.length, 1, `size ${size}: announced in the step holding the header's end`)
        }
      })
      chat.finish()
      t.deepEqual(
        announcements.map((a) => a.delta),
        [{ index: 0, id: 'call_x_0', type: 'function', function: { name: 'get_weather', arguments: '' } }],
        `size ${size}`,
      )
      t.is(argumentsText.join(''), '{"city":"Paris"}', `size ${size}`)
    }
  })

  test(`${implementation}: Responses adds every item when its header completes, before any delta`, (t) => {
    for (const size of [1, 4, COMPLETION.length]) {
      const stream = new ResponsesStream({ model: 'm', parser: { implementation } })
      const events = [...stream.start(), ...batches(COMPLETION, size).flatMap((step) => stream.push(step)), ...stream.finish()]
      const types = events.map((e) => e.type)
      for (const itemType of ['reasoning', 'message', 'function_call']) {
        const added = events.findIndex((e) => e.type === 'response.output_item.added' && (e.item as { type: string }).type === itemType)
        t.true(added >= 0, `${itemType} added`)
        const id = (events[added].item as { id: string }).id
        const firstDelta = events.findIndex((e) => e.type.endsWith('.delta') && e.item_id === id)
        t.true(added < firstDelta, `size ${size}: ${itemType} added before its first delta`)
      }
      // With one token per step, the call's item is added in the step of its <|message|>, with no argument yet.
      if (size === 1) {
        const stream1 = new ResponsesStream({ model: 'm', parser: { implementation } })
        stream1.start()
        for (const id of COMPLETION.slice(0, CALL_HEADER_END)) stream1.push([id])
        const atHeader = stream1.push([COMPLETION[CALL_HEADER_END]])
        t.deepEqual(
          atHeader.map((e) => e.type),
          ['response.output_item.added'],
        )
        t.like(atHeader[0].item as object, { type: 'function_call', name: 'get_weather', arguments: '', status: 'in_progress' })
      }
      t.is(types.filter((x) => x === 'response.output_item.added').length, 3)
    }
  })
}

test('options are checked: a TypeError naming the option', (t) => {
  t.throws(() => new ChatCompletionsStream({} as never), { instanceOf: TypeError, message: /option 'model' is required/ })
  t.throws(() => new ChatCompletionsStream({ model: 'm', reasoningField: 'nope' as 'both' }), {
    instanceOf: TypeError,
    message: /reasoningField/,
  })
  t.throws(() => new ChatCompletionsStream({ model: 'm', preamble: 'x' as 'content' }), { instanceOf: TypeError, message: /preamble/ })
  t.throws(() => new ChatCompletionsStream({ model: 'm', includeUsage: 'yes' as never }), {
    instanceOf: TypeError,
    message: /includeUsage/,
  })
  t.throws(() => new ChatCompletionsStream({ model: 'm', promptTokens: -1 }), { instanceOf: TypeError, message: /promptTokens/ })
  t.throws(() => new ChatCompletionsStream({ model: 'm', includeUsge: true } as never), {
    instanceOf: TypeError,
    message: /unknown option 'includeUsge'/,
  })
  t.throws(() => new ChatCompletionsStream({ model: 'm', parser: { strict: 'no' as never } }), {
    instanceOf: TypeError,
    message: /ChatCompletionsStream: option 'parser': option 'strict' must be a boolean/,
  })
  t.throws(() => new ResponsesStream({ model: 'm', builtinTools: 'all' as 'surface' }), { instanceOf: TypeError, message: /builtinTools/ })
  t.throws(() => new ResponsesStream({ model: 'm', tools: {} as never }), { instanceOf: TypeError, message: /tools/ })
})

test("tools: the request's tools array (Chat or Responses shape) and bare names become the parser's toolNames", (t) => {
  // The model glued the content type to the recipient; lenient mode splits it only for a known tool name.
  const glued = harmony('<|channel|>commentary to=functions.get_weatherjson<|message|>{}<|call|>')
  const name = (chunks: ReturnType<ChatCompletionsStream['finish']>) =>
    chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []).find((c) => c.function.name)?.function.name
  const run = (options: Partial<ConstructorParameters<typeof ChatCompletionsStream>[0]>) => {
    const chat = new ChatCompletionsStream({ model: 'm', ...options })
    return name([...chat.push(glued), ...chat.finish()])
  }
  t.is(run({}), 'get_weatherjson', 'unknown: the name stays glued')
  t.is(run({ tools: [{ type: 'function', function: { name: 'get_weather' } }] }), 'get_weather')
  t.is(run({ tools: [{ type: 'function', name: 'get_weather' }] }), 'get_weather')
  t.is(run({ parser: { toolNames: ['get_weather'] } }), 'get_weather')
  t.is(run({ parser: { toolNames: ['functions.get_weather'] } }), 'get_weather')
})

test('close(): releases the parser, builds nothing; push after it throws', (t) => {
  for (const Adapter of [ChatCompletionsStream, ResponsesStream]) {
    const adapter = new Adapter({ model: 'm' })
    adapter.push(COMPLETION.slice(0, 5))
    adapter.close()
    t.deepEqual(adapter.finish(), [])
    t.throws(() => adapter.push([1]), { code: 'adapter-finished' } as never)
  }
})

test('messages the adapters do not send leave a dropped-message diagnostic; to=assistant is routed by channel', (t) => {
  const tokens = harmony(
    '<|channel|>commentary to=browser.search<|message|>{"q":"x"}<|call|>' +
      '<|start|>functions.lookup to=assistant<|channel|>commentary<|message|>hallucinated result<|end|>' +
      '<|start|>assistant<|channel|>commentary to=assistant<|message|>Note to self.<|end|>',
  )
  for (const Adapter of [ChatCompletionsStream, ResponsesStream]) {
    const adapter = new Adapter({ model: 'm' })
    adapter.push(tokens)
    adapter.finish()
    const dropped = adapter.diagnostics.filter((d) => d.code === 'dropped-message')
    t.deepEqual(
      dropped.map((d) => d.text),
      ['{"q":"x"}', 'hallucinated result'],
      Adapter.name,
    )
  }
  const chat = new ChatCompletionsStream({ model: 'm' })
  const content = [...chat.push(tokens), ...chat.finish()].map((c) => c.choices[0]?.delta.content ?? '').join('')
  t.is(content, 'Note to self.', 'a message to the assistant or the user is not a tool call: routed by its channel')
})

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: a call to a tool of an offered namespace is a function call (Responses: with its namespace); one of a namespace not offered is dropped`, (t) => {
    const completion = harmony('<|channel|>commentary to=multi_agent.spawn_agent <|constrain|>json<|message|>{"task":"x"}<|call|>')
    const parser = { implementation, toolNames: ['functions.get_weather', 'multi_agent.spawn_agent'] }
    const object = responseObject({ tokens: completion, finishReason: 'stop' }, { model: 'm', parser })
    t.like(object.output[0], { type: 'function_call', name: 'spawn_agent', namespace: 'multi_agent', arguments: '{"task":"x"}' })
    const chat = chatCompletion({ tokens: completion, finishReason: 'stop' }, { model: 'm', parser })
    t.is(chat.choices[0]!.message.tool_calls?.[0]?.function.name, 'multi_agent.spawn_agent')
    t.is(chat.choices[0]!.finish_reason, 'tool_calls')
    // Not offered: the message is dropped, and a diagnostic says so.
    const unoffered = responseObject({ tokens: completion, finishReason: 'stop' }, { model: 'm', parser: { implementation } })
    t.deepEqual(unoffered.output, [])
    t.true(unoffered.diagnostics.some((d) => d.code === 'dropped-message'))
    // A function named like a namespace's tool is still the functions namespace's.
    const plain = responseObject(
      { tokens: harmony('<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}<|call|>'), finishReason: 'stop' },
      { model: 'm', parser },
    )
    t.false('namespace' in (plain.output[0] as object))
  })
}
