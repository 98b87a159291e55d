/**
 * The contract suite: every test runs once per implementation (native and js) with the same inputs and
 * the same expectations.
 */
import test, { type ExecutionContext } from 'ava'

import {
  type HarmonyMessage,
  HarmonyParseError,
  HarmonyStateError,
  HarmonyStreamParser,
  type Implementation,
  parseCompletion,
} from 'harmony-stream'

import { batches, harmony, IMPLEMENTATIONS, replay, SPECIAL } from '../helpers/harmony.mjs'
import { byteTokens } from '../helpers/token-bytes.mjs'

const contract = test.macro({
  exec(t: ExecutionContext, implementation: Implementation, body: (t: ExecutionContext, implementation: Implementation) => void) {
    body(t, implementation)
  },
  title: (title = '', implementation) => `${implementation}: ${title}`,
})

function contractTest(title: string, body: (t: ExecutionContext, implementation: Implementation) => void): void {
  for (const implementation of IMPLEMENTATIONS) test(title, contract, implementation, body)
}

const ANALYSIS_TO_TOOL =
  '<|channel|>analysis<|message|>The user wants the weather in Paris. I should call the get_weather tool with the city name.<|end|>' +
  '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris","unit":"celsius"}<|call|>'
const ANALYSIS_TO_FINAL =
  '<|channel|>analysis<|message|>Simple arithmetic: two plus two is four. Provide the answer.<|end|>' +
  '<|start|>assistant<|channel|>final<|message|>2 + 2 = 4. Anything else you would like to know?<|return|>'

function message(fields: Partial<HarmonyMessage> & Pick<HarmonyMessage, 'content' | 'terminator'>): HarmonyMessage {
  return { role: 'assistant', ...fields }
}

contractTest('a batch of 20 tokens crossing analysis → tool call never mixes channels', (t, implementation) => {
  for (const [text, expected] of [
    [
      ANALYSIS_TO_TOOL,
      [
        message({
          channel: 'analysis',
          content: 'The user wants the weather in Paris. I should call the get_weather tool with the city name.',
          terminator: 'end',
        }),
        message({
          channel: 'commentary',
          recipient: 'functions.get_weather',
          contentType: 'json',
          content: '{"city":"Paris","unit":"celsius"}',
          terminator: 'call',
        }),
      ],
    ],
    [
      ANALYSIS_TO_FINAL,
      [
        message({ channel: 'analysis', content: 'Simple arithmetic: two plus two is four. Provide the answer.', terminator: 'end' }),
        message({ channel: 'final', content: '2 + 2 = 4. Anything else you would like to know?', terminator: 'return' }),
      ],
    ],
  ] as const) {
    // Stream interval 20, aligned so that one step holds the end of message 0 and the start of message 1.
    const tokens = harmony(text)
    const lead = (tokens.indexOf(SPECIAL['<|end|>']) - 3) % 20
    const result = replay([tokens.slice(0, lead), ...batches(tokens.slice(lead), 20)], { implementation })
    t.deepEqual(result.messages, expected)
    const crossing = result.batches.filter((b) => new Set(b.segments.map((s) => s.messageIndex)).size > 1)
    t.true(crossing.length > 0, 'some batch crosses the message boundary')
    for (const batch of result.batches) {
      for (const segment of batch.segments) {
        const owner = expected[segment.messageIndex]
        t.is(segment.channel, owner.channel ?? null)
        t.is(segment.recipient, owner.recipient ?? null)
        t.true(owner.content.includes(segment.text), `segment text belongs to message ${segment.messageIndex}`)
      }
    }
    t.deepEqual(
      result.textByMessage,
      expected.map((m) => m.content),
    )
  }
})

contractTest('a message completes in the batch in which its stop token arrives', (t, implementation) => {
  const tokens = harmony(ANALYSIS_TO_FINAL)
  const end = tokens.indexOf(SPECIAL['<|end|>'])
  const parser = new HarmonyStreamParser({ implementation })
  t.deepEqual(parser.push(tokens.slice(0, end)).completed, [])
  t.is(parser.state, 'content')
  const batch = parser.push(tokens.slice(end, end + 3))
  t.deepEqual(
    batch.completed.map((m) => m.channel),
    ['analysis'],
  )
  t.is(parser.state, 'header')
  t.deepEqual(
    parser.push(tokens.slice(end + 3)).completed.map((m) => m.channel),
    ['final'],
  )
  t.is(parser.state, 'expect-start')
  t.is(parser.messages.length, 2)
})

