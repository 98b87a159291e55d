/**
 * The gateway adapters, proven with the official `openai` client against the example gateway
 * (examples/gateway/server.mjs): at stream intervals 1, 3 and 20, on both implementations, streaming and
 * not, Chat Completions and Responses must assemble the reasoning, content and tool calls of the transcript,
 * which this test derives on its own from `parseCompletion` by channel and recipient.
 */
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'

import test from 'ava'
import {
  ChatCompletionsStream,
  chatCompletion,
  type HarmonyMessage,
  type Implementation,
  parseCompletion,
  ResponsesStream,
} from 'harmony-stream'
import OpenAI from 'openai'

import { failingEngine } from '../helpers/gateway.mjs'
import { harmony, IMPLEMENTATIONS, random } from '../helpers/harmony.mjs'
import { decodeTokens } from '../helpers/token-bytes.mjs'

const root = join(import.meta.dirname, '..', '..')
const { createGateway, loadReplay } = (await import(join(root, 'examples/gateway/server.mjs'))) as {
  createGateway(options: {
    replay: number[][]
    interval: number
    implementation: Implementation
    onDiagnostic(d: { code: string }): void
  }): import('node:http').Server
  loadReplay(path: string): number[][]
}

/** The sample replay plus cases where mapping bugs hide: a batch crossing analysis → tool call, two calls, bad JSON, a built-in tool. */
const replay = [
  ...loadReplay(join(root, 'examples/gateway/replay.json')),
  harmony(
    '<|channel|>analysis<|message|>Two calls.<|end|><|start|>assistant<|channel|>commentary to=functions.a <|constrain|>json<|message|>{"x":1}<|call|><|start|>assistant<|channel|>analysis to=functions.b<|message|>{"y":[2,3]}<|call|>',
  ),
  harmony(
    '<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary to=browser.search<|message|>{"q":"weather"}<|call|><|start|>assistant<|channel|>final<|message|>done<|return|>',
  ),
  harmony('<|channel|>commentary to=functions.lookup <|constrain|>json<|message|>{not json<|call|>'),
  harmony('<|channel|>final<|message|>no reasoning at all<|end|>'),
]

interface Expected {
  reasoning: string
  content: string | null
  toolCalls: { name: string; arguments: string }[]
  finishReason: 'stop' | 'length' | 'tool_calls'
}

/** The transcript mapped by channel and recipient, written independently of src/wire. */
function expected(tokens: number[]): Expected {
  const messages: HarmonyMessage[] = parseCompletion(tokens)
  const pick = (keep: (m: HarmonyMessage) => boolean) => messages.filter(keep).map((m) => m.content)
  const tool = (m: HarmonyMessage) => m.recipient?.startsWith('functions.') === true
  const content = pick((m) => !m.recipient && (m.channel === 'final' || m.channel === 'commentary'))
  const last = messages.at(-1)?.terminator ?? null
  return {
    reasoning: pick((m) => m.channel === 'analysis' && !m.recipient).join(''),
    content: content.length > 0 ? content.join('') : null,
    toolCalls: messages.filter(tool).map((m) => ({ name: m.recipient!.slice('functions.'.length), arguments: m.content })),
    finishReason: last === 'call' ? 'tool_calls' : last === null ? 'length' : 'stop',
  }
}

async function withGateway(implementation: Implementation, interval: number, run: (client: OpenAI) => Promise<void>): Promise<string[]> {
  const diagnostics: string[] = []
  const server = createGateway({ replay, interval, implementation, onDiagnostic: (d) => diagnostics.push(d.code) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  try {
    await run(new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'test', maxRetries: 0 }))
  } finally {
    server.close()
  }
  return diagnostics
}

const pickReplay = (index: number) => ({ headers: { 'x-harmony-replay': String(index) } })

