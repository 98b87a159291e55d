/**
 * Structured outputs (issue 20 item 2), the request and adapter sides: Chat `response_format` and Responses
 * `text.format` rendered into the developer message's `# Response Formats` section, schemas the engines'
 * grammars cannot enforce refused with a 400 naming the keyword's path, and answers checked against the schema
 * (`invalid-structured-output`). The engine side (grammars, xgrammar, a real llama-server) is tested in
 * engine-constraints.test.mts and engines-real/.
 *
 * The reference renderer has no API for response formats, so the expected text comes from the Harmony format
 * guide (openai/harmony docs/format.md, "Structured output"): the section ends the developer message, and each
 * format is `## {format name}`, a blank line, `// {description}`, then the schema. (The guide's own example
 * below that template is garbled: it shows `Reasoning: high` where the name belongs; the template is followed.)
 */
import test from 'ava'
import {
  ChatCompletionsStream,
  chatCompletion,
  HarmonyRequestError,
  ResponsesStream,
  renderChatCompletionRequest,
  renderResponsesRequest,
  responseObject,
} from 'harmony-stream'

import type { Engine, GenerateRequest } from 'harmony-stream/engines'

import { startGateway } from '../helpers/gateway.mjs'
import { harmony, IMPLEMENTATIONS } from '../helpers/harmony.mjs'
import { decodeTokens } from '../helpers/token-bytes.mjs'

const SCHEMA = {
  type: 'object',
  properties: { answer: { enum: ['yes', 'no'] }, confidence: { type: 'integer' } },
  required: ['answer', 'confidence'],
  additionalProperties: false,
}

const chatBody = (responseFormat: unknown, extra: object = {}) => ({
  model: 'gpt-oss',
  messages: [
    { role: 'system', content: 'Answer briefly.' },
    { role: 'user', content: 'Is water wet?' },
  ],
  response_format: responseFormat,
  ...extra,
})

const JSON_SCHEMA_FORMAT = {
  type: 'json_schema',
  json_schema: { name: 'verdict', description: 'A yes or no verdict.\nWith a confidence.', schema: SCHEMA, strict: true },
}

/** Ordinary text of a prompt: the special tokens decode to their names. */
const promptText = (tokens: Uint32Array) => decodeTokens([...tokens])

/** The developer message's text: between `<|start|>developer<|message|>` and its `<|end|>`. */
function developerText(tokens: Uint32Array): string {
  const text = promptText(tokens)
  const start = text.indexOf('<|start|>developer<|message|>')
  return text.slice(start + '<|start|>developer<|message|>'.length, text.indexOf('<|end|>', start))
}

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: a json_schema format ends the developer message as the format guide lays it out`, (t) => {
    const prompt = renderChatCompletionRequest(chatBody(JSON_SCHEMA_FORMAT), { implementation, currentDate: null })
    t.is(
      developerText(prompt.tokens),
      `# Instructions\n\nAnswer briefly.\n\n# Response Formats\n\n## verdict\n\n// A yes or no verdict.\n// With a confidence.\n${JSON.stringify(SCHEMA)}`,
    )
    t.deepEqual(prompt.responseFormat, {
      format: 'json_schema',
      name: 'verdict',
      description: 'A yes or no verdict.\nWith a confidence.',
      schema: SCHEMA,
    })
  })

  test(`${implementation}: the section comes after the tools, and a format alone makes a developer message`, (t) => {
    const tools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: {} } } }]
    const withTools = developerText(
      renderChatCompletionRequest(chatBody(JSON_SCHEMA_FORMAT, { tools }), { implementation, currentDate: null }).tokens,
    )
    t.true(withTools.indexOf('# Tools') < withTools.indexOf('# Response Formats'))
    t.true(withTools.endsWith(JSON.stringify(SCHEMA)))
    const alone = renderResponsesRequest(
      { model: 'm', input: 'Is water wet?', text: { format: { type: 'json_schema', name: 'verdict', schema: SCHEMA } } },
      { implementation, currentDate: null },
    )
    // No description: no comment line.
    t.is(developerText(alone.tokens), `# Response Formats\n\n## verdict\n\n${JSON.stringify(SCHEMA)}`)
    t.is(alone.responseFormat?.name, 'verdict')
  })
}