contractTest('a preamble then a tool call', (t, implementation) => {
  const text =
    '<|channel|>analysis<|message|>Need to check the weather.<|end|>' +
    '<|start|>assistant<|channel|>commentary<|message|>Let me look that up for you.<|end|>' +
    '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Tokyo"}<|call|>'
  t.deepEqual(parseCompletion(harmony(text), { implementation }), [
    message({ channel: 'analysis', content: 'Need to check the weather.', terminator: 'end' }),
    message({ channel: 'commentary', content: 'Let me look that up for you.', terminator: 'end' }),
    message({
      channel: 'commentary',
      recipient: 'functions.get_weather',
      contentType: 'json',
      content: '{"city":"Tokyo"}',
      terminator: 'call',
    }),
  ])
})

contractTest('content types are normalized: <|constrain|>json, " json", "<|constrain|> json"', (t, implementation) => {
  for (const type of [' <|constrain|>json', '<|constrain|>json', ' json', ' <|constrain|> json']) {
    const [call] = parseCompletion(harmony(`<|channel|>commentary to=functions.f${type}<|message|>{}<|call|>`), { implementation })
    t.is(call.contentType, 'json', type)
    t.is(call.recipient, 'functions.f', type)
  }
  const [code] = parseCompletion(harmony('<|channel|>analysis to=functions.ffgrep code<|message|>{"path":""}<|call|>'), { implementation })
  t.is(code.contentType, 'code')
  const [constrained] = parseCompletion(harmony('<|channel|>final <|constrain|>json<|message|>{"ok":true}<|return|>'), { implementation })
  t.deepEqual(constrained, message({ channel: 'final', contentType: 'json', content: '{"ok":true}', terminator: 'return' }))
})

contractTest('recipient-first headers, as the reference renderer writes them', (t, implementation) => {
  const text = '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"location":"Tokyo"}<|call|>'
  t.deepEqual(parseCompletion(harmony(text), { implementation, role: null }), [
    message({
      channel: 'commentary',
      recipient: 'functions.get_weather',
      contentType: 'json',
      content: '{"location":"Tokyo"}',
      terminator: 'call',
    }),
  ])
})

contractTest('tool result messages have role tool and the tool as name', (t, implementation) => {
  const text =
    '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Oslo"}<|call|>' +
    '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"temperature":-3}<|end|>' +
    '<|start|>browser.search to=assistant<|channel|>commentary<|message|>{"result": "https://openai.com/"}'
  const messages = parseCompletion(harmony(text), { implementation, role: null })
  t.deepEqual(messages[1], {
    role: 'tool',
    name: 'functions.get_weather',
    channel: 'commentary',
    recipient: 'assistant',
    content: '{"temperature":-3}',
    terminator: 'end',
  })
  t.deepEqual(messages[2], {
    role: 'tool',
    name: 'browser.search',
    channel: 'commentary',
    recipient: 'assistant',
    content: '{"result": "https://openai.com/"}',
    terminator: null,
  })
})

contractTest('several messages in one batch, counted by messageIndex', (t, implementation) => {
  const text = `${ANALYSIS_TO_TOOL}<|start|>assistant<|channel|>final<|message|>Done.<|return|>`
  const parser = new HarmonyStreamParser({ implementation })
  const batch = parser.push(harmony(text))
  t.deepEqual(
    batch.segments.map((s) => [s.messageIndex, s.channel]),
    [
      [0, 'analysis'],
      [1, 'commentary'],
      [2, 'final'],
    ],
  )
  t.deepEqual(
    batch.completed.map((m) => m.terminator),
    ['end', 'call', 'return'],
  )
  t.deepEqual(parser.finish(), { opened: [], segments: [], completed: [], diagnostics: [] })
})