for (const implementation of IMPLEMENTATIONS) {
  for (const interval of [1, 3, 20]) {
    test(`${implementation}, stream interval ${interval}: Chat Completions through the openai client`, async (t) => {
      const diagnostics = await withGateway(implementation, interval, async (client) => {
        for (const [index, tokens] of replay.entries()) {
          const want = expected(tokens)
          const stream = client.chat.completions.stream(
            { model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }], stream_options: { include_usage: true } },
            pickReplay(index),
          )
          // The client's helper keeps only the last delta of fields it does not know, so reasoning is summed here.
          let reasoning = ''
          stream.on('chunk', (chunk) => {
            reasoning += (chunk.choices[0]?.delta as { reasoning_content?: string } | undefined)?.reasoning_content ?? ''
          })
          const final = await stream.finalChatCompletion()
          const choice = final.choices[0]
          t.is(reasoning, want.reasoning, `replay ${index}: reasoning`)
          t.is(choice.message.content ?? null, want.content, `replay ${index}: content`)
          t.deepEqual(
            (choice.message.tool_calls ?? []).map((c) => ({
              name: c.type === 'function' ? c.function.name : '',
              arguments: c.type === 'function' ? c.function.arguments : '',
            })),
            want.toolCalls,
            `replay ${index}: tool calls`,
          )
          t.true((choice.message.tool_calls ?? []).every((c) => c.id.startsWith('call_') && c.type === 'function'))
          t.is(choice.finish_reason, want.finishReason, `replay ${index}: finish_reason`)
          t.is(final.usage?.completion_tokens, tokens.length)

          const whole = await client.chat.completions.create(
            { model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }] },
            pickReplay(index),
          )
          const message = whole.choices[0].message as (typeof whole.choices)[0]['message'] & { reasoning_content?: string }
          t.is(message.reasoning_content ?? '', want.reasoning)
          t.is(message.content, want.content)
          t.deepEqual(
            (message.tool_calls ?? []).map((c) =>
              c.type === 'function' ? { name: c.function.name, arguments: c.function.arguments } : null,
            ),
            want.toolCalls,
          )
          t.is(whole.choices[0].finish_reason, want.finishReason)
        }
      })
      // The replay with a tool body that is not JSON, and the one calling a built-in tool the gateway did not
      // offer, each once streamed and once not.
      t.deepEqual(diagnostics.filter((code) => code === 'invalid-tool-arguments').length, 2)
      t.deepEqual(diagnostics.filter((code) => code === 'dropped-message').length, 2)
    })

    test(`${implementation}, stream interval ${interval}: Responses through the openai client`, async (t) => {
      await withGateway(implementation, interval, async (client) => {
        for (const [index, tokens] of replay.entries()) {
          const want = expected(tokens)
          const stream = client.responses.stream({ model: 'gpt-oss', input: 'hi' }, pickReplay(index))
          const events: { type: string; sequence_number: number; item?: { id: string }; item_id?: string }[] = []
          for await (const event of stream) events.push(event as never)
          const final = await stream.finalResponse()
          const items = final.output
          const texts = (type: 'reasoning' | 'message') =>
            items
              .filter((i) => i.type === type)
              .map((i) =>
                i.type === 'message'
                  ? i.content.map((c) => (c.type === 'output_text' ? c.text : '')).join('')
                  : i.type === 'reasoning'
                    ? (i.content ?? []).map((c) => c.text).join('')
                    : '',
              )
          t.is(texts('reasoning').join(''), want.reasoning, `replay ${index}: reasoning`)
          t.is(texts('message').length > 0 ? texts('message').join('') : null, want.content, `replay ${index}: content`)
          t.deepEqual(
            items.flatMap((i) => (i.type === 'function_call' ? [{ name: i.name, arguments: i.arguments }] : [])),
            want.toolCalls,
            `replay ${index}: tool calls`,
          )
          // Sequence numbers count up from 0; every item added is done, once, with a stable id.
          t.deepEqual(
            events.map((e) => e.sequence_number),
            events.map((_, i) => i),
          )
          const added = events.filter((e) => e.type === 'response.output_item.added').map((e) => e.item!.id)
          const done = events.filter((e) => e.type === 'response.output_item.done').map((e) => e.item!.id)
          t.deepEqual(done, added)
          t.is(new Set(added).size, added.length)
          t.is(events.at(-1)?.type, want.finishReason === 'length' ? 'response.incomplete' : 'response.completed')

          const whole = await client.responses.create({ model: 'gpt-oss', input: 'hi' }, pickReplay(index))
          t.deepEqual(
            whole.output.map((i) => i.type),
            items.map((i) => i.type),
          )
          t.is(whole.usage?.output_tokens, tokens.length)
        }
      })
    })
  }
}