test('json_object shows no section (JSON mode has no schema) but asks the engine for an object; text asks for nothing', (t) => {
  const json = renderChatCompletionRequest(chatBody({ type: 'json_object' }), { currentDate: null })
  t.false(promptText(json.tokens).includes('# Response Formats'))
  t.deepEqual(json.responseFormat, { format: 'json_object', name: 'json_object', schema: { type: 'object' } })
  const text = renderChatCompletionRequest(chatBody({ type: 'text' }), { currentDate: null })
  t.is(text.responseFormat, undefined)
  t.deepEqual(text.tokens, renderChatCompletionRequest(chatBody(undefined), { currentDate: null }).tokens)
  t.is(renderResponsesRequest({ model: 'm', input: 'x', text: { format: { type: 'text' } } }).responseFormat, undefined)
})

test('a schema the grammars cannot enforce is a 400 naming the keyword by its path', (t) => {
  const refused = (schema: unknown, param: string) => {
    const error = t.throws(() => renderChatCompletionRequest(chatBody({ type: 'json_schema', json_schema: { name: 'x', schema } })), {
      instanceOf: HarmonyRequestError,
    })
    t.is(error?.param, `response_format.json_schema.schema${param}`, JSON.stringify(schema))
    t.is(error?.status, 400)
  }
  refused({ type: 'object', not: { type: 'null' } }, '.not')
  refused({ type: 'object', properties: { a: { type: 'number', minimum: 1 } } }, '.properties.a.minimum')
  refused({ type: 'object', properties: { a: { type: 'integer', exclusiveMaximum: 9 } } }, '.properties.a.exclusiveMaximum')
  refused({ type: 'object', properties: { a: { type: 'string', pattern: '^a$' } } }, '.properties.a.pattern')
  refused({ type: 'object', properties: { a: { $ref: '#/$defs/b', type: 'string' } }, $defs: { b: {} } }, '.properties.a.type')
  refused({ type: 'object', properties: { a: false } }, '.properties.a')
  refused({ type: 'object', properties: {}, required: ['ghost'] }, '.required')
  refused({ type: 'array', maxItems: -1 }, '.maxItems')
  refused({ type: 'object', properties: { a: {} }, additionalProperties: { type: 'number' } }, '.additionalProperties')
  refused({ type: 'object', properties: { a: { type: 'string', format: 'hostname' } } }, '.properties.a.format')
  refused({ type: 'array', items: { $ref: '#/$defs/missing' } }, '.items.$ref')
  refused({ anyOf: [] }, '.anyOf')
  refused({ type: 'object', properties: { a: { type: 'string', if: {} } } }, '.properties.a.if')
  refused({ type: 'array', uniqueItems: true }, '.uniqueItems')
  refused({ type: 'thing' }, '.type')
  // Schemas that would make a grammar builder or the validator loop or explode, named at the schema.
  const cycle = t.throws(() =>
    renderChatCompletionRequest(
      chatBody({
        type: 'json_schema',
        json_schema: {
          name: 'x',
          schema: { $ref: '#/$defs/a', $defs: { a: { $ref: '#/$defs/b' }, b: { anyOf: [{ $ref: '#/$defs/a' }] } } },
        },
      }),
    ),
  )
  t.regex(cycle?.message ?? '', /^response_format\.json_schema\.schema: a \$ref cycle never reaches a property or item/)
  const doubling: Record<string, unknown> = { d40: { type: 'string' } }
  for (let i = 0; i < 40; i++) doubling[`d${i}`] = { anyOf: [{ $ref: `#/$defs/d${i + 1}` }, { $ref: `#/$defs/d${i + 1}` }] }
  refused({ $ref: '#/$defs/d0', $defs: doubling }, '')
  const chain: Record<string, unknown> = { c600: { type: 'string' } }
  for (let i = 0; i < 600; i++) chain[`c${i}`] = { type: 'object', properties: { next: { $ref: `#/$defs/c${i + 1}` } } }
  refused({ $ref: '#/$defs/c0', $defs: chain }, '')
  // A named schema (a root $ref beside its $defs, as zod-to-json-schema writes one) and recursion through a property are taken.
  const named = { $ref: '#/$defs/list', $defs: { list: { type: 'object', properties: { next: { $ref: '#/$defs/list' } } } } }
  t.notThrows(() => renderChatCompletionRequest(chatBody({ type: 'json_schema', json_schema: { name: 'named', schema: named } })))
  // What both grammars enforce is taken: $defs and references (recursive too), anyOf, lengths, formats.
  const tree = {
    type: 'object',
    $defs: { node: { type: 'object', properties: { children: { type: 'array', items: { $ref: '#/$defs/node' } } } } },
    properties: {
      root: { $ref: '#/$defs/node' },
      when: { type: 'string', format: 'date-time' },
      n: { type: ['integer', 'null'] },
      code: { type: 'string', minLength: 3, maxLength: 3 },
      open: { type: 'object', additionalProperties: { type: 'number' } },
      closed: { type: 'array', prefixItems: [{ type: 'null' }], items: false },
      pair: { type: 'array', prefixItems: [{ type: 'string' }, { type: 'boolean' }], minItems: 2, maxItems: 2 },
      kind: { anyOf: [{ const: 'a' }, { type: 'null' }], description: 'annotations are taken', title: 'Kind' },
    },
  }
  t.notThrows(() => renderChatCompletionRequest(chatBody({ type: 'json_schema', json_schema: { name: 'tree', schema: tree } })))
})