contractTest('headers are reported in the batch where they complete, once, before any content', (t, implementation) => {
  const tokens = harmony(ANALYSIS_TO_TOOL)
  const call = tokens.indexOf(200008, tokens.indexOf(200006)) // the tool call's <|message|>
  const parser = new HarmonyStreamParser({ implementation })
  const first = parser.push(tokens.slice(0, call))
  t.deepEqual(first.opened, [{ role: 'assistant', channel: 'analysis', messageIndex: 0 }], 'the analysis header (role from the prompt)')
  const second = parser.push(tokens.slice(call, call + 1))
  t.deepEqual(second.opened, [
    { role: 'assistant', channel: 'commentary', recipient: 'functions.get_weather', contentType: 'json', messageIndex: 1 },
  ])
  t.deepEqual(second.segments, [], 'announced before any argument token')
  t.deepEqual(parser.push(tokens.slice(call + 1)).opened, [])
  // A header the model mangled is reported as it was recovered.
  const recovered = new HarmonyStreamParser({ implementation }).push(
    harmony('<|channel|>final<|message|>x<|end|><|start|>final<|message|>y<|end|>'),
  )
  t.is(recovered.opened.length, 2)
  t.is(recovered.opened[1].messageIndex, 1)
})

contractTest('emoji and CJK split across tokens and across batches', (t, implementation) => {
  // 💖 is two tokens (31446, 244); 𝄞鬱 are five byte-level tokens; 👩‍👩‍👧 and 🇯🇵 are multi-codepoint.
  const content = '💖 𝄞鬱 👩‍👩‍👧 🇯🇵 漢字かな交じり文 한국어'
  const tokens = harmony(`<|channel|>final<|message|>${content}<|return|>`)
  t.true(tokens.includes(31446) && tokens.includes(244))
  for (let cut = 1; cut < tokens.length; cut++) {
    const result = replay([tokens.slice(0, cut), tokens.slice(cut)], { implementation })
    t.is(result.messages[0]?.content, content, `cut at ${cut}`)
    t.is(result.textByMessage[0], content, `cut at ${cut}`)
  }
  const parser = new HarmonyStreamParser({ implementation })
  parser.push(harmony('<|channel|>final<|message|>'))
  t.deepEqual(parser.push([31446]).segments, [], 'half an emoji is held back')
  t.is(parser.push([244]).segments[0].text, '💖')
})

contractTest('batch sizes 1..64 give identical messages and per-message text', (t, implementation) => {
  const text =
    ANALYSIS_TO_TOOL +
    '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>{"temp":"21°C","sky":"☀️"}<|end|>' +
    '<|start|>assistant<|channel|>final<|message|>Il fait 21 °C à Paris ☀️ — 晴れです。<|return|>'
  const tokens = harmony(text)
  const reference = replay([tokens], { implementation, role: 'assistant' })
  t.is(reference.messages.length, 4)
  for (let size = 1; size <= 64; size++) {
    const result = replay(batches(tokens, size), { implementation })
    t.deepEqual(result.messages, reference.messages, `batch ${size}`)
    t.deepEqual(result.textByMessage, reference.textByMessage, `batch ${size}`)
  }
})

contractTest('number[] and Uint32Array give the same results', (t, implementation) => {
  const tokens = harmony(ANALYSIS_TO_TOOL)
  t.deepEqual(
    replay(batches(tokens, 7), { implementation }),
    replay(
      batches(tokens, 7).map((b) => Uint32Array.from(b) as unknown as number[]),
      { implementation },
    ),
  )
})

contractTest('finish() mid-message flushes it without a terminator', (t, implementation) => {
  const parser = new HarmonyStreamParser({ implementation })
  parser.push(harmony('<|channel|>final<|message|>The answer is'))
  parser.push([9552]) // " " + the first half of a 4-byte character
  const batch = parser.finish()
  t.deepEqual(batch.completed, [message({ channel: 'final', content: 'The answer is \uFFFD', terminator: null })])
  t.deepEqual(
    batch.segments.map((s) => s.text),
    ['\uFFFD'],
    'the space came with its token; the dangling bytes at the end',
  )
  t.true(parser.finished)
  t.deepEqual(parser.finish(), { opened: [], segments: [], completed: [], diagnostics: [] }, 'finish() twice is harmless')
  const error = t.throws(() => parser.push([1]), { instanceOf: HarmonyStateError })
  t.is(error?.code, 'parser-finished')
})