test('adapters: every batch split gives the same assembled result (no text lost or misrouted at boundaries)', (t) => {
  for (const implementation of IMPLEMENTATIONS) {
    for (const tokens of replay) {
      const want = expected(tokens)
      for (let interval = 1; interval <= tokens.length; interval++) {
        const chat = new ChatCompletionsStream({ model: 'm', id: 'chatcmpl-x', parser: { implementation } })
        const responses = new ResponsesStream({ model: 'm', id: 'resp_x', parser: { implementation } })
        const chunks = []
        const events = []
        for (let i = 0; i < tokens.length; i += interval) {
          chunks.push(...chat.push(tokens.slice(i, i + interval)))
          events.push(...responses.push(tokens.slice(i, i + interval)))
        }
        chunks.push(...chat.finish())
        events.push(...responses.finish())
        const reasoning = chunks.map((c) => c.choices[0]?.delta.reasoning_content ?? '').join('')
        const content = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')
        const args = new Map<number, string>()
        for (const c of chunks)
          for (const call of c.choices[0]?.delta.tool_calls ?? [])
            args.set(call.index, (args.get(call.index) ?? '') + call.function.arguments)
        t.is(reasoning, want.reasoning)
        t.is(content, want.content ?? '')
        t.deepEqual(
          [...args.values()],
          want.toolCalls.map((c) => c.arguments),
        )
        t.is(chunks.at(-1)?.choices[0]?.finish_reason, want.finishReason)
        const deltas = events
          .filter((e) => e.type === 'response.output_text.delta')
          .map((e) => e.delta)
          .join('')
        t.is(deltas, want.content ?? '')
      }
    }
  }
})

test('adapters: usage counts reasoning tokens exactly, and invalid tool JSON is a diagnostic, not an error', (t) => {
  const tokens = harmony(
    '<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{oops<|call|>',
  )
  const chat = new ChatCompletionsStream({ model: 'm', includeUsage: true })
  const chunks = [...chat.push(tokens), ...chat.finish()]
  const reasoningTokens = harmony('<|channel|>analysis<|message|>think<|end|>').length
  t.deepEqual(chunks.at(-1)?.usage, {
    prompt_tokens: 0,
    completion_tokens: tokens.length,
    total_tokens: tokens.length,
    prompt_tokens_details: { cached_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: reasoningTokens },
  })
  t.deepEqual(
    chat.diagnostics.map((d) => d.code),
    ['invalid-tool-arguments'],
  )
  t.is(chat.diagnostics[0].text, '{oops')
})

test('adapters: routing options (preamble as reasoning, built-in tools surfaced, reasoning field)', (t) => {
  const tokens = harmony(
    '<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant<|channel|>commentary to=browser.search<|message|>{"q":1}<|call|>',
  )
  const chunks = (options: object) => {
    const chat = new ChatCompletionsStream({ model: 'm', ...options })
    return [...chat.push(tokens), ...chat.finish()].map((c) => c.choices[0]?.delta ?? {})
  }
  const defaults = chunks({})
  t.is(defaults.map((d) => d.content ?? '').join(''), 'Checking.')
  t.false(
    defaults.some((d) => d.tool_calls),
    'built-in tools are dropped by default',
  )
  const other = chunks({ preamble: 'reasoning', builtinTools: 'surface', reasoningField: 'reasoning' })
  t.is(other.map((d) => d.reasoning ?? '').join(''), 'Checking.')
  t.is(other.map((d) => d.content ?? '').join(''), '')
  t.is(other.find((d) => d.tool_calls)?.tool_calls?.[0]?.function.name, 'browser.search')
})

test('adapters take text whose markers arrive as text, cut anywhere (input: text)', (t) => {
  const next = random(5)
  for (const implementation of IMPLEMENTATIONS) {
    for (const tokens of replay) {
      const want = expected(tokens)
      const text = decodeTokens(tokens)
      for (let round = 0; round < 5; round++) {
        const chat = new ChatCompletionsStream({ model: 'm', input: 'text', includeUsage: true, parser: { implementation } })
        const responses = new ResponsesStream({ model: 'm', input: 'text', parser: { implementation } })
        const chunks = []
        const events = []
        for (let i = 0; i < text.length; ) {
          const size = 1 + Math.floor(next() * 12)
          chunks.push(...chat.push(text.slice(i, i + size)))
          events.push(...responses.push(text.slice(i, i + size)))
          i += size
        }
        chunks.push(...chat.finish())
        events.push(...responses.finish())
        t.is(chunks.map((c) => c.choices[0]?.delta.reasoning_content ?? '').join(''), want.reasoning)
        t.is(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), want.content ?? '')
        t.is(chunks.at(-2)?.choices[0]?.finish_reason, want.finishReason)
        // The text re-encodes to the model's tokens, so usage is exact here.
        t.is(chunks.at(-1)?.usage?.completion_tokens, tokens.length)
        t.is(
          events
            .filter((e) => e.type === 'response.output_text.delta')
            .map((e) => e.delta)
            .join(''),
          want.content ?? '',
        )
      }
    }
  }
  t.throws(() => new ChatCompletionsStream({ model: 'm' }).push('text'), { instanceOf: TypeError })
  t.throws(() => new ChatCompletionsStream({ model: 'm', input: 'text' }).push([1]), { instanceOf: TypeError })
})

