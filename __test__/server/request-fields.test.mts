/**
 * Every request field is honoured, accepted or refused, never dropped without a word (docs/API.md "Request
 * fields"). The tables are walked field by field: a refused field with a value that asks for something is a
 * 400 naming it, with one that asks for nothing it is taken; an accepted one of the wrong type is a 400; an
 * unknown one is OpenAI's 400 unless the gateway ignores unknown fields. The tables must hold every field of
 * the pinned `openai` package's request types (checked when the tests are type-checked), and docs/API.md must
 * show them as they are.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { MessageCreateParamsBase as BetaMessageCreateParamsBase } from '@anthropic-ai/sdk/resources/beta/messages/messages'
import type { MessageCreateParamsBase } from '@anthropic-ai/sdk/resources/messages/messages'
import test from 'ava'
import { renderChatCompletionRequest, renderResponsesRequest } from 'harmony-stream'
import {
  CHAT_REQUEST_FIELDS,
  chatGenerationParameters,
  HttpError,
  INPUT_TOKENS_REQUEST_FIELDS,
  RESPONSES_REQUEST_FIELDS,
  responsesGenerationParameters,
} from 'harmony-stream/http'
import { MESSAGES_REQUEST_FIELDS } from 'harmony-stream/server'
import OpenAI from 'openai'
import type { ChatCompletionCreateParamsBase } from 'openai/resources/chat/completions/completions'
import type { InputTokenCountParams } from 'openai/resources/responses/input-tokens'
import type { ResponseCreateParamsBase } from 'openai/resources/responses/responses'

import { exampleReplay, startGateway } from '../helpers/gateway.mjs'

const root = join(import.meta.dirname, '..', '..')

// Type-checked (npm test runs tsc over the tests): a field the pinned openai types gain and the tables do not
// classify makes these lines fail to compile, naming it.
type Unclassified<Params, Table> = Exclude<keyof Params, keyof Table>
type Covered<Missing> = [Missing] extends [never] ? true : Missing
const chatCovered: Covered<Unclassified<ChatCompletionCreateParamsBase, typeof CHAT_REQUEST_FIELDS>> = true
const responsesCovered: Covered<Unclassified<ResponseCreateParamsBase, typeof RESPONSES_REQUEST_FIELDS>> = true
// The count's table is exactly its parameters: one it lacks fails here, one it has beyond them too.
const inputTokensCovered: Covered<Unclassified<InputTokenCountParams, typeof INPUT_TOKENS_REQUEST_FIELDS>> = true
const inputTokensExact: Covered<Exclude<keyof typeof INPUT_TOKENS_REQUEST_FIELDS, keyof InputTokenCountParams>> = true
// Anthropic's Messages fields (the `@anthropic-ai/sdk` package's, beta ones included), less those its SDK sends as
// headers (`betas`, the user profile and workspace) and the beta ones not served here (a 400 as unknown).
type MessagesParams = Omit<
  MessageCreateParamsBase & BetaMessageCreateParamsBase,
  'betas' | 'user_profile_id' | 'workspace_id' | 'billing_policy' | 'compaction' | 'fallback_credit_token' | 'fallbacks' | 'thread'
>
const messagesCovered: Covered<Unclassified<MessagesParams, typeof MESSAGES_REQUEST_FIELDS>> = true

const APIS = {
  chat: {
    table: CHAT_REQUEST_FIELDS as Readonly<Record<string, { handling: string; note: string; type?: string }>>,
    base: { model: 'gpt-oss', messages: [{ role: 'user', content: 'Hi' }] },
    parameters: chatGenerationParameters,
    render: renderChatCompletionRequest,
  },
  responses: {
    table: RESPONSES_REQUEST_FIELDS as Readonly<Record<string, { handling: string; note: string; type?: string }>>,
    base: { model: 'gpt-oss', input: 'Hi' },
    parameters: responsesGenerationParameters,
    render: renderResponsesRequest,
  },
}

/** For each refused field: values that ask for something (each a 400) and values that ask for nothing (taken). */
const REFUSED: Record<string, { asks: unknown[]; nothing?: unknown[] }> = {
  store: { asks: [true], nothing: [false] },
  audio: { asks: [{ voice: 'alloy', format: 'mp3' }] },
  modalities: { asks: [['text', 'audio'], ['audio']], nothing: [['text']] },
  function_call: { asks: ['auto'] },
  functions: { asks: [[{ name: 'f' }]] },
  frequency_penalty: { asks: [0.5], nothing: [0] },
  presence_penalty: { asks: [-1], nothing: [0] },
  logit_bias: { asks: [{ 1000: 5 }] },
  logprobs: { asks: [true], nothing: [false] },
  top_logprobs: { asks: [3], nothing: [0] },
  prediction: { asks: [{ type: 'content', content: 'x' }] },
  response_format: {
    asks: [{ type: 'json_object' }, { type: 'json_schema', json_schema: { name: 'x', schema: {} } }],
    nothing: [{ type: 'text' }],
  },
  stop: { asks: ['\n', ['a', 'b']] },
  verbosity: { asks: ['low'] },
  web_search_options: { asks: [{}] },
  background: { asks: [true], nothing: [false] },
  previous_response_id: { asks: ['resp_1'] },
  prompt: { asks: [{ id: 'pmpt_1' }] },
  context_management: { asks: [[{ type: 'compaction' }]] },
  include: { asks: [['reasoning.encrypted_content']], nothing: [[]] },
  text: {
    asks: [{ format: { type: 'json_schema', name: 'x', schema: {} } }, { verbosity: 'low' }],
    nothing: [{ format: { type: 'text' } }, {}],
  },
  truncation: { asks: ['auto'], nothing: ['disabled'] },
  max_tool_calls: { asks: [2] },
}