contractTest('invalid UTF-8 becomes U+FFFD exactly as the reference final content', (t, implementation) => {
  // docs/SEMANTICS.md "The reference's UTF-8 replacement behaviour": [9552, 9552] + "worked" + <|end|> → " \uFFFD \uFFFDworked"
  const tokens = [SPECIAL['<|message|>'], 9552, 9552, ...harmony('worked'), SPECIAL['<|end|>']]
  for (const size of [1, 2, 3, tokens.length]) {
    const result = replay(batches(tokens, size), { implementation })
    t.is(result.messages[0].content, ' \uFFFD \uFFFDworked')
    t.is(result.textByMessage[0], ' \uFFFD \uFFFDworked', 'segments add up to the content')
  }
})

contractTest('special tokens inside content are literal text, as in the reference', (t, implementation) => {
  const tokens = [...harmony('<|channel|>final<|message|>a'), SPECIAL['<|constrain|>'], 199999, 200018, ...harmony('b<|end|>')]
  t.is(parseCompletion(tokens, { implementation })[0].content, 'a<|constrain|><|endoftext|><|reserved_200018|>b')
  // Strict mode keeps even <|start|> as text; lenient mode takes it as the start of the next message.
  const start = [...harmony('<|channel|>final<|message|>a'), SPECIAL['<|start|>'], ...harmony('b<|end|>')]
  t.is(parseCompletion(start, { implementation, strict: true })[0].content, 'a<|start|>b')
})

contractTest('role null waits for <|start|> and reads the role from the header', (t, implementation) => {
  const text = '<|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant<|channel|>final<|message|>4<|return|>'
  const parser = new HarmonyStreamParser({ implementation, role: null })
  t.is(parser.state, 'expect-start')
  parser.push(harmony(text))
  t.deepEqual(parser.messages, [
    { role: 'user', content: 'What is 2 + 2?', terminator: 'end' },
    message({ channel: 'final', content: '4', terminator: 'return' }),
  ])
})

contractTest('reference fixture: test_simple_reasoning_response (the last message ends at EOS)', (t, implementation) => {
  const text =
    '<|channel|>analysis<|message|>User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.<|return|>' +
    '<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.'
  t.deepEqual(parseCompletion(harmony(text), { implementation }), [
    message({ channel: 'analysis', content: 'User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.', terminator: 'return' }),
    message({ channel: 'final', content: '2 + 2 = 4.', terminator: null }),
  ])
})

contractTest('reference fixture: test_simple_tool_call with a recipient after the channel', (t, implementation) => {
  const text =
    '<|channel|>analysis<|message|>We need to use lookup_weather tool.<|end|>' +
    '<|start|>assistant<|channel|>analysis to=lookup_weather code<|message|>{"location": "Tokyo"}<|end|>'
  t.deepEqual(
    parseCompletion(harmony(text), { implementation })[1],
    message({
      channel: 'analysis',
      recipient: 'lookup_weather',
      contentType: 'code',
      content: '{"location": "Tokyo"}',
      terminator: 'end',
    }),
  )
})

/** Strict-mode errors: reference texts (docs/SEMANTICS.md "Strict error texts"), codes and offsets. */
const STRICT_ERRORS: [string, string, string, (tokens: number[]) => number][] = [
  [
    '<|channel|>final<|message|>Answer<|end|><|return|>',
    'unexpected-token',
    'Unexpected token 200002 while expecting start token 200006',
    (tk) => tk.length - 1,
  ],
  [
    '<|channel|>commentary to=functions.x to=functions.x<|message|>{}<|call|>',
    'extra-header-words',
    'unexpected tokens remaining in message header: Some("to=functions.x")',
    (tk) => tk.indexOf(SPECIAL['<|message|>']),
  ],
  ['<|channel|><|message|>hi<|end|>', 'empty-channel', 'channel marker present but no channel value found in header', () => 1],
]