test('adapters: a completion ending in a dropped built-in call finishes with stop; truncated finishes with length', (t) => {
  const builtin = harmony(
    '<|channel|>analysis<|message|>search<|end|><|start|>assistant<|channel|>commentary to=browser.search<|message|>{"q":1}<|call|>',
  )
  const chat = new ChatCompletionsStream({ model: 'm' })
  const chunks = [...chat.push(builtin), ...chat.finish()]
  t.is(chunks.at(-1)?.choices[0]?.finish_reason, 'stop')
  t.false(chunks.some((c) => c.choices[0]?.delta.tool_calls))
  t.is(chatCompletion(builtin, { model: 'm' }).choices[0].finish_reason, 'stop')
  const surfaced = new ChatCompletionsStream({ model: 'm', builtinTools: 'surface' })
  t.is([...surfaced.push(builtin), ...surfaced.finish()].at(-1)?.choices[0]?.finish_reason, 'tool_calls')
  // The engine hit its token limit right after a stop token: only it knows.
  const ended = harmony('<|channel|>final<|message|>ok<|end|>')
  const cut = new ChatCompletionsStream({ model: 'm' })
  t.is([...cut.push(ended), ...cut.finish({ truncated: true })].at(-1)?.choices[0]?.finish_reason, 'length')
  const responses = new ResponsesStream({ model: 'm' })
  t.is([...responses.push(ended), ...responses.finish({ truncated: true })].at(-1)?.type, 'response.incomplete')
})

test('adapters: reasoning tokens of a message closed by <|start|> without <|end|> (lenient recovery)', (t) => {
  const tokens = harmony('<|channel|>analysis<|message|>think more<|start|>assistant<|channel|>final<|message|>x<|return|>')
  const chat = new ChatCompletionsStream({ model: 'm', includeUsage: true })
  const chunks = [...chat.push(tokens), ...chat.finish()]
  // The analysis message is everything before that <|start|>, which opens the next message.
  t.is(chunks.at(-1)?.usage?.completion_tokens_details.reasoning_tokens, harmony('<|channel|>analysis<|message|>think more').length)
  t.is(chunks.at(-1)?.usage?.completion_tokens, tokens.length)
  t.deepEqual(
    chat.diagnostics.map((d) => d.code),
    ['missing-end'],
  )
})

test('the gateway sends an error frame when the engine fails midway, and the openai client raises it', async (t) => {
  const errors: unknown[] = []
  const server = createGateway({
    engine: failingEngine,
    implementation: 'js',
    onDiagnostic: () => {},
    onError: (e: unknown) => errors.push(e),
  } as never)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'test', maxRetries: 0 })
  try {
    const chat = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true })
    await t.throwsAsync(
      async () => {
        for await (const chunk of chat) void chunk
      },
      // The client learns what kind of failure it was, not the engine's own words (those go to onError).
      { message: /the connection to the inference engine failed/ },
    )
    const responses = client.responses.stream({ model: 'm', input: 'hi' })
    // openai-node raises the `error` event's nested `error` as an APIError, with its type and code.
    const failure = await responses.finalResponse().then(
      () => null,
      (error: unknown) => error,
    )
    t.true(failure instanceof OpenAI.APIError)
    t.is((failure as InstanceType<typeof OpenAI.APIError>).type, 'server_error')
    t.is((failure as InstanceType<typeof OpenAI.APIError>).code, 'engine_connection_error')
    t.regex((failure as Error).message, /the connection to the inference engine failed/)
    t.is(errors.length, 2)
    t.regex(String((errors[0] as Error).message), /the connection to the engine broke/)
  } finally {
    server.close()
  }
})

test('x-harmony-replay outside the replay file is a 400 naming the header', async (t) => {
  const server = createGateway({ replay, interval: 1, implementation: 'js', onDiagnostic: () => {} })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => server.close())
  const { port } = server.address() as AddressInfo
  for (const header of ['99', 'x', '']) {
    const answer = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-harmony-replay': header },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    })
    t.is(answer.status, 400, header)
    t.is(((await answer.json()) as { error: { param: string } }).error.param, 'x-harmony-replay')
  }
})