test('response formats of the wrong shape are 400s naming the field', (t) => {
  const param = (body: object, render = renderChatCompletionRequest) =>
    t.throws(() => render(body as never), { instanceOf: HarmonyRequestError })?.param
  t.is(param(chatBody({ type: 'xml' })), 'response_format.type')
  t.is(param(chatBody({ type: 'json_schema' })), 'response_format.json_schema')
  t.is(param(chatBody({ type: 'json_schema', json_schema: { name: 'has space', schema: {} } })), 'response_format.json_schema.name')
  t.is(param(chatBody({ type: 'json_schema', json_schema: { name: 'a', schema: [] } })), 'response_format.json_schema.schema')
  t.is(param(chatBody({ type: 'json_schema', json_schema: { name: 'a', strict: 'yes' } })), 'response_format.json_schema.strict')
  t.is(
    param({ model: 'm', input: 'x', text: { format: { type: 'json_schema', schema: SCHEMA } } }, renderResponsesRequest as never),
    'text.format.name',
  )
})

const answer = (json: string) =>
  harmony(`<|channel|>analysis<|message|>Water makes things wet.<|end|><|start|>assistant<|channel|>final<|message|>${json}<|return|>`)

const FORMAT = { name: 'verdict', schema: SCHEMA }

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: an answer that is not the schema's JSON gets an invalid-structured-output diagnostic, on both APIs`, (t) => {
    const cases: [string, string | null][] = [
      ['{"answer":"yes","confidence":90}', null],
      ['{"confidence":90,"answer":"no"}', null],
      ['{"answer":"maybe","confidence":90}', 'does not match the schema: /answer Instance does not match any of ["yes","no"].'],
      ['{"answer":"yes"}', 'does not match the schema: / Instance does not have required property "confidence".'],
      ['{"answer":"yes","confidence":90', 'is not valid JSON'],
      ['Yes, it is.', 'is not valid JSON'],
    ]
    for (const [json, problem] of cases) {
      const options = { model: 'm', parser: { implementation }, responseFormat: FORMAT }
      const chat = chatCompletion(answer(json), options)
      const response = responseObject(answer(json), options)
      for (const diagnostics of [chat.diagnostics, response.diagnostics]) {
        const found = diagnostics.filter((d) => d.code === 'invalid-structured-output')
        if (problem === null) t.deepEqual(found, [], json)
        else {
          t.is(found.length, 1, json)
          t.is(found[0]!.message, `the answer (response format verdict) ${problem}`)
          t.is(found[0]!.text, json)
        }
      }
      // The answer is delivered as it was generated, valid or not.
      t.is(chat.choices[0]!.message.content, json)
    }
  })

  test(`${implementation}: streamed adapters check the answer when it closes, whatever the batching; reasoning is not checked`, (t) => {
    const tokens = answer('{"answer":"no","confidence":"high"}')
    for (const batch of [1, 3, tokens.length]) {
      for (const adapter of [
        new ChatCompletionsStream({ model: 'm', parser: { implementation }, responseFormat: FORMAT }),
        new ResponsesStream({ model: 'm', parser: { implementation }, responseFormat: FORMAT }),
      ]) {
        for (let i = 0; i < tokens.length; i += batch) adapter.push(tokens.slice(i, i + batch))
        adapter.finish()
        const found = adapter.diagnostics.filter((d) => d.code === 'invalid-structured-output')
        t.is(found.length, 1)
        t.regex(found[0]!.message, /\/confidence Instance type "string" is invalid. Expected "integer"/)
      }
    }
  })
}

