/**
 * The SSE faces of the adapters (`pushSse`, `finishSse`, `startSse`) write byte for byte what serializing
 * their object faces gives, on generated completions cut at random, both implementations, every option that
 * changes the wire.
 */
import test from 'ava'

import { AnthropicMessagesStream, ChatCompletionsStream, type Implementation, ResponsesStream } from 'harmony-stream'
import { chatFrames, responsesFrames } from 'harmony-stream/http'

import { generator } from '../helpers/generator.mjs'
import { IMPLEMENTATIONS, random, randomBatches } from '../helpers/harmony.mjs'
import { messagesVariant, responsesVariant, WIRE_VARIANTS } from '../helpers/wire-variants.mjs'

const STREAMS = Array.from({ length: 150 }, generator(31)).filter((s) => s.role === 'assistant')
const VARIANTS = WIRE_VARIANTS

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: Chat pushSse/finishSse equal the serialized chunks of push/finish`, (t) => {
    const next = random(7)
    let compared = 0
    for (const [n, stream] of STREAMS.entries()) {
      const variant = VARIANTS[n % VARIANTS.length]
      const steps = randomBatches(stream.tokens, next, 1 + (n % 9))
      const options = {
        model: 'gpt-oss',
        id: `chatcmpl-${n}`,
        created: 1_700_000_000 + n,
        parser: { implementation: implementation as Implementation },
        ...variant,
      }
      const objects = new ChatCompletionsStream(options)
      const frames = new ChatCompletionsStream(options)
      const truncated = n % 5 === 0
      const expected = steps.map((step) => chatFrames(objects.push(step))).join('') + chatFrames(objects.finish({ truncated }))
      const actual = steps.map((step) => frames.pushSse(step)).join('') + frames.finishSse({ truncated })
      if (actual !== expected)
        return t.fail(`stream ${n}: ${JSON.stringify(actual.slice(0, 300))}\nvs ${JSON.stringify(expected.slice(0, 300))}`)
      compared++
    }
    t.is(compared, STREAMS.length)
  })

  test(`${implementation}: Responses startSse/pushSse/finishSse equal the serialized events of start/push/finish`, (t) => {
    const next = random(8)
    for (const [n, stream] of STREAMS.entries()) {
      const variant = VARIANTS[n % VARIANTS.length]
      const responsesOptions = responsesVariant(variant)
      const steps = randomBatches(stream.tokens, next, 1 + (n % 9))
      const options = {
        model: 'gpt-oss',
        id: `resp_${n}`,
        createdAt: 1_700_000_000,
        parser: { implementation: implementation as Implementation },
        ...responsesOptions,
      }
      const objects = new ResponsesStream(options)
      const frames = new ResponsesStream(options)
      const expected =
        responsesFrames(objects.start()) +
        steps.map((step) => responsesFrames(objects.push(step))).join('') +
        responsesFrames(objects.finish())
      // Every other stream ends in two steps (settle, then conclude), as a gateway keeping a response does.
      const end = n % 2 === 0 ? () => frames.finishSse() : () => frames.settleSse() + frames.concludeSse()
      const actual = frames.startSse() + steps.map((step) => frames.pushSse(step)).join('') + end()
      if (actual !== expected) {
        const at = [...actual].findIndex((c, i) => c !== expected[i])
        return t.fail(
          `stream ${n} differs at ${at}: ${JSON.stringify(actual.slice(at - 100, at + 100))}\nvs ${JSON.stringify(expected.slice(at - 100, at + 100))}`,
        )
      }
    }
    t.pass()
  })
}

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: Messages pushSse/finishSse equal the serialized events of push/finish`, (t) => {
    const next = random(9)
    for (const [n, stream] of STREAMS.entries()) {
      const variant = messagesVariant(VARIANTS[n % VARIANTS.length]!)
      const steps = randomBatches(stream.tokens, next, 1 + (n % 9))
      const options = { model: 'gpt-oss', id: `msg_${n}`, parser: { implementation: implementation as Implementation }, ...variant }
      const objects = new AnthropicMessagesStream(options)
      const frames = new AnthropicMessagesStream(options)
      const truncated = n % 5 === 0
      const expected = steps.map((step) => responsesFrames(objects.push(step))).join('') + responsesFrames(objects.finish({ truncated }))
      const end = n % 2 === 0 ? () => frames.finishSse({ truncated }) : () => frames.settleSse({ truncated }) + frames.concludeSse()
      const actual = steps.map((step) => frames.pushSse(step)).join('') + end()
      if (actual !== expected) {
        const at = [...actual].findIndex((c, i) => c !== expected[i])
        return t.fail(
          `stream ${n} differs at ${at}: ${JSON.stringify(actual.slice(at - 100, at + 100))}\nvs ${JSON.stringify(expected.slice(at - 100, at + 100))}`,
        )
      }
      t.deepEqual(frames.message(), objects.message(), `stream ${n}: the message either way`)
    }
  })
}

