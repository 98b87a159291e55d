/**
 * OpenAI's `stop` (issue 20 item 3): the answer's text ends before the first stop string, which is never shown,
 * however the string is split across tokens and pushes; the finish reason is `stop`; reasoning and tool
 * arguments are not cut; both faces, both implementations, Chat and Responses, `SsePool` as the adapter alone;
 * through the gateway the engine request ends at once.
 */
import test from 'ava'
import { ChatCompletionsStream, chatCompletion, type Implementation, ResponsesStream, responseObject, SsePool } from 'harmony-stream'
import type { Engine, EngineStep, GenerateRequest } from 'harmony-stream/engines'

import { readChatStream, startGateway } from '../helpers/gateway.mjs'
import { harmony, IMPLEMENTATIONS, random } from '../helpers/harmony.mjs'

const ANALYSIS = '<|channel|>analysis<|message|>Think. Then stop. Done.<|end|>'

const completion = (answer: string, terminator = '<|return|>') =>
  harmony(`${ANALYSIS}<|start|>assistant<|channel|>final<|message|>${answer}${terminator}`)

/** The answer as OpenAI cuts it: before the earliest stop string. */
function cut(answer: string, stops: readonly string[]): { text: string; stopped: boolean } {
  const at = Math.min(...stops.map((s) => answer.indexOf(s)).filter((i) => i >= 0))
  return Number.isFinite(at) ? { text: answer.slice(0, at), stopped: true } : { text: answer, stopped: false }
}

const chatOf = (implementation: Implementation, stop: string | string[]) =>
  new ChatCompletionsStream({ model: 'm', id: 'chatcmpl-stop', created: 1, stop, parser: { implementation } })