contractTest('strict mode throws HarmonyParseError with the reference texts', (t, implementation) => {
  for (const [text, code, messageText, offsetOf] of STRICT_ERRORS) {
    const tokens = harmony(text)
    const error = t.throws(() => parseCompletion(tokens, { implementation, strict: true }), { instanceOf: HarmonyParseError })
    t.is(error?.code, code)
    t.is(error?.message, messageText)
    t.is(error?.tokenOffset, offsetOf(tokens))
  }
  const roleless = [
    ['<|start|><|channel|>final<|message|>x', 'missing-role', 'message header did not contain a role'],
    ['<|start|>final<|message|>x', 'unknown-role', 'Unknown role: final'],
    ['<|start|><|start|>assistant<|message|>x', 'unknown-role', 'Unknown role: <|start|>assistant'],
  ]
  for (const [text, code, messageText] of roleless) {
    const error = t.throws(() => parseCompletion(harmony(text), { implementation, strict: true, role: null }), {
      instanceOf: HarmonyParseError,
    })
    t.deepEqual([error?.code, error?.message], [code, messageText])
  }
  const eos = t.throws(() => parseCompletion(harmony('<|channel|>final'), { implementation, strict: true }), {
    instanceOf: HarmonyParseError,
  })
  t.deepEqual(
    [eos?.code, eos?.message, eos?.header],
    ['unexpected-eos-in-header', 'Unexpected EOS while waiting for message header to complete', '<|channel|>final'],
  )
  const utf8 = t.throws(() => parseCompletion([SPECIAL['<|channel|>'], 9552, SPECIAL['<|message|>']], { implementation, strict: true }), {
    instanceOf: HarmonyParseError,
  })
  t.deepEqual([utf8?.code, utf8?.message], ['invalid-header-utf8', 'could not decode header'])
})

contractTest('strict errors keep the results of the tokens before them', (t, implementation) => {
  const parser = new HarmonyStreamParser({ implementation, strict: true })
  const error = t.throws(() => parser.push(harmony('<|channel|>final<|message|>Answer<|end|><|return|>')), {
    instanceOf: HarmonyParseError,
  })
  t.deepEqual(error?.partial?.completed, [message({ channel: 'final', content: 'Answer', terminator: 'end' })])
  t.is(parser.messages.length, 1)
  t.is(parser.state, 'expect-start', 'the parser stays usable, as the reference does')
  t.deepEqual(parser.push(harmony('<|start|>assistant<|channel|>final<|message|>More<|return|>')).completed[0]?.content, 'More')
})

contractTest('strict mode keeps a stop token inside a header, as the reference does', (t, implementation) => {
  // The reference's strict mode appends the stop token to the header and fails when <|message|> arrives.
  const text = 'I must refuse<|end|><|start|>assistant<|channel|>final<|message|>Sorry<|return|>'
  const error = t.throws(() => parseCompletion(harmony(text), { implementation, strict: true }), { instanceOf: HarmonyParseError })
  t.is(error?.code, 'extra-header-words')
  t.true(error?.message.startsWith('unexpected tokens remaining in message header: Some('))
})

contractTest(
  'lenient: a header closed by a stop token becomes a message, with a diagnostic; closed by <|end|>, headerless text is reasoning',
  (t, implementation) => {
    const text =
      'I must refuse<|end|><|start|>assistant<|channel|>analysis<|message|>We must refuse<|end|><|start|>assistant<|channel|>final<|message|>I’m sorry, but I can’t help with that.<|return|>'
    const parser = new HarmonyStreamParser({ implementation })
    const batch = parser.push(harmony(text))
    t.deepEqual(parser.messages, [
      message({ channel: 'analysis', content: 'I must refuse', terminator: 'end' }),
      message({ channel: 'analysis', content: 'We must refuse', terminator: 'end' }),
      message({ channel: 'final', content: 'I’m sorry, but I can’t help with that.', terminator: 'return' }),
    ])
    t.deepEqual(
      batch.diagnostics.map((d) => [d.code, d.tokenOffset, d.text]),
      [['headerless-reasoning', 3, 'I must refuse']],
    )
    // A channel the model named is kept; text ended by a stop token other than <|end|> stays an answer.
    const commentary = parseCompletion(harmony('<|channel|>commentary Hello<|end|>'), { implementation })
    t.deepEqual(commentary, [message({ channel: 'commentary', content: 'Hello', terminator: 'end' })])
    const answer = new HarmonyStreamParser({ implementation })
    const answered = answer.push(harmony('The answer is 4.<|return|>'))
    t.deepEqual(answer.messages, [message({ content: 'The answer is 4.', terminator: 'return' })])
    t.deepEqual(
      answered.diagnostics.map((d) => d.code),
      ['header-without-message'],
    )
  },
)

