/**
 * Tool calls written as text (`textToolCalls: 'recover'`): each recovery rule, the cases that must stay text,
 * streaming hold-back that releases text the moment it cannot become a call, and nothing lost, on both
 * implementations, Chat and Responses, streaming and not, at every step size.
 */
import test from 'ava'
import fc from 'fast-check'

import {
  AnthropicMessagesStream,
  ChatCompletionsStream,
  type ChatToolCall,
  chatCompletion,
  type Implementation,
  ResponsesStream,
  responseObject,
} from 'harmony-stream'
import { chatFrames, responsesFrames } from 'harmony-stream/http'

import { batches, harmony, IMPLEMENTATIONS } from '../helpers/harmony.mjs'

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      parameters: { type: 'object', properties: { location: { type: 'string' }, unit: { type: 'string' } }, required: ['location'] },
    },
  },
  {
    type: 'function',
    function: {
      name: 'read_file',
      parameters: { type: 'object', properties: { filePath: { type: 'string' }, maxLines: { type: 'integer' } }, required: ['filePath'] },
    },
  },
]
const final = (text: string) =>
  harmony(`<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>${text}<|return|>`)

interface Outcome {
  content: string
  calls: { name: string; arguments: unknown }[]
  finishReason: string | null
  diagnostics: string[]
}

/** Streams `tokens` through Chat in steps of `size` and assembles what a client sees. */
function streamed(tokens: number[], size: number, implementation: Implementation, options = {}): Outcome {
  const chat = new ChatCompletionsStream({ model: 'm', tools: TOOLS, textToolCalls: 'recover', parser: { implementation }, ...options })
  const chunks = [...batches(tokens, size).flatMap((step) => chat.push(step)), ...chat.finish()]
  const calls: { name: string; arguments: string }[] = []
  for (const chunk of chunks) {
    for (const call of chunk.choices[0]?.delta.tool_calls ?? []) {
      if (call.function.name !== undefined) calls[call.index] = { name: call.function.name, arguments: '' }
      calls[call.index].arguments += call.function.arguments
    }
  }
  return {
    content: chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''),
    calls: calls.map((c) => ({ name: c.name, arguments: JSON.parse(c.arguments) })),
    finishReason: chunks.at(-1)!.choices[0].finish_reason,
    diagnostics: chat.diagnostics.map((d) => d.code),
  }
}

function whole(tokens: number[], implementation: Implementation): Outcome {
  const completion = chatCompletion(tokens, { model: 'm', tools: TOOLS, textToolCalls: 'recover', parser: { implementation } })
  const message = completion.choices[0].message
  return {
    content: message.content ?? '',
    calls: ((message.tool_calls ?? []) as ChatToolCall[]).map((c) => ({
      name: c.function.name,
      arguments: JSON.parse(c.function.arguments),
    })),
    finishReason: completion.choices[0].finish_reason,
    diagnostics: completion.diagnostics.map((d) => d.code),
  }
}

const CASES: [string, string, Outcome['calls'], string][] = [
  [
    'the whole text as JSON',
    '{"name": "get_weather", "arguments": {"location": "Paris"}}',
    [{ name: 'get_weather', arguments: { location: 'Paris' } }],
    '',
  ],
  [
    'whole text with surrounding whitespace, key order free',
    '\n {"arguments": {"location": "Rome"}, "tool": "get_weather"} \n',
    [{ name: 'get_weather', arguments: { location: 'Rome' } }],
    '',
  ],
  [
    'a fenced json block after prose',
    'Let me check.\n```json\n{"name": "get_weather", "arguments": {"location": "Oslo"}}\n```',
    [{ name: 'get_weather', arguments: { location: 'Oslo' } }],
    'Let me check.\n',
  ],
  [
    'an object starting at {"tool" inside prose',
    'Calling {"tool": "read_file", "arguments": {"filePath": "a.txt"}} now',
    [{ name: 'read_file', arguments: { filePath: 'a.txt' } }],
    'Calling  now',
  ],
  [
    'arguments as a JSON string',
    '{"name": "get_weather", "arguments": "{\\"location\\": \\"Lima\\"}"}',
    [{ name: 'get_weather', arguments: { location: 'Lima' } }],
    '',
  ],
  [
    'parameters instead of arguments',
    '{"name": "get_weather", "parameters": {"location": "Kyiv"}}',
    [{ name: 'get_weather', arguments: { location: 'Kyiv' } }],
    '',
  ],
  [
    'a doubly wrapped call',
    '{"tool": "get_weather", "arguments": {"tool": "get_weather", "arguments": {"location": "Cairo"}}}',
    [{ name: 'get_weather', arguments: { location: 'Cairo' } }],
    '',
  ],
  [
    'alias groups map argument names',
    '{"name": "get_weather", "arguments": {"city": "Bern", "unit": "c"}}',
    [{ name: 'get_weather', arguments: { location: 'Bern', unit: 'c' } }],
    '',
  ],
  [
    'spelling maps argument names',
    '{"name": "read_file", "arguments": {"file_path": "x", "max-lines": 3}}',
    [{ name: 'read_file', arguments: { filePath: 'x', maxLines: 3 } }],
    '',
  ],
  [
    'a leading JSON array of calls (vLLM #22337)',
    '[{ "name": "get_weather", "parameters": { "location": "Berlin" } },\n {"name": "read_file", "arguments": {"filePath": "b"}}]',
    [
      { name: 'get_weather', arguments: { location: 'Berlin' } },
      { name: 'read_file', arguments: { filePath: 'b' } },
    ],
    '',
  ],
  [
    'a functions.-qualified name',
    '{"name": "functions.get_weather", "arguments": {"location": "Riga"}}',
    [{ name: 'get_weather', arguments: { location: 'Riga' } }],
    '',
  ],
]