test('the responseFormat option is checked like every adapter option', (t) => {
  t.throws(() => new ChatCompletionsStream({ model: 'm', responseFormat: { name: 'x' } as never }), {
    instanceOf: TypeError,
    message: /responseFormat/,
  })
  t.throws(() => new ResponsesStream({ model: 'm', responseFormat: { name: 'x', schema: [] } as never }), { instanceOf: TypeError })
})

test('patterns are left to the grammar: the check never runs a client-written regular expression', (t) => {
  // A pattern that backtracks exponentially on this input in JavaScript: checked, it would hold the event loop.
  // Requests with a pattern are refused; a gateway can still hand the adapters any schema.
  const format = { name: 'p', schema: { type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } } }
  const chat = chatCompletion(answer(JSON.stringify({ s: `${'a'.repeat(40)}!` })), { model: 'm', responseFormat: format })
  t.deepEqual(
    chat.diagnostics.filter((d) => d.code === 'invalid-structured-output'),
    [],
  )
  // (Were the pattern run, this test would not end before ava's timeout: 2^40 ways to split the a's.)
})

test('through the example gateway: the format reaches the engine and the adapters, inline and from a render worker', async (t) => {
  const requests: GenerateRequest[] = []
  // An engine that writes prose where JSON was asked for: the gateway answers 200 and reports the answer.
  const engine: Engine = {
    name: 'prose',
    async *generate(request) {
      requests.push(request)
      yield { tokens: Uint32Array.from(harmony('<|channel|>final<|message|>Yes, it is.<|return|>')), finishReason: 'stop' }
    },
  }
  for (const renderWorkers of [0, 1]) {
    const diagnostics: { code: string }[] = []
    const { client } = await startGateway(t, {
      engine,
      renderWorkers,
      renderInlineBytes: 0,
      onDiagnostic: (d: { code: string }) => diagnostics.push(d),
    })
    const completion = await client.chat.completions.create(chatBody(JSON_SCHEMA_FORMAT) as never)
    t.is(completion.choices[0]!.message.content, 'Yes, it is.')
    const response = await client.responses.create({
      model: 'gpt-oss',
      input: 'Is water wet?',
      text: { format: { type: 'json_schema', name: 'verdict', schema: SCHEMA } },
    })
    t.deepEqual(response.text?.format, { type: 'json_schema', name: 'verdict', schema: SCHEMA })
    t.deepEqual(
      diagnostics.map((d) => d.code),
      ['invalid-structured-output', 'invalid-structured-output'],
      `renderWorkers ${renderWorkers}`,
    )
  }
  t.is(requests.length, 4)
  for (const request of requests) t.deepEqual(request.responseFormat?.schema, SCHEMA)
})