/** The content a client reads from Chat SSE bytes, and the finish reason. */
function readChat(bytes: string): { content: string; reasoning: string; finish: string | null } {
  let content = ''
  let reasoning = ''
  let finish: string | null = null
  for (const frame of bytes.split('\n\n').filter(Boolean)) {
    const chunk = JSON.parse(frame.slice(6))
    content += chunk.choices[0]?.delta?.content ?? ''
    reasoning += chunk.choices[0]?.delta?.reasoning_content ?? ''
    finish = chunk.choices[0]?.finish_reason ?? finish
  }
  return { content, reasoning, finish }
}

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: the answer ends before the first stop string, in every batching, never showing it`, (t) => {
    const next = random(7)
    const answers = ['Hello world. Goodbye now.', 'ab😀cd😀ef', 'no stop string here at all', 'stop at the very end!!']
    const stopSets: string[][] = [['. G'], ['😀c', 'zz'], ['!!'], ['d😀'], ['not there', 'absent'], ['Hello']]
    for (const answer of answers) {
      for (const stops of stopSets) {
        const tokens = completion(answer)
        const want = cut(answer, stops)
        for (const batch of [1, 2, 3, 7, tokens.length]) {
          const chat = chatOf(implementation, stops)
          let bytes = ''
          for (let i = 0; i < tokens.length; i += batch) bytes += chat.pushSse(tokens.slice(i, i + batch))
          bytes += chat.finishSse()
          const read = readChat(bytes)
          const label = `${JSON.stringify(answer)} ${JSON.stringify(stops)} batch ${batch}`
          t.is(read.content, want.text, label)
          t.is(read.reasoning, 'Think. Then stop. Done.', `${label}: reasoning is not cut`)
          t.is(read.finish, 'stop', label)
          t.is(chat.stopped, want.stopped, label)
          for (const stop of stops) if (want.stopped) t.false(read.content.includes(stop), label)
        }
        // Random batchings, and the object face.
        for (let round = 0; round < 5; round++) {
          const chat = chatOf(implementation, stops)
          const events = []
          for (let i = 0; i < tokens.length; ) {
            const size = 1 + Math.floor(next() * 5)
            events.push(...chat.push(tokens.slice(i, i + size)))
            i += size
          }
          events.push(...chat.finish())
          t.is(events.map((e) => e.choices[0]?.delta?.content ?? '').join(''), want.text)
        }
        const whole = chatCompletion(tokens, { model: 'm', stop: stops, parser: { implementation } })
        t.is(whole.choices[0].message.content ?? '', want.text)
        t.is(whole.choices[0].finish_reason, 'stop')
        const response = responseObject(tokens, { model: 'm', stop: stops, parser: { implementation } })
        const text = response.output.flatMap((item) => (item.type === 'message' ? item.content.map((p) => p.text) : [])).join('')
        t.is(text, want.text)
        t.is(response.status, 'completed')
      }
    }
  })

  test(`${implementation}: after a stop the rest is counted, not read; a tool call or a truncation does not change the stop`, (t) => {
    const tokens = [...completion('One. Two. Three.', ''), ...harmony('<|end|><|start|>assistant<|channel|>final<|message|>More<|return|>')]
    const chat = chatOf(implementation, '. T')
    const events = [...chat.push(tokens), ...chat.finish({ truncated: true })]
    t.is(events.map((e) => e.choices[0]?.delta?.content ?? '').join(''), 'One')
    t.is(events.at(-1)?.choices[0]?.finish_reason, 'stop')
    t.deepEqual(chat.diagnostics, [])
    t.is(
      chatCompletion(tokens, { model: 'm', stop: '. T', includeUsage: true, parser: { implementation } }).usage.completion_tokens,
      tokens.length,
    )
  })

  test(`${implementation}: SsePool writes what the adapter writes alone with stop strings`, (t) => {
    const tokens = completion('Hello world. Goodbye now.')
    for (const make of [
      () => chatOf(implementation, ['. G']),
      () => new ResponsesStream({ model: 'm', id: 'resp_stop', createdAt: 1, stop: ['. G'], parser: { implementation } }),
    ]) {
      const alone = make()
      const aloneBytes = tokens.map((id) => alone.pushSse([id])).join('') + alone.finishSse()
      const pool = new SsePool({ implementation })
      const adapter = make()
      const id = pool.add(adapter)
      let pooled = ''
      for (const token of tokens) {
        const frames = pool.step(Uint32Array.of(id), Uint32Array.of(0, 1), Uint32Array.of(token))
        pooled += Buffer.from(frames.frame(0)).toString()
      }
      t.is(pooled + pool.finish(id), aloneBytes)
      t.false(aloneBytes.includes('Goodbye'))
    }
  })
}

test('stop is checked like every option', (t) => {
  for (const stop of ['', [], ['a', 'b', 'c', 'd', 'e'], [''], [1], 5]) {
    t.throws(() => new ChatCompletionsStream({ model: 'm', stop: stop as never }), { instanceOf: TypeError, message: /stop/ })
  }
})

test('the gateway: the openai client gets the answer up to the stop string, finish stop, and the engine request ends at once', async (t) => {
  const answer = harmony('<|channel|>final<|message|>Count: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15.<|return|>')
  let pulled = 0
  let closed = 0
  const engine: Engine = {
    name: 'counting',
    generate(_request: GenerateRequest): AsyncIterable<EngineStep> {
      return (async function* () {
        try {
          for (const id of answer) {
            pulled++
            yield { tokens: Uint32Array.of(id) }
          }
          yield { tokens: new Uint32Array(0), finishReason: 'stop' as const }
        } finally {
          closed++
        }
      })()
    },
  }
  const { client } = await startGateway(t, { engine, onDiagnostic: () => {} })
  const body = { model: 'gpt-oss', messages: [{ role: 'user' as const, content: 'Count.' }], stop: [', 4', 'never'] }
  const { content, finish } = await readChatStream(await client.chat.completions.create({ ...body, stream: true }))
  t.is(content, 'Count: 1, 2, 3')
  t.is(finish, 'stop')
  t.true(pulled < answer.length / 2, `the engine was pulled ${pulled} times of ${answer.length}`)
  t.is(closed, 1, 'the engine request was closed')
  const whole = await client.chat.completions.create(body)
  t.is(whole.choices[0].message.content, 'Count: 1, 2, 3')
  t.is(whole.choices[0].finish_reason, 'stop')
})
