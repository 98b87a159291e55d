/**
 * Responses objects that tell the truth (issue 20 item 6): every `response` (the streamed snapshots, the
 * non-streamed object, the adapter's own) has every field the Open Responses specification's ResponseResource
 * requires, each of the type it gives, and says what its request asked for; a stream that fails midway ends
 * with the `error` event in both shapes (the specification's nested one, the openai package's flat one) and
 * `response.failed`; the example gateway's unknown route is a 404 of type `not_found`.
 */
import test from 'ava'
import { type Implementation, type ResponseEvent, type ResponseObject, ResponsesStream, responseObject } from 'harmony-stream'
import { responsesFrames } from 'harmony-stream/http'
import OpenAI from 'openai'
import type { ResponseCreateParamsNonStreaming, ResponseCreateParamsStreaming } from 'openai/resources/responses/responses'

import { failingEngine, startGateway } from '../helpers/gateway.mjs'
import { harmony, IMPLEMENTATIONS } from '../helpers/harmony.mjs'

type Check = (value: unknown) => boolean
type Fields = Record<string, unknown>

const isObject = (value: unknown): value is Fields => value !== null && typeof value === 'object' && !Array.isArray(value)
const isString: Check = (value) => typeof value === 'string'
const isNumber: Check = (value) => typeof value === 'number' && Number.isFinite(value)
const isInteger: Check = (value) => Number.isSafeInteger(value)
const isBoolean: Check = (value) => typeof value === 'boolean'
const orNull =
  (check: Check): Check =>
  (value) =>
    value === null || check(value)
const oneOf =
  (...values: unknown[]): Check =>
  (value) =>
    values.includes(value)
const has = (value: unknown, fields: Record<string, Check>): boolean =>
  isObject(value) && Object.entries(fields).every(([name, check]) => Object.hasOwn(value, name) && check(value[name]))

// The schemas below are those of the Open Responses specification, openresponses/openresponses
// public/openapi/openapi.json (version 2026-04-24), components.schemas: each field's type as written there.
const TOOL_CHOICE_VALUE = oneOf('none', 'auto', 'required') // ToolChoiceValueEnum
const FUNCTION_TOOL: Record<string, Check> = {
  // FunctionTool (Tool is FunctionTool): required type, name, description, parameters, strict.
  type: oneOf('function'),
  name: isString,
  description: orNull(isString),
  parameters: orNull(isObject),
  strict: orNull(isBoolean),
}
const USAGE: Record<string, Check> = {
  input_tokens: isInteger,
  output_tokens: isInteger,
  total_tokens: isInteger,
  input_tokens_details: (value) => has(value, { cached_tokens: isInteger }),
  output_tokens_details: (value) => has(value, { reasoning_tokens: isInteger }),
}
/** ItemField: Message, FunctionCall, ReasoningBody (the items a gpt-oss response has), by their required fields. */
const ITEM: Check = (item) =>
  isObject(item) &&
  (item.type === 'message'
    ? has(item, {
        type: isString,
        id: isString,
        status: oneOf('in_progress', 'completed', 'incomplete'),
        role: isString,
        content: Array.isArray,
      })
    : item.type === 'function_call'
      ? has(item, {
          type: isString,
          id: isString,
          call_id: isString,
          name: isString,
          arguments: isString,
          status: oneOf('in_progress', 'completed', 'incomplete'),
        })
      : has(item, { type: oneOf('reasoning'), id: isString, summary: Array.isArray }))