const SAMPLE: Record<string, unknown> = { string: 'x', boolean: true, object: { a: '1' }, number: 1 }
const WRONG: Record<string, unknown> = { string: 1, boolean: 'yes', object: 'x', number: 'x' }

/** The 400 that `run` throws, its param and message. */
function refusal(t: import('ava').ExecutionContext, run: () => unknown, param: string, label: string): void {
  const error = t.throws(run, { instanceOf: HttpError }, label)
  t.is(error?.status, 400, label)
  t.is(error?.param, param, label)
}

for (const [api, { table, base, parameters, render }] of Object.entries(APIS)) {
  test(`${api}: every refused field is a 400 naming it for a value that asks for something, and taken for one that asks for nothing`, (t) => {
    for (const [name, field] of Object.entries(table)) {
      if (field.handling !== 'refused') continue
      const values = REFUSED[name]
      if (values === undefined) {
        t.fail(`no test values for the refused field '${name}'`)
        continue
      }
      for (const value of values.asks) {
        refusal(t, () => parameters({ ...base, [name]: value }), name, `${name}: ${JSON.stringify(value)}`)
        const error = t.throws(() => parameters({ ...base, [name]: value }))
        t.regex(error?.message ?? '', new RegExp(`^${name} is not supported: `))
      }
      for (const value of [null, ...(values.nothing ?? [])]) {
        t.notThrows(() => parameters({ ...base, [name]: value }), `${name}: ${JSON.stringify(value)}`)
      }
    }
  })

  test(`${api}: every accepted field is taken with its type and refused with another; the prompt does not change`, (t) => {
    const prompt = Array.from(render(base).tokens)
    for (const [name, field] of Object.entries(table)) {
      if (field.handling !== 'accepted') continue
      const body = { ...base, [name]: SAMPLE[field.type!] }
      t.notThrows(() => parameters(body), name)
      t.deepEqual(Array.from(render(body).tokens), prompt, `${name} changes nothing in the prompt`)
      refusal(t, () => parameters({ ...base, [name]: WRONG[field.type!] }), name, `${name} of the wrong type`)
    }
  })

  test(`${api}: an unknown field is OpenAI's 400, or taken without it with unknownFields: 'ignore'`, (t) => {
    refusal(t, () => parameters({ ...base, foo: 1 }), 'foo', 'foo')
    t.throws(() => parameters({ ...base, foo: 1 }), { message: 'Unrecognized request argument supplied: foo' })
    // Not an own field: nothing of Object.prototype is taken for a table entry.
    refusal(t, () => parameters(JSON.parse(`{"model": "m", "toString": 1, "constructor": {}}`)), 'toString', 'toString')
    t.notThrows(() => parameters({ ...base, foo: 1, bar: { baz: [] } }, { unknownFields: 'ignore' }))
    t.throws(() => parameters(base, { unknownFields: 'drop' as never }), { instanceOf: TypeError, message: /unknownFields/ })
  })
}