const WEATHER = { type: 'object', properties: { city: { enum: ['Paris', 'Rome'] } }, required: ['city'], additionalProperties: false }

test('strict tools: their schemas go with the prompt (all offered functions listed), checked like response formats', (t) => {
  const tools = [
    { type: 'function', function: { name: 'get_weather', parameters: WEATHER, strict: true } },
    { type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string', pattern: 'x' } } } } },
    { type: 'function', function: { name: 'ping', strict: true } },
  ]
  const prompt = renderChatCompletionRequest(chatBody(undefined, { tools }))
  t.deepEqual(prompt.argumentSchemas, [
    { name: 'get_weather', schema: WEATHER },
    // Not strict: free, whatever its schema holds.
    { name: 'lookup', schema: null },
    // Strict without parameters: an empty object.
    { name: 'ping', schema: { type: 'object', properties: {}, additionalProperties: false } },
  ])
  // No strict tool, or no tool offered: nothing to enforce.
  t.is(renderChatCompletionRequest(chatBody(undefined, { tools: [tools[1]] })).argumentSchemas, undefined)
  t.is(renderChatCompletionRequest(chatBody(undefined, { tools, tool_choice: 'none' })).argumentSchemas, undefined)
  const responses = renderResponsesRequest({
    model: 'm',
    input: 'x',
    tools: [{ type: 'function', name: 'get_weather', parameters: WEATHER, strict: true }],
  })
  t.deepEqual(responses.argumentSchemas, [{ name: 'get_weather', schema: WEATHER }])
  const param = (body: object, render = renderChatCompletionRequest) =>
    t.throws(() => render(body as never), { instanceOf: HarmonyRequestError })?.param
  const strictPattern = {
    type: 'function',
    function: { name: 'f', strict: true, parameters: { type: 'object', properties: { q: { type: 'string', pattern: '^x$' } } } },
  }
  t.is(param(chatBody(undefined, { tools: [strictPattern] })), 'tools[0].function.parameters.properties.q.pattern')
  t.is(param(chatBody(undefined, { tools: [{ type: 'function', function: { name: 'f', strict: 'yes' } }] })), 'tools[0].function.strict')
})

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: a strict tool's arguments that do not match its schema get an invalid-tool-arguments diagnostic`, (t) => {
    const call = (args: string) => harmony(`<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>${args}<|call|>`)
    const options = {
      model: 'm',
      parser: { implementation, toolNames: ['functions.get_weather'] },
      argumentSchemas: [{ name: 'get_weather', schema: WEATHER }],
    }
    for (const [args, problem] of [
      ['{"city":"Paris"}', null],
      ['{"city":"Oslo"}', /\(strict\) does not match the schema: \/city Instance does not match any of/],
      ['{"town":"Paris"}', /\/ Property "town" does not match additional properties schema/],
    ] as const) {
      for (const diagnostics of [chatCompletion(call(args), options).diagnostics, responseObject(call(args), options).diagnostics]) {
        const found = diagnostics.filter((d) => d.code === 'invalid-tool-arguments')
        if (problem === null) t.deepEqual(found, [], args)
        else {
          t.is(found.length, 1, args)
          t.regex(found[0]!.message, problem)
          t.truthy(found[0]!.toolCallId)
        }
      }
    }
  })
}

/** The SCHEMA as the Agents SDK and the AI SDK send it: draft-07, its enum behind a `$ref` into `definitions`. */
const DRAFT_07 = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  type: 'object',
  properties: { answer: { $ref: '#/definitions/answer' }, confidence: { type: 'integer' } },
  required: ['answer', 'confidence'],
  additionalProperties: false,
  definitions: { answer: { type: 'string', enum: ['yes', 'no'] } },
}

