/**
 * Differential tests against the reference parser (PyPI openai-harmony 0.0.8, the official build).
 *
 * - Generated well-formed streams (helpers/generator.mts): messages equal the reference's, on both
 *   implementations, strict and lenient, at random batch splits.
 * - The same streams with one random token inserted, deleted, duplicated or replaced: in strict mode we
 *   throw exactly where the reference errors, with its message text, and agree on the messages otherwise.
 * - Every place where we differ on purpose (docs/SEMANTICS.md "Differences from the reference, on purpose") has a test here
 *   that shows the reference's behaviour next to ours.
 *
 * HARMONY_DIFF_STREAMS sets the number of generated streams (default 400; `npm run test:differential`
 * runs 10,000).
 */
import test from 'ava'

import { type HarmonyMessage, HarmonyParseError, HarmonyStreamParser, type Implementation, parseCompletion } from 'harmony-stream'

import { generator } from '../helpers/generator.mjs'
import { harmony, IMPLEMENTATIONS, random, randomBatches, SPECIAL } from '../helpers/harmony.mjs'
import { type ReferenceMessage, reference } from '../helpers/reference.mjs'

const STREAMS = Number(process.env.HARMONY_DIFF_STREAMS ?? 400)
const UNBOUNDED = 0xffff_ffff // the reference has no header bound; strict comparisons use none either
const CONSTRAIN = '<|constrain|>'

/**
 * The reference's message in our terms, applying the documented differences: content types without the
 * `<|constrain|>` prefix, and a lone `<|constrain|>json` after the channel as a content type, not a recipient.
 */
function asOurs(message: ReferenceMessage): ReferenceMessage {
  let { recipient, contentType } = message
  if (contentType?.startsWith(CONSTRAIN)) contentType = contentType.slice(CONSTRAIN.length) || undefined
  if (contentType === undefined && recipient?.startsWith(CONSTRAIN)) {
    contentType = recipient.slice(CONSTRAIN.length) || undefined
    recipient = undefined
  }
  // Our key order, absent fields left out, so that outcomes compare as JSON.
  const { role, name, channel, content } = message
  return JSON.parse(JSON.stringify({ role, name, channel, recipient, contentType, content })) as ReferenceMessage
}

function withoutTerminator({ terminator: _terminator, ...message }: HarmonyMessage): ReferenceMessage {
  return message
}

type Outcome = { messages: ReferenceMessage[] } | { error: string }

/** Our result for a whole stream pushed in random batches. */
function ours(tokens: number[], role: 'assistant' | null, strict: boolean, implementation: Implementation, next: () => number): Outcome {
  const parser = new HarmonyStreamParser({ implementation, role, strict, maxHeaderTokens: UNBOUNDED })
  try {
    for (const chunk of randomBatches(tokens, next, 1 + Math.floor(next() * 32))) parser.push(chunk)
    parser.finish()
    return { messages: parser.messages.map(withoutTerminator) }
  } catch (error) {
    if (error instanceof HarmonyParseError) return { error: error.message }
    throw error
  }
}

function theirs(result: { messages?: ReferenceMessage[]; error?: string }): Outcome {
  return result.error !== undefined ? { error: result.error } : { messages: result.messages!.map(asOurs) }
}

const streams = Array.from({ length: STREAMS }, generator(20261121))

test('generated streams: messages equal the reference, strict and lenient, at random splits', (t) => {
  const expected = reference(streams.map((s) => ({ tokens: s.tokens, role: s.role, strict: true })))
  const next = random(1)
  const mismatches: string[] = []
  let tokens = 0
  streams.forEach((stream, i) => {
    t.true('messages' in expected[i] && expected[i].messages!.length > 0, `the reference parses stream ${i}`)
    tokens += stream.tokens.length
    for (const implementation of IMPLEMENTATIONS) {
      for (const strict of [true, false]) {
        const got = ours(stream.tokens, stream.role, strict, implementation, next)
        const want = theirs(expected[i])
        if (JSON.stringify(got) !== JSON.stringify(want)) {
          mismatches.push(
            `stream ${i} (${implementation}, strict ${strict}): ${JSON.stringify(stream.text).slice(0, 300)}\n ours ${JSON.stringify(got).slice(0, 300)}\n ref  ${JSON.stringify(want).slice(0, 300)}`,
          )
        }
      }
    }
  })
  t.log(`${streams.length} streams (${tokens} tokens) compared with the reference, 4 ways each; ${mismatches.length} mismatches`)
  t.deepEqual(mismatches.slice(0, 5), [])
})

