/**
 * `input: 'stripped'`: text whose Harmony markers the server dropped (`skip_special_tokens`), read back into
 * reasoning, answers and tool calls (issue 46), on both backends, whole and cut anywhere; bounded in what it
 * holds back, and linear in what it reads.
 */
import test from 'ava'
import { ChatCompletionsStream, chatCompletion, HarmonyTextParser, SsePool } from 'harmony-stream'

import { IMPLEMENTATIONS } from '../helpers/harmony.mjs'

const TOOLS = { toolNames: ['functions.get_weather'] }

/** The Chat answer to `text`, whole; and streamed in pieces of every size from 1 to 7 characters (all the same). */
function answers(text: string, implementation: 'native' | 'js') {
  const options = { model: 'gpt-oss', input: 'stripped' as const, parser: { implementation, ...TOOLS } }
  const whole = chatCompletion(text, options)
  const read = (completion: Pick<ReturnType<typeof chatCompletion>, 'choices'>, diagnostics: { code: string }[]) => ({
    message: completion.choices[0]!.message,
    finish: completion.choices[0]!.finish_reason,
    diagnostics: diagnostics.map((d) => d.code),
  })
  const streamed = [1, 2, 3, 5, 7].map((size) => {
    const stream = new ChatCompletionsStream(options)
    for (let i = 0; i < text.length; i += size) stream.push(text.slice(i, i + size))
    stream.finish()
    return read(stream.completion(), stream.diagnostics)
  })
  return { whole: read(whole, whole.diagnostics), streamed }
}

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: reasoning, then a call written as the stripped form writes it (Rapid-MLX #480)`, (t) => {
    const { whole, streamed } = answers(
      'analysisNeed the weather.assistantcommentary to=functions.get_weather json{"city":"Paris"}',
      implementation,
    )
    t.like(whole.message, { reasoning_content: 'Need the weather.', content: null })
    t.is(whole.message.tool_calls?.[0]?.function.name, 'get_weather')
    t.is(whole.message.tool_calls?.[0]?.function.arguments, '{"city":"Paris"}')
    t.is(whole.finish, 'tool_calls')
    t.true(whole.diagnostics.includes('stripped-markers'))
    for (const each of streamed)
      t.deepEqual(
        { ...each.message, tool_calls: each.message.tool_calls?.map((c) => c.function) },
        { ...whole.message, tool_calls: whole.message.tool_calls?.map((c) => c.function) },
      )
  })

  test(`${implementation}: a preamble on commentary is a message, not a header (Chat shows it with the answer)`, (t) => {
    const { whole } = answers('analysisThink.assistantcommentaryLet me check.assistantfinalIt is sunny.', implementation)
    t.is(whole.message.content, 'Let me check.It is sunny.')
    t.is(whole.message.tool_calls, undefined)
    t.is(whole.finish, 'stop')
  })

  test(`${implementation}: a recipient glued to the channel, and to its content type`, (t) => {
    const { whole } = answers('commentaryto=functions.get_weatherjson{"city":"Rome"}', implementation)
    t.is(whole.message.tool_calls?.[0]?.function.name, 'get_weather')
    t.is(whole.message.tool_calls?.[0]?.function.arguments, '{"city":"Rome"}')
  })

  test(`${implementation}: a header with no arguments in sight ends at 256 characters; nothing is lost`, (t) => {
    const long = `commentary to=functions.get_weather ${'x'.repeat(400)}`
    const { whole } = answers(long, implementation)
    const seen = JSON.stringify(whole.message) + whole.diagnostics.join(' ')
    t.true(whole.diagnostics.includes('stripped-markers'))
    t.true(JSON.stringify(whole).includes('x'.repeat(100)), seen.slice(0, 200))
  })

  test(`${implementation}: text that does not start with a channel name is left as it is`, (t) => {
    const { whole } = answers('Hello there, analysis aside.', implementation)
    t.is(whole.message.content, 'Hello there, analysis aside.')
    t.false(whole.diagnostics.includes('stripped-markers'))
  })

  test(`${implementation}: a million separators in one chunk: read in one pass, no recursion`, (t) => {
    const parser = new HarmonyTextParser({ implementation, detectStripped: true })
    const text = `analysis${'assistantcommentary'.repeat(50_000)}assistantfinalDone.`
    parser.push(text)
    const last = parser.finish()
    t.is(parser.messages.at(-1)?.content, 'Done.')
    t.is(last.diagnostics.length >= 0, true)
  })
}

test('the pool feeds ids: an adapter reading stripped text is refused; logprobs do not go with it', (t) => {
  const pool = new SsePool()
  t.throws(() => pool.add(new ChatCompletionsStream({ model: 'm', input: 'stripped' })), { instanceOf: TypeError, message: /stripped/ })
  t.throws(() => new ChatCompletionsStream({ model: 'm', input: 'stripped', logprobs: true }), {
    instanceOf: TypeError,
    message: /stripped/,
  })
  t.throws(() => new ChatCompletionsStream({ model: 'm', input: 'strippd' as never }), { instanceOf: TypeError, message: /input/ })
})