/** ResponseResource: its `required` list, in its order, each with the type of its `properties` entry. */
const RESPONSE_RESOURCE: Record<string, Check> = {
  id: isString,
  object: oneOf('response'),
  created_at: isInteger,
  completed_at: orNull(isInteger),
  status: isString,
  incomplete_details: orNull((value) => has(value, { reason: isString })),
  model: isString,
  previous_response_id: orNull(isString),
  instructions: orNull(isString),
  output: (value) => Array.isArray(value) && value.every(ITEM),
  error: orNull((value) => has(value, { code: isString, message: isString })),
  tools: (value) => Array.isArray(value) && value.every((tool) => has(tool, FUNCTION_TOOL)),
  tool_choice: (value) =>
    TOOL_CHOICE_VALUE(value) ||
    has(value, { type: oneOf('function') }) ||
    has(value, { type: oneOf('allowed_tools'), tools: Array.isArray, mode: TOOL_CHOICE_VALUE }),
  truncation: oneOf('auto', 'disabled'),
  parallel_tool_calls: isBoolean,
  text: (value) => has(value, { format: (format) => has(format, { type: oneOf('text', 'json_object', 'json_schema') }) }),
  top_p: isNumber,
  presence_penalty: isNumber,
  frequency_penalty: isNumber,
  top_logprobs: isInteger,
  temperature: isNumber,
  reasoning: orNull((value) =>
    has(value, {
      effort: orNull(oneOf('none', 'low', 'medium', 'high', 'xhigh')),
      summary: orNull(oneOf('concise', 'detailed', 'auto')),
    }),
  ),
  usage: orNull((value) => has(value, USAGE)),
  max_output_tokens: orNull(isInteger),
  max_tool_calls: orNull(isInteger),
  store: isBoolean,
  background: isBoolean,
  service_tier: isString,
  // The specification gives `metadata` no type; OpenAI's Metadata is an object of strings.
  metadata: (value) => isObject(value) && Object.values(value).every(isString),
  safety_identifier: orNull(isString),
  prompt_cache_key: orNull(isString),
}

/** What a response lacks or has of the wrong type, by the specification (empty: it conforms). */
function specViolations(response: unknown): string[] {
  if (!isObject(response)) return ['not an object']
  return Object.entries(RESPONSE_RESOURCE).flatMap(([name, check]) =>
    !Object.hasOwn(response, name) ? [`${name}: missing`] : check(response[name]) ? [] : [`${name}: ${JSON.stringify(response[name])}`],
  )
}

test('the checker: 31 required fields; a response as this package wrote it before (15 missing, nulls) fails', (t) => {
  t.is(Object.keys(RESPONSE_RESOURCE).length, 31)
  t.is(specViolations({}).length, 31)
  const response: Fields = { ...new ResponsesStream({ model: 'm' }).response() }
  t.deepEqual(specViolations(response), [])
  const missing = ['completed_at', 'previous_response_id', 'truncation', 'text', 'presence_penalty', 'frequency_penalty']
  for (const name of missing) delete response[name]
  Object.assign(response, { temperature: null, top_p: null, tools: [{ type: 'function', name: 'f' }] })
  t.deepEqual(specViolations(response), [
    'completed_at: missing',
    'previous_response_id: missing',
    'tools: [{"type":"function","name":"f"}]',
    'truncation: missing',
    'text: missing',
    'top_p: null',
    'presence_penalty: missing',
    'frequency_penalty: missing',
    'temperature: null',
  ])
})

/** The error event's payload and response.failed's, by the specification (ErrorPayload, Error). */
const ERROR_PAYLOAD: Record<string, Check> = { type: isString, code: orNull(isString), message: isString, param: orNull(isString) }

const COMPLETION = harmony(
  '<|channel|>analysis<|message|>Think first.<|end|><|start|>assistant<|channel|>final<|message|>Hello there.<|return|>',
)
const CALL = harmony('<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>')

/** A request that sets every field the response echoes (and the example gateway takes). */
const FULL_REQUEST = {
  model: 'gpt-oss',
  input: 'What is the weather in Paris?',
  instructions: 'Answer briefly.',
  tools: [
    {
      type: 'function',
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      strict: true,
    },
    // No description, parameters or strict: the response lists them as null.
    { type: 'function', name: 'get_time' },
  ],
  tool_choice: 'auto',
  temperature: 0.25,
  top_p: 0.5,
  presence_penalty: 0.75,
  frequency_penalty: -0.5,
  max_output_tokens: 300,
  metadata: { run: '42', team: 'wire' },
  parallel_tool_calls: false,
  reasoning: { effort: 'low', summary: 'auto' },
  text: { format: { type: 'text' } },
  truncation: 'disabled',
  store: true,
  service_tier: 'auto',
  safety_identifier: 'user-hash-1',
  prompt_cache_key: 'cache-1',
  user: 'someone',
  top_logprobs: 0,
} as const