test('a schema is checked whatever its draft: draft-07, 2019-09 and 2020-12 by the matching validator', (t) => {
  const drafts: Record<string, unknown>[] = [
    DRAFT_07,
    // The same drafts by their other spellings (https, http, with or without the empty fragment).
    { ...DRAFT_07, $schema: 'https://json-schema.org/draft-07/schema' },
    { ...SCHEMA, $schema: 'https://json-schema.org/draft/2019-09/schema' },
    { ...SCHEMA, $schema: 'http://json-schema.org/draft/2019-09/schema#' },
    { ...SCHEMA, $schema: 'https://json-schema.org/draft/2020-12/schema' },
    { ...SCHEMA, $schema: 'http://json-schema.org/draft/2020-12/schema#' },
    // Two schemas with one $id: each checked as itself.
    { ...SCHEMA, $id: 'https://example.com/verdict' },
    { ...SCHEMA, $id: 'https://example.com/verdict', title: 'another' },
    SCHEMA,
  ]
  for (const schema of drafts) {
    const options = { model: 'm', responseFormat: { name: 'verdict', schema } }
    const good = chatCompletion(answer('{"answer":"yes","confidence":90}'), options)
    t.deepEqual(good.diagnostics, [], String(schema.$schema))
    const bad = chatCompletion(answer('{"answer":"maybe","confidence":90}'), options)
    t.regex(
      bad.diagnostics[0]?.message ?? '',
      /does not match the schema: \/answer Instance does not match any of \["yes","no"\]/,
      String(schema.$schema),
    )
  }
})

test('a schema that cannot be checked is a 400 naming it before anything is generated, inline and from a render worker', async (t) => {
  const prompts: number[][] = []
  const engine: Engine = {
    name: 'recording',
    async *generate(request: GenerateRequest) {
      prompts.push(Array.from(request.tokens))
      yield { tokens: Uint32Array.from(answer('{"answer":"yes","confidence":90}')) }
    },
  }
  for (const renderWorkers of [0, 1]) {
    const { client } = await startGateway(t, { engine, renderWorkers, renderInlineBytes: 0, onDiagnostic: () => {} })
    const draft04 = { ...SCHEMA, $schema: 'http://json-schema.org/draft-04/schema#' }
    const chatRefusal = await t.throwsAsync(
      client.chat.completions.create({
        model: 'gpt-oss',
        messages: [{ role: 'user', content: 'Is water wet?' }],
        response_format: { type: 'json_schema', json_schema: { name: 'verdict', schema: draft04 } },
      }),
    )
    t.like(chatRefusal, { status: 400, param: 'response_format.json_schema.schema', code: 'invalid_parameter' })
    t.regex((chatRefusal as Error).message, /draft-04.*is not a draft this gateway checks/)
    const responsesRefusal = await t.throwsAsync(
      client.responses.create({
        model: 'gpt-oss',
        input: 'Is water wet?',
        text: { format: { type: 'json_schema', name: 'verdict', schema: draft04 } },
      }),
    )
    t.like(responsesRefusal, { status: 400, param: 'text.format.schema' })
    // A schema too large to check.
    const huge = { anyOf: Array.from({ length: 20_001 }, () => ({})) }
    const hugeRefusal = await t.throwsAsync(
      client.responses.create({ model: 'gpt-oss', input: 'Hi', text: { format: { type: 'json_schema', name: 'huge', schema: huge } } }),
    )
    t.regex((hugeRefusal as Error).message, /more than 20000 objects and arrays/)
    t.is(prompts.length, 0, 'nothing was generated')
    const draft07 = await client.responses.create({
      model: 'gpt-oss',
      input: 'Is water wet?',
      text: { format: { type: 'json_schema', name: 'verdict', schema: DRAFT_07 } },
    })
    t.is(draft07.output_text, '{"answer":"yes","confidence":90}')
    prompts.length = 0
  }
})