contractTest('lenient: stray tokens between messages are diagnostics, not errors', (t, implementation) => {
  const text =
    '<|channel|>final<|message|>Answer<|end|><|return|><|end|>comment ary<|start|>assistant<|channel|>final<|message|>Again<|return|>'
  const parser = new HarmonyStreamParser({ implementation })
  const tokens = harmony(text)
  const result = batches(tokens, 3).map((b) => parser.push(b))
  t.deepEqual(
    parser.messages.map((m) => m.content),
    ['Answer', 'Again'],
  )
  const diagnostics = result.flatMap((b) => b.diagnostics)
  t.deepEqual(
    diagnostics.map((d) => [d.code, d.text]),
    [['stray-tokens', '<|return|><|end|>comment ary']],
  )
  t.is(diagnostics[0].tokenOffset, tokens.indexOf(SPECIAL['<|return|>']))
})

contractTest('lenient: <|channel|> without <|start|> starts an assistant message', (t, implementation) => {
  const text = '<|channel|>analysis<|message|>Think.<|end|><|channel|>final<|message|>Answer.<|return|>'
  const parser = new HarmonyStreamParser({ implementation })
  const batch = parser.push(harmony(text))
  t.deepEqual(
    parser.messages.map((m) => [m.role, m.channel, m.content]),
    [
      ['assistant', 'analysis', 'Think.'],
      ['assistant', 'final', 'Answer.'],
    ],
  )
  t.deepEqual(
    batch.diagnostics.map((d) => d.code),
    ['missing-start'],
  )
})

contractTest('lenient: header problems keep the best parse and report the reference text', (t, implementation) => {
  const parser = new HarmonyStreamParser({ implementation })
  // openai/harmony PR #114: the model wrote words after <|constrain|> in a long conversation.
  const batch = parser.push(harmony('<|channel|>commentary <|constrain|>response to=functions.x json<|message|>{}<|call|>'))
  t.deepEqual(batch.completed, [
    message({ channel: 'commentary', recipient: 'functions.x', contentType: 'json', content: '{}', terminator: 'call' }),
  ])
  t.deepEqual(
    batch.diagnostics.map((d) => [d.code, d.message, d.text]),
    [
      [
        'extra-header-words',
        'unexpected tokens remaining in message header: Some("<|constrain|>response")',
        '<|channel|>commentary <|constrain|>response to=functions.x json',
      ],
    ],
  )
  const unknown = new HarmonyStreamParser({ implementation, role: null })
  unknown.push(harmony('<|start|>bash<|message|>Hi<|end|>'))
  t.deepEqual(unknown.messages, [{ role: 'bash', content: 'Hi', terminator: 'end' }])
})

contractTest('lenient: finish() inside a header keeps its text', (t, implementation) => {
  const parser = new HarmonyStreamParser({ implementation })
  parser.push(harmony('<|channel|>final Partial answer'))
  const batch = parser.finish()
  t.deepEqual(batch.completed, [message({ channel: 'final', content: 'Partial answer', terminator: null })])
  t.deepEqual(
    batch.diagnostics.map((d) => d.code),
    ['unterminated-header'],
  )
  t.deepEqual(
    new HarmonyStreamParser({ implementation }).finish(),
    { opened: [], segments: [], completed: [], diagnostics: [] },
    'an empty completion is not an error',
  )
})

contractTest('a header cut by maxHeaderTokens keeps its whitespace', (t, implementation) => {
  // "Hello", " ", "world": the cut after two tokens must not drop the space.
  const tokens = [...harmony('Hello'), ...harmony(' '), ...harmony('world'), SPECIAL['<|end|>']]
  t.is(tokens.length, 4)
  t.is(parseCompletion(tokens, { implementation, maxHeaderTokens: 2 })[0].content, 'Hello world')
})