const TEXT_CASES: [string, string][] = [
  ['an undeclared tool', '{"name": "send_email", "arguments": {"to": "x"}}'],
  ['a required property missing', '{"name": "get_weather", "arguments": {"unit": "c"}}'],
  ['JSON that is no call', '{"answer": 42}'],
  ['prose with braces', 'Use {curly} braces and a dict like {"a": 1} here.'],
  ['a python fence', 'Code:\n```python\nprint({"name": "get_weather"})\n```\nDone.'],
  ['an unclosed object', 'Start {"name": "get_weather", "arguments": {"location": "Paris"'],
  ['backticks', 'Inline `code` and ``double`` ticks`'],
  ['the whole-text object followed by prose', '{"arguments": {"location": "Rome"}, "tool": "x"} and more'],
  ['a leading array that is no call', '[{"a": 1}, {"b": 2}]'],
  ['a leading markdown link', '[the docs](https://example.com/{id}) say so'],
]

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: each recovery rule gives a real tool call, streaming at every step size and not`, (t) => {
    for (const [title, text, calls, content] of CASES) {
      const tokens = final(text)
      for (const size of [1, 2, 5, tokens.length]) {
        const got = streamed(tokens, size, implementation)
        t.deepEqual(got.calls, calls, `${title}, step ${size}`)
        t.is(got.content, content, `${title}, step ${size}: the JSON is not also sent as content`)
        t.is(got.finishReason, 'tool_calls', title)
        t.true(got.diagnostics.includes('text-tool-call'), title)
      }
      const nonStreaming = whole(tokens, implementation)
      t.deepEqual(nonStreaming.calls, calls, `${title}, not streaming`)
      t.is(nonStreaming.content, content, `${title}, not streaming`)
      t.is(nonStreaming.finishReason, 'tool_calls')
    }
  })

  test(`${implementation}: text that is not a call of a declared tool stays text, unchanged`, (t) => {
    for (const [title, text] of TEXT_CASES) {
      const tokens = final(text)
      for (const size of [1, 3, tokens.length]) {
        const got = streamed(tokens, size, implementation)
        t.is(got.content, text, `${title}, step ${size}`)
        t.deepEqual(got.calls, [], title)
        t.is(got.finishReason, 'stop', title)
      }
      t.is(whole(tokens, implementation).content, text, `${title}, not streaming`)
    }
  })

  test(`${implementation}: on by default where tools are declared; off when asked, with logprobs, with a structured output, or without tools`, (t) => {
    const text = CASES[0][1]
    const tokens = final(text)
    const answer = (options: object) => {
      const chat = new ChatCompletionsStream({ model: 'm', parser: { implementation }, ...options })
      const chunks = [...chat.push(tokens), ...chat.finish()]
      return {
        content: chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''),
        calls: chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []).length,
      }
    }
    t.deepEqual(answer({ tools: TOOLS }), { content: '', calls: 1 }, 'on by default')
    t.deepEqual(answer({ tools: TOOLS, textToolCalls: 'off' }), { content: text, calls: 0 })
    t.deepEqual(answer({ tools: TOOLS, logprobs: true }), { content: text, calls: 0 }, 'logprobs: each token keeps its text')
    t.deepEqual(answer({ tools: TOOLS, responseFormat: { name: 'x', schema: { type: 'object' } } }), { content: text, calls: 0 })
    t.deepEqual(answer({ tools: [] }), { content: text, calls: 0 })
    t.deepEqual(answer({}), { content: text, calls: 0 })
    t.throws(() => new ChatCompletionsStream({ model: 'm', tools: TOOLS, textToolCalls: 'recover', logprobs: true }), {
      instanceOf: TypeError,
      message: /logprobs.*textToolCalls/,
    })
  })

  test(`${implementation}: a preamble of JSON with no recipient is a call of the one declared tool it fits (TensorRT-LLM #9256)`, (t) => {
    const preamble = (text: string, end = '<|end|>') =>
      harmony(`<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary<|message|>${text}${end}`)
    const cases: [string, string, Outcome['calls'], string][] = [
      ['arguments of get_weather only', '{\n  "location": "Paris"\n}', [{ name: 'get_weather', arguments: { location: 'Paris' } }], ''],
      [
        'arguments of read_file only',
        ' {"filePath": "a.txt", "maxLines": 2}',
        [{ name: 'read_file', arguments: { filePath: 'a.txt', maxLines: 2 } }],
        '',
      ],
      ['a call object', '{"name": "read_file", "arguments": {"filePath": "b"}}', [{ name: 'read_file', arguments: { filePath: 'b' } }], ''],
      ['keys of two tools', '{"location": "x", "filePath": "y"}', [], '{"location": "x", "filePath": "y"}'],
      ['a required key missing', '{"unit": "c"}', [], '{"unit": "c"}'],
      ['no keys', '{}', [], '{}'],
      ['not JSON', '{location: Paris}', [], '{location: Paris}'],
      ['prose', 'Let me look {"location": "Paris"}', [], 'Let me look {"location": "Paris"}'],
    ]
    for (const [title, text, calls, content] of cases) {
      for (const end of ['<|end|>', '']) {
        const tokens = preamble(text, end)
        for (const size of [1, 3, tokens.length]) {
          const got = streamed(tokens, size, implementation, { textToolCalls: undefined })
          t.deepEqual(got.calls, calls, `${title}, step ${size}`)
          t.is(got.content, content, `${title}, step ${size}`)
          t.is(got.diagnostics.includes('text-tool-call'), calls.length > 0, title)
        }
        const object = responseObject(tokens, { model: 'm', tools: TOOLS, parser: { implementation } })
        t.is(object.output.filter((i) => i.type === 'function_call').length, calls.length, `${title}, Responses`)
      }
    }
    // Prose streams as it comes: only a preamble that opens with `{` is held.
    const chat = new ChatCompletionsStream({ model: 'm', tools: TOOLS, parser: { implementation } })
    chat.push(harmony('<|channel|>commentary<|message|>'))
    const content = (text: string) =>
      chat
        .push(harmony(text))
        .map((c) => c.choices[0]?.delta.content ?? '')
        .join('')
    t.is(content('Checking'), 'Checking')
    t.is(content(' {"location"'), ' {"location"', 'prose first: never held')
  })

  test(`${implementation}: streaming releases text the moment it cannot become a call`, (t) => {
    const chat = new ChatCompletionsStream({ model: 'm', tools: TOOLS, textToolCalls: 'recover', parser: { implementation } })
    chat.push(harmony('<|channel|>final<|message|>'))
    const content = (tokens: number[]) =>
      chat
        .push(tokens)
        .map((c) => c.choices[0]?.delta.content ?? '')
        .join('')
    t.is(content(harmony('Hello there')), 'Hello there', 'prose goes out at once')
    t.is(content(harmony(' {')), ' ', 'a brace may open a call: held')
    t.is(content(harmony('"na')), '', 'still a possible {"name"')
    t.is(content(harmony('ughty": 1')), '{"naughty": 1', 'no longer a call: released, unchanged')
    t.is(content(harmony('} ``')), '} ', 'two backticks may open a fence')
    t.is(content(harmony('x')), '``x')
  })

  test(`${implementation}: Responses gives a function_call item and no empty message item`, (t) => {
    for (const [title, text, calls, content] of CASES.slice(0, 4)) {
      for (const size of [1, 1000]) {
        const stream = new ResponsesStream({ model: 'm', tools: TOOLS, textToolCalls: 'recover', parser: { implementation } })
        const events = [...stream.start(), ...batches(final(text), size).flatMap((s) => stream.push(s)), ...stream.finish()]
        const output = stream.response().output
        t.deepEqual(
          output
            .filter((i) => i.type === 'function_call')
            .map((i) => (i.type === 'function_call' ? { name: i.name, arguments: JSON.parse(i.arguments) } : null)),
          calls,
          title,
        )
        const messages = output.filter((i) => i.type === 'message')
        t.is(messages.length, content === '' ? 0 : 1, `${title}: a message item only for released text`)
        t.deepEqual(
          events.map((e) => e.sequence_number),
          events.map((_, i) => i),
        )
      }
      const object = responseObject(final(text), { model: 'm', tools: TOOLS, textToolCalls: 'recover', parser: { implementation } })
      t.is(object.output.filter((i) => i.type === 'function_call').length, 1)
    }
  })
}