/** What a response to FULL_REQUEST must say of it. */
const FULL_ECHO = {
  instructions: 'Answer briefly.',
  tools: [{ ...FULL_REQUEST.tools[0] }, { type: 'function', name: 'get_time', description: null, parameters: null, strict: null }],
  tool_choice: 'auto',
  temperature: 0.25,
  top_p: 0.5,
  presence_penalty: 0.75,
  frequency_penalty: -0.5,
  max_output_tokens: 300,
  metadata: { run: '42', team: 'wire' },
  parallel_tool_calls: false,
  reasoning: { effort: 'low', summary: 'auto' },
  text: { format: { type: 'text' } },
  truncation: 'disabled',
  // An adapter alone keeps nothing, whatever the request asked (its `stored` option says when a gateway did);
  // the one tier is the default one.
  store: false,
  background: false,
  service_tier: 'default',
  safety_identifier: 'user-hash-1',
  prompt_cache_key: 'cache-1',
  user: 'someone',
  top_logprobs: 0,
  max_tool_calls: null,
  previous_response_id: null,
}

/** What a response to a request that sets none of them says: OpenAI's defaults. */
const DEFAULT_ECHO = {
  instructions: null,
  tools: [],
  tool_choice: 'auto',
  temperature: 1,
  top_p: 1,
  presence_penalty: 0,
  frequency_penalty: 0,
  max_output_tokens: null,
  metadata: {},
  parallel_tool_calls: true,
  reasoning: { effort: null, summary: null },
  text: { format: { type: 'text' } },
  truncation: 'disabled',
  store: false,
  background: false,
  service_tier: 'default',
  safety_identifier: null,
  prompt_cache_key: null,
  user: null,
  top_logprobs: 0,
  max_tool_calls: null,
  previous_response_id: null,
}

function pick(response: object, like: object): Fields {
  return Object.fromEntries(Object.keys(like).map((name) => [name, (response as Fields)[name]]))
}

/** The SSE text's events, parsed back. */
function eventsOf(sse: string): ResponseEvent[] {
  return sse
    .trim()
    .split('\n\n')
    .map((frame) => {
      const [event, data] = frame.split('\n')
      const parsed = JSON.parse(data.slice('data: '.length)) as ResponseEvent
      if (event !== `event: ${parsed.type}`) throw new Error(`frame ${frame.slice(0, 80)} names another type`)
      return parsed
    })
}