contractTest('an endless header is capped by maxHeaderTokens', (t, implementation) => {
  const tokens = harmony('word '.repeat(100))
  const lenient = replay(batches(tokens, 9), { implementation, maxHeaderTokens: 16 })
  t.is(lenient.messages.length, 1)
  t.is(lenient.messages[0].content, `${'word '.repeat(100).trim()} `)
  t.deepEqual(
    lenient.batches.flatMap((b) => b.diagnostics).map((d) => [d.code, d.tokenOffset]),
    [['header-too-long', 16]],
  )
  const error = t.throws(() => parseCompletion(tokens, { implementation, strict: true, maxHeaderTokens: 16 }), {
    instanceOf: HarmonyParseError,
  })
  t.deepEqual([error?.code, error?.tokenOffset], ['header-too-long', 16])
})

contractTest('bad arguments throw TypeError or RangeError and consume nothing', (t, implementation) => {
  const parser = new HarmonyStreamParser({ implementation })
  parser.push(harmony('<|channel|>final<|message|>ok'))
  t.throws(() => parser.push([1, 201089]), { instanceOf: RangeError, message: /201089 at index 1/ })
  t.throws(() => parser.push(Uint32Array.of(5, 300000)), { instanceOf: RangeError, message: /300000 at index 1/ })
  t.throws(() => parser.push([-1]), { instanceOf: RangeError })
  t.throws(() => parser.push([1.5]), { instanceOf: TypeError })
  t.throws(() => parser.push([Number.NaN]), { instanceOf: TypeError })
  t.throws(() => parser.push(['1'] as unknown as number[]), { instanceOf: TypeError })
  t.throws(() => parser.push('hello' as unknown as number[]), { instanceOf: TypeError })
  t.throws(() => parser.push(null as unknown as number[]), { instanceOf: TypeError })
  t.is(parser.finish().completed[0]?.content, 'ok', 'failed calls consumed nothing')
  t.throws(() => new HarmonyStreamParser({ implementation, role: 'robot' as 'user' }), { instanceOf: TypeError })
  t.throws(() => new HarmonyStreamParser({ implementation, strict: 'yes' as unknown as boolean }), { instanceOf: TypeError })
  t.throws(() => new HarmonyStreamParser({ implementation, maxHeaderTokens: 0 }), { instanceOf: RangeError })
  for (const toolNames of [[''], ['f\uD800'], [3], 'functions.f']) {
    t.throws(() => new HarmonyStreamParser({ implementation, toolNames: toolNames as string[] }), { instanceOf: TypeError })
  }
  // Tokens in shared memory are copied before parsing, with the same results.
  const shared = new Uint32Array(new SharedArrayBuffer(4 * 3))
  shared.set(harmony('<|message|>ok<|end|>'))
  t.is(parseCompletion(shared, { implementation })[0]?.content, 'ok')
  t.throws(() => new HarmonyStreamParser({ implementation: 'wasm' as Implementation }), { instanceOf: TypeError })
})

contractTest('messages returns a copy', (t, implementation) => {
  const parser = new HarmonyStreamParser({ implementation })
  parser.push(harmony(ANALYSIS_TO_FINAL))
  parser.messages.pop()
  t.is(parser.messages.length, 2)
  t.is(parser.implementation, implementation)
})

// One token per call is how engines stream: the backends take a token that only adds its own text to the
// open message without a parse (native: without a crossing, counted in Rust at the next one). What comes
// after such tokens must still be exact: offsets, the message, the text across a character split in two.
contractTest('one token at a time: text, offsets and messages stay exact after tokens taken as plain text', (t, implementation) => {
  const head = harmony('<|channel|>final<|message|>')
  const words = harmony(' the cat sat on the mat, the cat sat')
  // "€" is three bytes; split over two ids it must go through the parser's UTF-8 assembly, not the plain path.
  const euro = byteTokens('€')
  const body = [...words, ...words, ...words]
  const parser = new HarmonyStreamParser({ implementation })
  let streamed = ''
  for (const id of [...head, ...body]) for (const segment of parser.push([id]).segments) streamed += segment.text
  t.is(streamed, ' the cat sat on the mat, the cat sat'.repeat(3))
  // <|start|> inside content: lenient mode closes the message, with a diagnostic at that token's offset.
  const closing = parser.push([SPECIAL['<|start|>']])
  t.deepEqual(
    closing.diagnostics.map((d) => [d.code, d.tokenOffset]),
    [['missing-end', head.length + body.length]],
  )
  t.is(closing.completed[0].content, streamed)
  parser.push(harmony('assistant<|channel|>final<|message|>'))
  for (const id of words) parser.push([id])
  t.is(parser.push(euro.slice(0, 1)).segments.length, 0, 'part of a character is held')
  t.is(parser.push([euro[1]]).segments.length, 0)
  t.is(parser.push([euro[2]]).segments[0]?.text, '€')
  for (const id of words) parser.push([id])
  const end = parser.finish()
  t.is(end.completed[0].content, ' the cat sat on the mat, the cat sat€ the cat sat on the mat, the cat sat')
  t.is(end.completed[0].terminator, null)
})