test('the SSE faces write, byte for byte, what the object faces give, on every case streamed at every step size', (t) => {
  const texts = [...CASES.map(([, text]) => text), ...TEXT_CASES.map(([, text]) => text)]
  const outputs = [
    ...texts.map(final),
    ...texts.map((text) =>
      harmony(`<|channel|>commentary<|message|>${text}<|end|><|start|>assistant<|channel|>final<|message|>${text}<|return|>`),
    ),
  ]
  for (const implementation of IMPLEMENTATIONS) {
    const options = { model: 'm', tools: TOOLS, parser: { implementation } }
    for (const [n, tokens] of outputs.entries()) {
      for (const size of [1, 2, 5]) {
        const steps = batches(tokens, size).map((step) => Uint32Array.from(step))
        const chat = [
          new ChatCompletionsStream({ ...options, id: 'chatcmpl-x', created: 1 }),
          new ChatCompletionsStream({ ...options, id: 'chatcmpl-x', created: 1 }),
        ] as const
        t.is(
          steps.map((step) => chat[0].pushSse(step)).join('') + chat[0].finishSse(),
          steps.map((step) => chatFrames(chat[1].push(step))).join('') + chatFrames(chat[1].finish()),
          `chat, ${implementation}, output ${n}, step ${size}`,
        )
        const responses = [
          new ResponsesStream({ ...options, id: 'resp_x', createdAt: 1 }),
          new ResponsesStream({ ...options, id: 'resp_x', createdAt: 1 }),
        ] as const
        t.is(
          responses[0].startSse() + steps.map((step) => responses[0].pushSse(step)).join('') + responses[0].finishSse(),
          responsesFrames([...responses[1].start(), ...steps.flatMap((step) => responses[1].push(step)), ...responses[1].finish()]),
          `responses, ${implementation}, output ${n}, step ${size}`,
        )
        const messages = [
          new AnthropicMessagesStream({ ...options, id: 'msg_x' }),
          new AnthropicMessagesStream({ ...options, id: 'msg_x' }),
        ] as const
        t.is(
          steps.map((step) => messages[0].pushSse(step)).join('') + messages[0].finishSse(),
          responsesFrames([...steps.flatMap((step) => messages[1].push(step)), ...messages[1].finish()]),
          `messages, ${implementation}, output ${n}, step ${size}`,
        )
      }
    }
  }
})