test('Messages: the native and js backends give the same bytes and the same message for every stream', (t) => {
  t.plan(1)
  const next = random(10)
  const differ: number[] = []
  for (const [n, stream] of STREAMS.entries()) {
    const variant = messagesVariant(VARIANTS[n % VARIANTS.length]!)
    const steps = randomBatches(stream.tokens, next, 1 + (n % 9))
    const run = (implementation: Implementation) => {
      const adapter = new AnthropicMessagesStream({ model: 'gpt-oss', id: `msg_${n}`, parser: { implementation }, ...variant })
      const bytes = steps.map((step) => adapter.pushSse(step)).join('') + adapter.finishSse()
      return { bytes, message: adapter.message(), diagnostics: adapter.diagnostics }
    }
    const [first, second] = IMPLEMENTATIONS.length === 2 ? [run('native'), run('js')] : [run('js'), run('js')]
    if (JSON.stringify(first) !== JSON.stringify(second)) differ.push(n)
  }
  t.deepEqual(differ, [])
})

test('settle then conclude is finish: the same events, the closing ones last, each given once', (t) => {
  const stream = STREAMS[1]
  const options = { model: 'm', id: 'resp_two', createdAt: 1 }
  const whole = new ResponsesStream(options)
  const split = new ResponsesStream(options)
  const expected = [...whole.push(stream.tokens), ...whole.finish()]
  const settled = [...split.push(stream.tokens), ...split.settle()]
  t.false(settled.some((event) => event.type === 'response.completed' || event.type === 'response.incomplete'))
  // Settled, the response is final: a gateway keeps this.
  t.deepEqual(split.response(), whole.response())
  t.deepEqual([...settled, ...split.conclude()], expected)
  t.deepEqual(split.conclude(), [], 'concluded once')
  t.deepEqual(new ResponsesStream(options).conclude(), [], 'nothing to conclude before the end is settled')
})

test('mixing the faces on one adapter keeps one stream of events', (t) => {
  const stream = STREAMS[0]
  const options = { model: 'm', id: 'chatcmpl-mix', created: 1 }
  const a = new ChatCompletionsStream(options)
  const b = new ChatCompletionsStream(options)
  const half = Math.floor(stream.tokens.length / 2)
  const expected = chatFrames(a.push(stream.tokens.slice(0, half))) + chatFrames(a.push(stream.tokens.slice(half))) + chatFrames(a.finish())
  const actual = chatFrames(b.push(stream.tokens.slice(0, half))) + b.pushSse(stream.tokens.slice(half)) + b.finishSse()
  t.is(actual, expected)
})

test("each adapter says what its API's stream is made of: its events' frames, its last frame, its error frame and answer", (t) => {
  const tokens = STREAMS[0]!.tokens
  const busy = {
    status: 503,
    body: { error: { message: 'the engine is busy', type: 'server_error', param: null, code: 'engine_overloaded' } },
    headers: { 'retry-after': '2' },
  }
  const chat = new ChatCompletionsStream({ model: 'm', id: 'chatcmpl-1', created: 1 })
  const chunks = chat.push(tokens)
  t.is(chat.objectFrames(chunks), chatFrames(chunks))
  t.is(chat.openingSse(), '')
  t.true(chat.endsWithDone)
  t.is(chat.doneSse(), 'data: [DONE]\n\n')
  t.is(chat.failureSse(busy), `data: ${JSON.stringify(busy.body)}\n\n`)
  t.is(chat.errorAnswer(busy), busy)

  const responses = new ResponsesStream({ model: 'm', id: 'resp_1', createdAt: 1, completedAt: 1 })
  const opening = responses.openingEvents()
  t.deepEqual(
    opening.map((event) => event.type),
    ['response.created', 'response.in_progress'],
  )
  const events = responses.push(tokens)
  t.is(responses.objectFrames(events), responsesFrames(events))
  t.is(responses.doneSse(), '')
  t.regex(responses.failureSse(busy), /^event: error\n.*"code":"engine_overloaded".*\n\nevent: response\.failed\n[^\n]*\n\n$/s)
  const openResponses = new ResponsesStream({ model: 'm', dialect: 'open-responses' })
  t.is(openResponses.doneSse(), 'data: [DONE]\n\n')
  t.true(openResponses.failureSse(busy).endsWith('\n\ndata: [DONE]\n\n'))

  const messages = new AnthropicMessagesStream({ model: 'm', id: 'msg_1' })
  t.deepEqual(messages.openingEvents(), [])
  const messageEvents = messages.push(tokens)
  t.is(messages.objectFrames(messageEvents), responsesFrames(messageEvents))
  t.false(messages.endsWithDone)
  t.is(messages.doneSse(), '')
  // Anthropic's shape: a 503 is its 529 overloaded_error, which its clients retry as overload.
  t.is(
    messages.failureSse(busy),
    'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"the engine is busy"}}\n\n',
  )
  t.deepEqual(new AnthropicMessagesStream({ model: 'm' }).errorAnswer(busy), {
    status: 529,
    body: { type: 'error', error: { type: 'overloaded_error', message: 'the engine is busy' } },
    headers: { 'retry-after': '2' },
  })
})