const snapshots = (events: readonly ResponseEvent[]) =>
  events.filter((e) => e.type.startsWith('response.') && 'response' in e).map((e) => e.response as ResponseObject)

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: every snapshot, response() and responseObject have every ResponseResource field, echoing the request`, (t) => {
    // completedAt fixed: the adapters below must give the same bytes however long the machine takes.
    const options = {
      model: 'gpt-oss',
      id: 'resp_echo',
      createdAt: 1_700_000_000,
      completedAt: 1_700_000_002,
      request: FULL_REQUEST,
      parser: { implementation },
    }
    const stream = new ResponsesStream(options)
    const events = [...stream.start(), ...stream.push(COMPLETION), ...stream.finish()]
    const responses = snapshots(events)
    t.deepEqual(
      responses.map((r) => r.status),
      ['in_progress', 'in_progress', 'completed'],
    )
    const whole = responseObject(COMPLETION, options)
    for (const [name, response] of [
      ...responses.map((r, i) => [`snapshot ${i}`, r] as const),
      ['response()', stream.response()] as const,
      ['responseObject', whole] as const,
    ]) {
      t.deepEqual(specViolations(response), [], name)
      t.deepEqual(pick(response, FULL_ECHO), FULL_ECHO, name)
    }
    // completed_at: null until it completed; then the option's.
    t.deepEqual(
      responses.map((r) => r.completed_at),
      [null, null, 1_700_000_002],
    )
    t.is(whole.completed_at, 1_700_000_002)
    // Without it: createdAt plus the whole seconds the adapter took (bounded by what this test measured).
    const started = performance.now()
    const timed = new ResponsesStream({ ...options, completedAt: undefined })
    const completedAt = snapshots([...timed.push(COMPLETION), ...timed.finish()]).at(-1)!.completed_at!
    t.true(
      completedAt >= 1_700_000_000 && completedAt <= 1_700_000_000 + Math.ceil((performance.now() - started) / 1000),
      String(completedAt),
    )
    t.deepEqual(responses[2], stream.response())

    // The SSE face writes the same bytes as the objects' JSON, the echoed fields included.
    const sse = new ResponsesStream(options)
    t.is(sse.startSse() + sse.pushSse(COMPLETION) + sse.finishSse(), responsesFrames(events))
  })

  test(`${implementation}: a response to a request that sets nothing says OpenAI's defaults; the clock gives completed_at`, (t) => {
    const before = Math.floor(Date.now() / 1000)
    const stream = new ResponsesStream({ model: 'gpt-oss', parser: { implementation } })
    const events = [...stream.push(COMPLETION), ...stream.finish()]
    const completed = snapshots(events).at(-1)!
    t.deepEqual(specViolations(completed), [])
    t.deepEqual(pick(completed, DEFAULT_ECHO), DEFAULT_ECHO)
    t.true(completed.completed_at! >= completed.created_at && completed.created_at >= before)
    t.true(completed.completed_at! <= Math.floor(Date.now() / 1000))
    // The option `tools` alone is what the response lists when no request is given.
    const tools = [{ type: 'function', name: 'get_weather', parameters: { type: 'object' } }]
    const withTools = new ResponsesStream({ model: 'gpt-oss', tools, parser: { implementation } })
    t.deepEqual(withTools.response().tools, [{ ...tools[0], description: null, strict: null }])
    // Chat's shape of a function tool is listed in the Responses shape.
    const chatShaped = new ResponsesStream({
      model: 'gpt-oss',
      request: { tools: [{ type: 'function', function: { name: 'f', description: 'd', parameters: { type: 'object' } } }] },
      parser: { implementation },
    })
    t.deepEqual(chatShaped.response().tools, [
      { type: 'function', name: 'f', description: 'd', parameters: { type: 'object' }, strict: null },
    ])
  })

  test(`${implementation}: an incomplete response has incomplete_details and no completed_at`, (t) => {
    const stream = new ResponsesStream({ model: 'gpt-oss', request: FULL_REQUEST, parser: { implementation } })
    const events = [...stream.push(COMPLETION.slice(0, -3)), ...stream.finish({ truncated: true })]
    const last = events.at(-1)!
    t.is(last.type, 'response.incomplete')
    const response = last.response as ResponseObject
    t.deepEqual(specViolations(response), [])
    t.is(response.status, 'incomplete')
    t.deepEqual(response.incomplete_details, { reason: 'max_output_tokens' })
    t.is(response.completed_at, null)
    t.deepEqual(pick(response, FULL_ECHO), FULL_ECHO)
  })

  test(`${implementation}: error() is the error event in both shapes, then response.failed with the items cut where they were`, (t) => {
    const stream = new ResponsesStream({ model: 'gpt-oss', id: 'resp_fail', request: FULL_REQUEST, parser: { implementation } })
    const before = [
      ...stream.push(harmony('<|channel|>analysis<|message|>Thinking<|end|><|start|>assistant<|channel|>final<|message|>Hel')),
    ]
    const events = stream.error('the inference engine failed', 'engine-connection-error')
    t.deepEqual(
      events.map((e) => e.type),
      ['error', 'response.failed'],
    )
    t.deepEqual(
      events.map((e) => e.sequence_number),
      [before.length, before.length + 1],
    )
    const [error, failed] = events
    // The specification's ErrorStreamingEvent nests the error; the openai package's ResponseErrorEvent is flat.
    t.true(has(error, { type: oneOf('error'), sequence_number: isInteger, error: (e) => has(e, ERROR_PAYLOAD) }))
    t.true(
      has(error, { type: oneOf('error'), sequence_number: isInteger, code: orNull(isString), message: isString, param: orNull(isString) }),
    )
    t.deepEqual(error.error, { type: 'server_error', code: 'engine-connection-error', message: 'the inference engine failed', param: null })
    t.like(error, { code: 'engine-connection-error', message: 'the inference engine failed', param: null })

    const response = failed.response as ResponseObject
    t.deepEqual(specViolations(response), [])
    t.is(response.status, 'failed')
    t.deepEqual(response.error, { code: 'engine-connection-error', message: 'the inference engine failed' })
    t.is(response.completed_at, null)
    t.deepEqual(pick(response, FULL_ECHO), FULL_ECHO)
    // The reasoning item closed; the message item never did: incomplete, with the text sent so far.
    t.deepEqual(
      response.output.map((item) => [item.type, 'status' in item ? item.status : null]),
      [
        ['reasoning', 'completed'],
        ['message', 'incomplete'],
      ],
    )
    t.deepEqual(response.output[1], {
      id: 'msg_fail_1',
      type: 'message',
      role: 'assistant',
      status: 'incomplete',
      content: [{ type: 'output_text', text: 'Hel', annotations: [], logprobs: [] }],
    })
    t.deepEqual(stream.response(), response)
    // The SSE face, whose fast lane wrote the second step's text without events: cut with all of it.
    const sse = new ResponsesStream({ model: 'gpt-oss', id: 'resp_fail', parser: { implementation } })
    const written = sse.pushSse(harmony('<|channel|>final<|message|>Hel')) + sse.pushSse(harmony('lo there'))
    t.regex(written, /"delta":"lo there"/)
    const cut = (sse.error('x')[1].response as ResponseObject).output[0]
    t.like(cut, { status: 'incomplete', content: [{ type: 'output_text', text: 'Hello there' }] })
    // Nothing follows.
    t.deepEqual(stream.finish(), [])
    t.throws(() => stream.push(harmony('lo')), { message: /after finish\(\), error\(\) or close\(\)/ })
  })

  test(`${implementation}: the example gateway's responses, streamed and not, have every field and echo the request`, async (t) => {
    const { client } = await startGateway(t, { replay: [COMPLETION, CALL], implementation, onDiagnostic: () => {} })
    for (const replay of ['0', '1']) {
      const headers = { headers: { 'x-harmony-replay': replay } }
      const events: ResponseEvent[] = []
      const stream = await client.responses.create({ ...FULL_REQUEST, stream: true } as unknown as ResponseCreateParamsStreaming, headers)
      for await (const event of stream) events.push(event as unknown as ResponseEvent)
      const streamed = snapshots(events)
      t.deepEqual(
        streamed.map((r) => r.status),
        ['in_progress', 'in_progress', 'completed'],
        `replay ${replay}`,
      )
      for (const response of streamed) {
        t.deepEqual(specViolations(response), [], `replay ${replay}: ${response.status}`)
        // The example gateway keeps responses (a store in memory by default): `store` says so.
        t.deepEqual(pick(response, FULL_ECHO), { ...FULL_ECHO, store: true }, `replay ${replay}`)
      }
      const completed = streamed[2]
      t.true(Number.isSafeInteger(completed.completed_at) && completed.completed_at! >= completed.created_at)

      const whole = (await client.responses.create(
        FULL_REQUEST as unknown as ResponseCreateParamsNonStreaming,
        headers,
      )) as unknown as ResponseObject
      t.deepEqual(specViolations(whole), [], `replay ${replay}: not streamed`)
      t.deepEqual(pick(whole, FULL_ECHO), { ...FULL_ECHO, store: true }, `replay ${replay}: not streamed`)
      t.is(whole.status, 'completed')
    }
    // A request that sets nothing: OpenAI's defaults (`store` true: kept, as OpenAI keeps it).
    const plain = (await client.responses.create(
      { model: 'gpt-oss', input: 'hi' },
      { headers: { 'x-harmony-replay': '0' } },
    )) as unknown as ResponseObject
    t.deepEqual(specViolations(plain), [])
    t.deepEqual(pick(plain, DEFAULT_ECHO), { ...DEFAULT_ECHO, store: true })
    // store: false is not kept, and says so.
    const unkept = (await client.responses.create(
      { model: 'gpt-oss', input: 'hi', store: false },
      { headers: { 'x-harmony-replay': '0' } },
    )) as unknown as ResponseObject
    t.false(unkept.store)
  })
}