/** One random edit with a special token or an ordinary one: the kinds of damage models do. */
function mutate(tokens: number[], next: () => number): number[] {
  const specials = [
    SPECIAL['<|start|>'],
    SPECIAL['<|end|>'],
    SPECIAL['<|message|>'],
    SPECIAL['<|channel|>'],
    SPECIAL['<|return|>'],
    SPECIAL['<|call|>'],
    199999,
    200018,
  ]
  const at = Math.floor(next() * tokens.length)
  const token = next() < 0.7 ? specials[Math.floor(next() * specials.length)] : tokens[Math.floor(next() * tokens.length)]
  const out = [...tokens]
  const kind = Math.floor(next() * 4)
  if (kind === 0) out.splice(at, 0, token)
  else if (kind === 1) out.splice(at, 1)
  else if (kind === 2) out.splice(at, 0, tokens[at])
  else out[at] = token
  return out
}

test('strict mode errors exactly where the reference does, with its text', (t) => {
  const next = random(2)
  const mutated = streams.map((s) => ({ ...s, tokens: mutate(s.tokens, next) }))
  const expected = reference(mutated.map((s) => ({ tokens: s.tokens, role: s.role, strict: true })))
  const mismatches: string[] = []
  let errors = 0
  mutated.forEach((stream, i) => {
    const want = theirs(expected[i])
    if ('error' in want) errors++
    for (const implementation of IMPLEMENTATIONS) {
      const got = ours(stream.tokens, stream.role, true, implementation, next)
      if (JSON.stringify(got) !== JSON.stringify(want)) {
        mismatches.push(
          `stream ${i} (${implementation}): ${JSON.stringify(stream.tokens)}\n ours ${JSON.stringify(got).slice(0, 300)}\n ref  ${JSON.stringify(want).slice(0, 300)}`,
        )
      }
    }
  })
  t.log(`${mutated.length} damaged streams, ${errors} of them errors in the reference; ${mismatches.length} mismatches`)
  t.true(errors > mutated.length / 10, 'the damage produces plenty of errors')
  t.deepEqual(mismatches.slice(0, 5), [])
})

// The documented differences, each shown next to the reference.

const TOOL_CALL = '<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>'

test('difference: content types lose the <|constrain|> prefix', (t) => {
  const [ref] = reference([{ tokens: harmony(TOOL_CALL), role: 'assistant', strict: true }])
  t.is(ref.messages?.[0].contentType, '<|constrain|>json')
  t.is(parseCompletion(harmony(TOOL_CALL))[0].contentType, 'json')
})

test('difference: a lone <|constrain|>json after the channel is a content type, not a recipient', (t) => {
  const tokens = harmony('<|channel|>final <|constrain|>json<|message|>{"a":1}<|return|>')
  const [ref] = reference([{ tokens, role: 'assistant', strict: true }])
  t.like(ref.messages?.[0], { recipient: '<|constrain|>json', channel: 'final' })
  const [message] = parseCompletion(tokens, { strict: true })
  t.deepEqual([message.recipient, message.contentType], [undefined, 'json'])
})

test('difference: lenient mode accepts <|constrain|> followed by a space; strict errors like the reference', (t) => {
  const tokens = harmony('<|start|>assistant to=functions.f<|channel|>commentary <|constrain|> json<|message|>{}<|call|>')
  const [ref] = reference([{ tokens, role: null, strict: true }])
  t.is(ref.error, 'unexpected tokens remaining in message header: Some("to=functions.f")')
  t.like(parseCompletion(tokens, { role: null })[0], { recipient: 'functions.f', contentType: 'json' })
  t.throws(() => parseCompletion(tokens, { role: null, strict: true }), { message: ref.error })
})

test('difference: a later header closed by a stop token is kept (the reference drops it silently)', (t) => {
  const tokens = harmony('<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final The answer.<|return|>')
  const [ref] = reference([{ tokens, role: 'assistant', strict: false }])
  t.deepEqual(
    ref.messages?.map((m) => m.content),
    ['Think.'],
  )
  t.deepEqual(
    parseCompletion(tokens).map((m) => m.content),
    ['Think.', 'The answer.'],
  )
})

test('difference: recovered header text keeps its whitespace', (t) => {
  const tokens = harmony('<|channel|>commentary Hello\n\nworld<|end|>')
  const [ref] = reference([{ tokens, role: 'assistant', strict: false }])
  t.is(ref.messages?.[0].content, 'Hello world')
  t.is(parseCompletion(tokens)[0].content, 'Hello\n\nworld')
})

