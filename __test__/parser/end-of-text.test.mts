/**
 * `<|endoftext|>` from the model ends the completion (docs/SEMANTICS.md "The end of a completion"): the
 * engines stop there, and the adapters must neither show it as text nor call the answer cut. For every place it
 * can stand (inside a final answer, inside a header, between messages, first), on both implementations, Chat
 * and Responses, objects and SSE bytes, one id per push or all at once, and through `SsePool`:
 * the answer is the text before it, the finish reason `stop` (`completed`), usage counts it, and ids an engine
 * sends after it are counted, not read, and reported (`after-end-of-text`).
 */
import test from 'ava'

import { ChatCompletionsStream, chatCompletion, type Implementation, ResponsesStream, responseObject, SsePool } from 'harmony-stream'

import { harmony, IMPLEMENTATIONS } from '../helpers/harmony.mjs'

const ENDOFTEXT = 199_999
const ANALYSIS = '<|channel|>analysis<|message|>Think first.<|end|>'

interface Case {
  name: string
  tokens: number[]
  reasoning: string
  content: string | null
  /** Diagnostic codes the adapters report. */
  codes: string[]
}

const cases: Case[] = [
  {
    name: 'inside the final answer',
    tokens: [...harmony(`${ANALYSIS}<|start|>assistant<|channel|>final<|message|>Hello world`), ENDOFTEXT],
    reasoning: 'Think first.',
    content: 'Hello world',
    codes: [],
  },
  {
    name: 'inside the final answer, and the engine goes on after it',
    tokens: [...harmony('<|channel|>final<|message|>Hello'), ENDOFTEXT, ...harmony(' more<|return|>')],
    reasoning: '',
    content: 'Hello',
    codes: ['after-end-of-text'],
  },
  {
    name: 'between messages',
    tokens: [...harmony(ANALYSIS), ENDOFTEXT],
    reasoning: 'Think first.',
    content: null,
    codes: [],
  },
  {
    name: 'first',
    tokens: [ENDOFTEXT],
    reasoning: '',
    content: null,
    codes: [],
  },
  {
    name: 'inside a header',
    tokens: [...harmony(`${ANALYSIS}<|start|>assistant<|channel|>final`), ENDOFTEXT],
    reasoning: 'Think first.',
    // The parser's lenient rule for a stop token before <|message|> (header-without-message): the header's
    // channel, and the rest of the header as content.
    content: '',
    codes: ['header-without-message'],
  },
]

const chatOptions = (implementation: Implementation) => ({ model: 'm', id: 'chatcmpl-eot', created: 1, parser: { implementation } })
const responsesOptions = (implementation: Implementation) => ({ model: 'm', id: 'resp_eot', createdAt: 1, parser: { implementation } })

for (const implementation of IMPLEMENTATIONS) {
  for (const c of cases) {
    test(`${implementation}: <|endoftext|> ${c.name}: Chat ends with stop, the text before it, usage counting every id`, (t) => {
      const whole = chatCompletion(c.tokens, chatOptions(implementation))
      const message = whole.choices[0].message
      t.is(whole.choices[0].finish_reason, 'stop')
      t.is(message.reasoning_content ?? '', c.reasoning)
      if (c.content === null) t.is(message.content, null)
      else t.is(message.content ?? '', c.content)
      t.false(JSON.stringify({ ...whole, diagnostics: [] }).includes('endoftext'))
      t.is(whole.usage.completion_tokens, c.tokens.length)
      t.deepEqual(
        whole.diagnostics.map((d) => d.code),
        c.codes,
      )
    })

    test(`${implementation}: <|endoftext|> ${c.name}: Responses completes with the text before it`, (t) => {
      const response = responseObject(c.tokens, responsesOptions(implementation))
      t.is(response.status, 'completed')
      t.is(response.incomplete_details, null)
      const text = response.output.flatMap((item) => (item.type === 'message' ? item.content.map((part) => part.text) : [])).join('')
      t.is(text, c.content ?? '')
      t.false(JSON.stringify({ ...response, diagnostics: [] }).includes('endoftext'))
      t.is(response.usage?.output_tokens, c.tokens.length)
    })

    test(`${implementation}: <|endoftext|> ${c.name}: SSE, whole or one id a push, ends the same, and SsePool writes what the adapter does`, (t) => {
      for (const make of [
        () => new ChatCompletionsStream(chatOptions(implementation)),
        () => new ResponsesStream(responsesOptions(implementation)),
      ]) {
        const whole = make()
        const wholeBytes = whole.pushSse(c.tokens) + whole.finishSse()
        const single = make()
        const singleBytes = c.tokens.map((id) => single.pushSse([id])).join('') + single.finishSse()
        for (const [adapter, bytes] of [
          [whole, wholeBytes],
          [single, singleBytes],
        ] as const) {
          t.false(bytes.includes('endoftext'))
          t.true(/"finish_reason":"stop"|"status":"completed"/.test(bytes))
          t.false(bytes.includes('"finish_reason":"length"') || bytes.includes('"status":"incomplete"'))
          t.deepEqual(
            adapter.diagnostics.map((d) => d.code),
            c.codes,
          )
        }

        const pool = new SsePool({ implementation })
        const pooled = make()
        const id = pool.add(pooled)
        let poolBytes = ''
        for (const token of c.tokens) {
          const frames = pool.step(Uint32Array.of(id), Uint32Array.of(0, 1), Uint32Array.of(token))
          t.deepEqual(frames.errors, [])
          poolBytes += Buffer.from(frames.frame(0)).toString()
        }
        t.is(poolBytes + pool.finish(id), singleBytes)
      }
    })
  }
}