test('a body rendered in a worker: the response echoes the generation parameters it came back with', async (t) => {
  const { client } = await startGateway(t, {
    replay: [COMPLETION],
    implementation: 'js',
    renderWorkers: 1,
    renderInlineBytes: 0,
    onDiagnostic: () => {},
  })
  const whole = (await client.responses.create(FULL_REQUEST as unknown as ResponseCreateParamsNonStreaming)) as unknown as ResponseObject
  t.deepEqual(specViolations(whole), [])
  t.like(whole, { temperature: 0.25, top_p: 0.5, presence_penalty: 0.75, frequency_penalty: -0.5, max_output_tokens: 300 })
})

test('the option request must be an object', (t) => {
  t.throws(() => new ResponsesStream({ model: 'm', request: 'x' as never }), { instanceOf: TypeError, message: /request/ })
  t.throws(() => responseObject([], { model: 'm', request: [] as never }), { instanceOf: TypeError, message: /request/ })
})

test('the example gateway ends a failing stream with the error event and response.failed; the openai client raises it', async (t) => {
  const errors: unknown[] = []
  const { port, client } = await startGateway(t, {
    engine: failingEngine,
    implementation: 'js' satisfies Implementation,
    onDiagnostic: () => {},
    onError: (e: unknown) => errors.push(e),
  })
  const answer = await fetch(`http://127.0.0.1:${port}/v1/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', input: 'hi', stream: true, metadata: { a: 'b' } }),
  })
  t.is(answer.status, 200)
  const events = eventsOf(await answer.text())
  t.deepEqual(
    events.slice(-2).map((e) => e.type),
    ['error', 'response.failed'],
  )
  const [error, failed] = events.slice(-2)
  const message = 'the connection to the inference engine failed'
  t.deepEqual(error.error, { type: 'server_error', code: 'engine_connection_error', message, param: null })
  t.like(error, { code: 'engine_connection_error', message, param: null })
  const response = failed.response as ResponseObject
  t.deepEqual(specViolations(response), [])
  t.like(response, { status: 'failed', error: { code: 'engine_connection_error', message }, metadata: { a: 'b' } })
  t.deepEqual(
    events.map((e) => e.sequence_number),
    events.map((_, i) => i),
  )

  // openai-node raises the event's nested `error` as an APIError, with its type and code.
  const raised = await t.throwsAsync(async () => {
    const stream = await client.responses.create({ model: 'm', input: 'hi', stream: true })
    for await (const event of stream) void event
  })
  t.true(raised instanceof OpenAI.APIError)
  t.like(raised, { type: 'server_error', code: 'engine_connection_error', message })
})

test("the example gateway's unknown route is a 404 of type not_found", async (t) => {
  const { port, client } = await startGateway(t, { replay: [COMPLETION], implementation: 'js', onDiagnostic: () => {} })
  const answer = await fetch(`http://127.0.0.1:${port}/v1/nothing-here`, { method: 'POST' })
  t.is(answer.status, 404)
  t.deepEqual(await answer.json(), {
    error: { message: 'no route for POST /v1/nothing-here', type: 'not_found', param: null, code: 'not_found' },
  })
  const raised = await t.throwsAsync(client.get('/nothing-here'))
  t.true(raised instanceof OpenAI.NotFoundError)
  t.like(raised, { status: 404, type: 'not_found' })
})