test('difference: non-strict errors of the reference are lenient diagnostics here', (t) => {
  const cases = [
    '<|channel|>final<|message|>Answer<|end|><|return|>',
    '<|channel|>commentary to=functions.x to=functions.x<|message|>{}<|call|>',
    '<|channel|>analysis<|message|>a<|end|><|start|><|start|>assistant<|channel|>final<|message|>b<|return|>',
    '<|channel|>analysis<|message|>a<|end|><|start|>final<|message|>b<|return|>',
  ]
  const results = reference(cases.map((text) => ({ tokens: harmony(text), role: 'assistant', strict: false })))
  for (const [i, text] of cases.entries()) {
    t.truthy(results[i].error, `the reference fails on ${text}`)
    const parser = new HarmonyStreamParser()
    const diagnostics = [...parser.push(harmony(text)).diagnostics, ...parser.finish().diagnostics]
    t.true(diagnostics.length > 0, `a diagnostic for ${text}`)
    t.true(parser.messages.length >= 1)
  }
})

test('difference: a channel leaked into the recipient is repaired', (t) => {
  const tokens = harmony('<|channel|>commentary to=functions.bash<|channel|>commentary<|message|>{}<|call|>')
  const [ref] = reference([{ tokens, role: 'assistant', strict: false }])
  t.is(ref.messages?.[0].recipient, 'functions.bash<|channel|>commentary')
  t.is(parseCompletion(tokens)[0].recipient, 'functions.bash')
})

test('difference: <|start|> inside content ends the message in lenient mode', (t) => {
  const tokens = harmony('<|channel|>analysis<|message|>Let me think<|start|>assistant<|channel|>final<|message|>42<|return|>')
  const [ref] = reference([{ tokens, role: 'assistant', strict: false }])
  t.deepEqual(
    ref.messages?.map((m) => m.content),
    ['Let me think<|start|>assistant<|channel|>final<|message|>42'],
  )
  t.deepEqual(
    parseCompletion(tokens).map((m) => m.content),
    ['Let me think', '42'],
  )
  t.deepEqual(
    parseCompletion(tokens, { strict: true }).map((m) => m.content),
    ref.messages?.map((m) => m.content),
    'strict mode keeps the text',
  )
})

test('difference: segments add up to the content around invalid UTF-8, where the reference deltas fall short', (t) => {
  // docs/SEMANTICS.md "The reference's UTF-8 replacement behaviour": " \uFFFD \uFFFDworked", where "worked" never reaches a delta.
  const tokens = [SPECIAL['<|message|>'], 9552, 9552, ...harmony('worked'), SPECIAL['<|end|>']]
  const [ref] = reference([{ tokens, role: 'assistant', strict: true, stream: true }])
  t.is(ref.messages?.[0].content, ' \uFFFD \uFFFDworked')
  t.not(ref.deltas?.join(''), ref.messages?.[0].content)
  for (const implementation of IMPLEMENTATIONS) {
    const parser = new HarmonyStreamParser({ implementation })
    const text = tokens
      .map((token) =>
        parser
          .push([token])
          .segments.map((s) => s.text)
          .join(''),
      )
      .join('')
    t.is(text, ref.messages?.[0].content ?? '')
  }
})

test('difference: an id outside the vocabulary is a RangeError, where the reference swallows the message', (t) => {
  const tokens = [...harmony('<|channel|>final<|message|>Hello'), 300_000, ...harmony(' world<|return|>')]
  const [ref] = reference([{ tokens, role: 'assistant', strict: true }])
  t.is(ref.messages?.[0].content, 'Hello\uFFFD')
  t.throws(() => parseCompletion(tokens), { instanceOf: RangeError })
})

test('difference: headers are bounded by maxHeaderTokens', (t) => {
  const tokens = harmony(`<|channel|>final${' word'.repeat(300)}<|message|>x<|return|>`)
  const [ref] = reference([{ tokens, role: 'assistant', strict: true }])
  t.regex(ref.error ?? '', /^unexpected tokens remaining in message header/)
  const error = t.throws(() => parseCompletion(tokens, { strict: true }), { instanceOf: HarmonyParseError })
  t.is(error?.code, 'header-too-long')
})

test('same as the reference: 200018 is <|reserved_200018|> and 201088 exists', (t) => {
  const tokens = [...harmony('<|channel|>final<|message|>'), 200018, 201088, SPECIAL['<|return|>']]
  const [ref] = reference([{ tokens, role: 'assistant', strict: true }])
  t.is(ref.messages?.[0].content, '<|reserved_200018|><|reserved_201088|>')
  t.is(parseCompletion(tokens)[0].content, ref.messages?.[0].content ?? '')
})