test('property: with recovery on, no text is lost or altered (content + recovered sources = the text)', (t) => {
  const piece = fc.constantFrom(
    'Hello ',
    '{',
    '}',
    '"name"',
    '"tool"',
    ': ',
    '"get_weather"',
    ', "arguments": ',
    '{"location": "Paris"}',
    '```',
    '```json\n',
    '\n',
    '`',
    'text',
    ' ',
    '\\"',
    '"',
    '[',
    ']',
    ', ',
  )
  fc.assert(
    fc.property(fc.array(piece, { maxLength: 30 }), fc.integer({ min: 1, max: 8 }), (pieces, size) => {
      const text = pieces.join('')
      const chat = new ChatCompletionsStream({ model: 'm', tools: TOOLS, textToolCalls: 'recover', parser: { implementation: 'js' } })
      const chunks = [...batches(final(text), size).flatMap((s) => chat.push(s)), ...chat.finish()]
      const content = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')
      const sources = chat.diagnostics.filter((d) => d.code === 'text-tool-call').map((d) => d.text!)
      // Rebuild: the recovered sources were cut out of the text in order.
      // The calls of one array share its text: it was cut out once.
      let rest = text
      for (const [i, source] of sources.entries()) {
        const at = rest.indexOf(source)
        if (at < 0 && i > 0 && source === sources[i - 1] && source.startsWith('[')) continue
        t.true(at >= 0)
        rest = rest.slice(0, at) + rest.slice(at + source.length)
      }
      if (sources.length === 0) t.is(content, text)
      else t.is(content.replace(/\s/g, ''), rest.replace(/\s/g, ''))
    }),
    { numRuns: 300 },
  )
})