test('the tables hold every field of the openai request types (checked at type-check time), and docs/API.md shows them as they are', (t) => {
  t.true(chatCovered && responsesCovered && inputTokensCovered && inputTokensExact && messagesCovered)
  const docs = readFileSync(join(root, 'docs', 'API.md'), 'utf8')
  for (const [heading, table] of [
    ['Chat Completions:', APIS.chat.table],
    ['Responses:', APIS.responses.table],
    ['Responses input tokens:', INPUT_TOKENS_REQUEST_FIELDS as Readonly<Record<string, { handling: string; note: string }>>],
    ['Messages:', MESSAGES_REQUEST_FIELDS as Readonly<Record<string, { handling: string; note: string }>>],
  ] as const) {
    const start = docs.indexOf(`\n${heading}\n`, docs.indexOf('## Request fields'))
    t.true(start > 0, heading)
    const rows = docs
      .slice(start)
      .split('\n\n')[1]
      .split('\n')
      .slice(2)
      .map((line) => line.split(' | ').map((cell) => cell.replace(/^\| /, '').replace(/ \|$/, '')))
    const shown = rows.map(([name, handling, note]) => [name.replaceAll('`', ''), handling, note.replaceAll('\\|', '|')])
    t.deepEqual(
      shown,
      Object.entries(table).map(([name, field]) => [name, field.handling, field.note]),
      heading,
    )
  }
})

test('the example gateway answers a refused or unknown field with a 400 the openai client raises, naming it', async (t) => {
  const replay = await exampleReplay()
  for (const unknownFields of ['refuse', 'ignore']) {
    const { client } = await startGateway(t, { replay, unknownFields, onDiagnostic: () => {} })
    const messages = [{ role: 'user' as const, content: 'Hi' }]
    const logprobs = await t.throwsAsync(client.chat.completions.create({ model: 'gpt-oss', messages, logprobs: true }), {
      instanceOf: OpenAI.BadRequestError,
    })
    t.is(logprobs?.param, 'logprobs')
    const unknown = client.chat.completions.create({ model: 'gpt-oss', messages, foo: 1 } as never)
    if (unknownFields === 'refuse') {
      const error = await t.throwsAsync(unknown, { instanceOf: OpenAI.BadRequestError })
      t.is(error?.param, 'foo')
      t.is(error?.message, '400 Unrecognized request argument supplied: foo')
    } else {
      t.truthy((await unknown).choices[0])
    }
    // A summary asked for is a preference: taken, and said in the header (gpt-oss writes none).
    const summary = await client.responses
      .create({ model: 'gpt-oss', input: 'Hi', reasoning: { effort: 'low', summary: 'detailed' } })
      .withResponse()
    t.is(summary.response.headers.get('x-harmony-not-applied'), 'reasoning.summary')
    const auto = await client.responses
      .create({ model: 'gpt-oss', input: 'Hi', reasoning: { effort: 'low', summary: 'auto' } })
      .withResponse()
    t.is(auto.response.headers.get('x-harmony-not-applied'), null)
  }
})

test('what clients send by default and gpt-oss cannot do is taken and said in x-harmony-not-applied, inline and from a render worker', async (t) => {
  const replay = await exampleReplay()
  for (const renderWorkers of [0, 1]) {
    const diagnostics: { code: string; message: string }[] = []
    // renderInlineBytes 0: every body goes to the worker when there is one.
    const { client } = await startGateway(t, {
      replay,
      renderWorkers,
      renderInlineBytes: 0,
      onDiagnostic: (d: never) => diagnostics.push(d),
    })
    // What the Agents SDK and Codex send with their defaults.
    const responses = await client.responses
      .create({
        model: 'gpt-oss',
        input: 'Hi',
        text: { verbosity: 'medium' },
        reasoning: { effort: 'minimal', summary: 'auto' },
        tools: [{ type: 'web_search' }],
        client_metadata: { originator: 'codex' },
      } as never)
      .withResponse()
    t.is(responses.response.status, 200)
    t.is(responses.response.headers.get('x-harmony-not-applied'), 'tools[0], text.verbosity, reasoning.effort')
    t.is((responses.data as { status: string }).status, 'completed')
    // The object says the effort the answer ran at.
    t.is((responses.data as { reasoning: { effort: string } }).reasoning.effort, 'low')
    const stream = await client.chat.completions
      .create({ model: 'gpt-oss', messages: [{ role: 'user', content: 'Hi' }], verbosity: 'low', reasoning_effort: 'none', stream: true })
      .withResponse()
    t.is(stream.response.headers.get('x-harmony-not-applied'), 'reasoning_effort, verbosity')
    for await (const _ of stream.data);
    t.deepEqual(
      diagnostics.filter((d) => d.code === 'not-applied').map((d) => d.message.split(':')[0]),
      ['tools[0]', 'text.verbosity', 'reasoning.effort', 'reasoning_effort', 'verbosity'],
      `renderWorkers ${renderWorkers}`,
    )
  }
})