// The native backend keeps back, at one token per call, the tokens that produce nothing yet (a header up
// to its <|message|>, the first piece of a split character) and parses them with the next call. Whatever
// it keeps, one token per call must give what one call with all the tokens gives.
contractTest('one token per call gives what one call gives: messages, diagnostics and their offsets', (t, implementation) => {
  const inputs: [string, number[], Partial<{ maxHeaderTokens: number; strict: boolean }>][] = [
    ['a tool call after reasoning', harmony(`${ANALYSIS_TO_TOOL}<|start|>assistant<|channel|>final<|message|>done<|return|>`), {}],
    [
      'a header too long, twice',
      harmony('<|channel|>final to=a b c d e f g<|message|>x<|end|><|start|>assistant<|channel|>x y z w v u<|message|>y<|end|>'),
      { maxHeaderTokens: 4 },
    ],
    [
      'stray tokens before <|start|>',
      harmony('<|channel|>final<|message|>a<|end|> stray words<|start|>assistant<|channel|>final<|message|>b<|end|>'),
      {},
    ],
    ['a message without <|start|>', harmony('<|channel|>final<|message|>a<|end|><|channel|>analysis<|message|>b<|end|>'), {}],
    [
      'a stop token inside a header',
      harmony('<|channel|>final<|message|>a<|end|><|start|>assistant<|channel|>fin<|end|><|start|>assistant<|channel|>final<|message|>c'),
      {},
    ],
    ['<|start|> twice', harmony('<|channel|>final<|message|>a<|end|><|start|><|start|>assistant<|channel|>final<|message|>b<|end|>'), {}],
    [
      'a split character after a held header',
      [...harmony('<|channel|>final<|message|>'), ...byteTokens('€ and €'), ...harmony('<|end|>')],
      {},
    ],
    [
      'strict: a header without <|message|>',
      harmony('<|channel|>final<|message|>a<|end|><|start|>assistant<|channel|>final'),
      { strict: true },
    ],
  ]
  for (const [what, tokens, options] of inputs) {
    const observe = (batches: readonly number[][]) => {
      const parser = new HarmonyStreamParser({ implementation, ...options })
      const diagnostics: [string, number][] = []
      let text = ''
      let error: string | null = null
      try {
        for (const batch of [...batches, null]) {
          const result = batch === null ? parser.finish() : parser.push(batch)
          for (const d of result.diagnostics) diagnostics.push([d.code, d.tokenOffset])
          for (const s of result.segments) text += s.text
        }
      } catch (cause) {
        error = cause instanceof HarmonyParseError ? `${cause.code} at ${cause.tokenOffset}` : String(cause)
      }
      return { messages: parser.messages, diagnostics, text, error }
    }
    const whole = observe([tokens])
    // Twice one token per call on one thread: the second run meets tokens whose texts the first made known.
    for (const run of ['first', 'second']) t.deepEqual(observe(tokens.map((id) => [id])), whole, `${what} (${run} run)`)
  }
})

contractTest('one token per call: a bad id after tokens kept back names its own index, and nothing is lost', (t, implementation) => {
  const parser = new HarmonyStreamParser({ implementation })
  for (const id of harmony('<|channel|>final<|message|>hi<|end|><|start|>assistant<|channel|>')) parser.push([id])
  t.is(parser.state, 'header')
  const error = t.throws(() => parser.push([1, 300_000]), { instanceOf: RangeError })
  t.regex(error.message, /token id 300000 at index 1/)
  for (const id of harmony('final<|message|>there<|end|>')) parser.push([id])
  parser.finish()
  t.deepEqual(
    parser.messages.map((m) => [m.channel, m.content]),
    [
      ['final', 'hi'],
      ['final', 'there'],
    ],
  )
})
