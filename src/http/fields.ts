/**
 * Every field of a Chat Completions and a Responses request, classified (docs/API.md "Request fields" shows
 * the same tables): nothing a client sends is dropped without a word.
 *
 * - `honoured`: rendered into the prompt, sent to the engine, or echoed (each checked where it is read: the
 *   renderer for the conversation, `validate.ts` for the generation fields);
 * - `accepted`: it cannot change a gpt-oss generation (`user`, `metadata`, cache keys…), so it is taken as it
 *   is, its type checked; a preference gpt-oss has no control for (`verbosity`) is taken too, and said in the
 *   answer's `x-harmony-not-applied` header (`RenderedPrompt.notApplied`), never a 400 for a preference;
 * - `refused`: a 400 naming it, saying why, for any value but those that ask for nothing (`stop: null`,
 *   `logprobs: false`, `audio` absent…).
 *
 * Fields of the `openai` package's request types (ChatCompletionCreateParamsBase, ResponseCreateParamsBase)
 * are all here (a test fails when the pinned package gains one), plus the few that other servers' clients
 * send. Any other field is refused as OpenAI refuses it ("Unrecognized request argument supplied"), unless
 * the gateway chose `unknownFields: 'ignore'`.
 */
import { HttpError } from './errors'

export type FieldHandling = 'honoured' | 'accepted' | 'refused'

export interface RequestField {
  handling: FieldHandling
  /** What happens to it, or (refused) why. */
  note: string
  /** `accepted`: the JSON type a value must have (null is always taken). */
  type?: 'string' | 'boolean' | 'object' | 'number'
  /** `refused`: values that ask for nothing and are taken (null and absent always are). */
  allows?: (value: unknown) => boolean
}

const is =
  (...values: unknown[]) =>
  (value: unknown) =>
    values.includes(value)
const textOnly = (value: unknown) => Array.isArray(value) && value.length === 1 && value[0] === 'text'

/** A field taken and not applied: its value must be of `type`. */
export const accepted = (note: string, type: RequestField['type']): RequestField => ({ handling: 'accepted', note, type })
/** A field the gateway applies (checked where it is read). */
export const honoured = (note: string): RequestField => ({ handling: 'honoured', note })
/** A field refused (a 400) unless its value asks for nothing (`allows`). */
export const refused = (note: string, allows?: (value: unknown) => boolean): RequestField =>
  allows === undefined ? { handling: 'refused', note } : { handling: 'refused', note, allows }

const NOT_YET = 'not supported by this gateway yet'

/** The fields both APIs share, with the same meaning. */
const SHARED = {
  model: honoured('echoed in every chunk and object (at most 256 characters)'),
  stream: honoured('SSE or one object'),
  temperature: honoured('sent to the engine'),
  top_p: honoured('sent to the engine'),
  presence_penalty: honoured('sent to the engine (a 400 for an engine that does not apply it)'),
  frequency_penalty: honoured('sent to the engine (a 400 for an engine that does not apply it)'),
  tools: honoured(
    "function tools rendered into the developer message (a `strict: true` tool's arguments enforced by the engine); hosted ones (`web_search`, `file_search`, `mcp`, …) and client-run types not rendered yet (`custom`, `namespace`, …) left out and said (`hostedTools: 'refuse'`: a 400); other types refused",
  ),
  tool_choice: honoured(
    "'auto' offers the tools, 'none' does not; 'required' and a named function are held by the gateway: the model reasons, then the call is written for it to complete (`allowed_tools` refused)",
  ),
  parallel_tool_calls: accepted(
    'a gpt-oss turn ends at its first tool call (`<|call|>` stops generation), so at most one call is made either way',
    'boolean',
  ),
  user: accepted('cannot change a generation', 'string'),
  metadata: accepted('cannot change a generation', 'object'),
  safety_identifier: accepted('cannot change a generation', 'string'),
  prompt_cache_key: honoured(
    "a string: requests sharing it go to one engine of an `EngineGroup` (serve's `--engine-urls`) while it is healthy and not overloaded, so its prefix cache serves them; a single engine has nothing to route",
  ),
  prompt_cache_retention: accepted("the engines' prefix caches keep what they keep", 'string'),
  service_tier: accepted('one tier here', 'string'),
} as const satisfies Record<string, RequestField>

export const CHAT_REQUEST_FIELDS = Object.freeze({
  messages: honoured('rendered into the Harmony prompt'),
  ...SHARED,
  stream_options: honoured('`include_usage` adds the usage chunk; `include_obfuscation` is accepted (no obfuscation is added)'),
  max_tokens: honoured('sent to the engine, and held to by the gateway'),
  max_completion_tokens: honoured('as `max_tokens` (it wins when both are given)'),
  seed: honoured('sent to the engine'),
  n: honoured(
    '1 to 8 choices of the one prompt, each a generation of its own (seeded `seed` + its index), streamed interleaved by `index`, usage summed ([Several choices](#several-choices-n))',
  ),
  reasoning_effort: honoured(
    "the system message's `Reasoning:` level (low, medium, high); `none` and `minimal` run as low, `xhigh` as high, and said",
  ),
  store: refused('this gateway stores no chat completions', is(false)),
  audio: refused('gpt-oss reads and writes text only'),
  modalities: refused('gpt-oss writes text only', textOnly),
  function_call: refused("deprecated: use 'tool_choice'"),
  functions: refused("deprecated: use 'tools'"),
  logit_bias: honoured('sent to the engine by token id (a 400 for an engine that does not apply it)'),
  logprobs: honoured(
    "asked of the engine: each content token's log probability in `choices[].logprobs.content` (a 400 for an engine that cannot give them, and with `stop`)",
  ),
  top_logprobs: honoured('the alternatives per token, 0 to 20 (needs `logprobs: true`)'),
  prediction: refused('predicted outputs cannot be given to the engines'),
  response_format: honoured(
    "structured outputs: `json_schema` shown in the prompt's `# Response Formats`, enforced by the engine, the answer checked; `json_object` enforced",
  ),
  stop: honoured('the answer ends before the first stop string (never shown), finish reason stop, and the engine request ends'),
  verbosity: accepted('gpt-oss has no verbosity control: taken, and said', 'string'),
  web_search_options: refused('no built-in web search here'),
} as const satisfies Record<string, RequestField>)

export const RESPONSES_REQUEST_FIELDS = Object.freeze({
  input: honoured(
    'rendered into the Harmony prompt; an `item_reference` is the kept item it names (a gateway with a store; an unknown id: 404 naming `input[i].id`)',
  ),
  instructions: honoured("the developer message's instructions"),
  ...SHARED,
  tools: honoured(
    "function tools rendered into the developer message (a `strict: true` tool's arguments enforced by the engine); a `namespace` tool is a Harmony namespace of its own (its calls come back with their `namespace`); `code_interpreter` and `web_search` are gpt-oss's own `python` and `browser`, and `mcp` a remote MCP server's tools, run inside the response in a gateway that runs them; hosted ones (`web_search`, `file_search`, `mcp`, …) and client-run types not rendered yet (`custom`, `shell`, …) left out and said (`hostedTools: 'refuse'`: a 400); other types refused",
  ),
  max_output_tokens: honoured('sent to the engine, and held to by the gateway'),
  reasoning: honoured(
    "`effort` is the system message's `Reasoning:` level (`none`, `minimal` run as low, `xhigh` as high, and said); a `summary` asked for gives the raw reasoning as the reasoning item's summary parts too (gpt-oss writes no summary; 'concise' and 'detailed' said), by the gateway's `reasoningSummary` rule",
  ),
  // Not in OpenAI's Responses API; read as in Chat Completions, which some clients rely on (the Open Responses
  // specification has the penalties).
  seed: honoured('sent to the engine (an extension: Chat Completions has it)'),
  stream_options: accepted('no obfuscation is added', 'object'),
  store: honoured("default true: the response is kept in the gateway's response store (a gateway without one answers with store false)"),
  background: honoured(
    'true: run detached, answered at once as queued (or streamed, with stream: resumed with GET /v1/responses/{id}?stream=true&starting_after=N), polled with GET /v1/responses/{id}, cancelled with POST …/cancel; needs store (and a gateway that keeps responses)',
  ),
  conversation: honoured(
    "a conversation of the gateway's Conversations API (its id, or `{ id }`): its items come before the input, and the input and output are added to it after the response (a 404 naming it for an unknown id; with `previous_response_id`, a 400; a 400 where the gateway keeps no responses)",
  ),
  previous_response_id: honoured(
    "continues a stored response (its input, then its output, then this input; its instructions not carried over): OpenAI's 400 `previous_response_not_found` for an unknown id (the WebSocket mode's answer too), a 400 where the gateway keeps no responses",
  ),
  prompt: refused('no stored prompt templates here'),
  context_management: refused(NOT_YET),
  include: honoured(
    "'message.output_text.logprobs': the answer's log probabilities in its `output_text` parts and deltas; 'reasoning.encrypted_content': each reasoning item carries its reasoning sealed with the gateway's key, opened when a request sends the item back (for clients that keep nothing here, as Codex); 'code_interpreter_call.outputs': what python printed, in `code_interpreter_call` items (a gateway that runs python); anything else refused",
  ),
  text: honoured('`format` as Chat `response_format` (structured outputs); a `verbosity` is taken and said (gpt-oss has none)'),
  client_metadata: accepted('what a client says of itself (Codex sends it): cannot change a generation', 'object'),
  truncation: refused("the conversation is never cut to fit: 'disabled' only", is('disabled')),
  max_tool_calls: refused(NOT_YET),
  top_logprobs: honoured("the alternatives per token, 0 to 20, with `include: ['message.output_text.logprobs']` (echoed either way)"),
} as const satisfies Record<string, RequestField>)

/**
 * `POST /v1/responses/input_tokens`: the fields of the `openai` package's `InputTokenCountParams`
 * (resources/responses/input-tokens.d.ts), each read as `POST /v1/responses` reads it; the request's prompt is
 * counted, nothing generated. Any other field (`stream`, `store`, `max_output_tokens`…) is unknown here.
 */
export const INPUT_TOKENS_REQUEST_FIELDS = Object.freeze({
  model: honoured('optional (the gateway serves one model); checked as in a Responses request when given'),
  input: RESPONSES_REQUEST_FIELDS.input,
  instructions: RESPONSES_REQUEST_FIELDS.instructions,
  tools: RESPONSES_REQUEST_FIELDS.tools,
  tool_choice: honoured(
    "as in a Responses request: 'none' leaves the tools out of the prompt; a required call's headers, which the gateway writes for the model, are output (as the response's usage counts them), not input",
  ),
  parallel_tool_calls: RESPONSES_REQUEST_FIELDS.parallel_tool_calls,
  previous_response_id: honoured(
    "the stored response's prompt and output come first, as a continuation gives them to the engine (the ids it saw and generated, within a turn); an unknown id, or one another API key kept: 400 `previous_response_not_found`",
  ),
  conversation: honoured(
    "a conversation of the gateway's Conversations API (its id, or `{ id }`): its items are counted before the input, and nothing is added to it (a 404 naming it for an unknown id; with `previous_response_id`, a 400)",
  ),
  reasoning: honoured("`effort` is the system message's `Reasoning:` level, as in a Responses request"),
  text: RESPONSES_REQUEST_FIELDS.text,
  truncation: RESPONSES_REQUEST_FIELDS.truncation,
} as const satisfies Record<string, RequestField>)

/** `POST /v1/responses/compact` (Open Responses `CompactResponseMethodPublicBody`, and the `openai` package's `ResponseCompactParams`). */
const COMPACT_REQUEST_FIELDS = Object.freeze({
  model: honoured('required; checked as in a Responses request'),
  input: honoured('the conversation to compact, as a Responses input'),
  previous_response_id: honoured("the stored response's input and output come before `input`"),
  instructions: honoured('rendered to count the input tokens; not part of the compaction (a continuation sends its own)'),
  prompt_cache_key: accepted('the engine caches prompts by their ids, keys are not needed', 'string'),
  prompt_cache_retention: accepted('the engine decides how long it caches', 'string'),
  service_tier: accepted('one tier here', 'string'),
} as const satisfies Record<string, RequestField>)

export type RequestApi = 'chat' | 'responses' | 'input-tokens' | 'compact'

/** A table of an API's request fields: each field's handling. */
export type RequestFields = Readonly<Record<string, RequestField>>

const TABLES: Record<RequestApi, RequestFields> = {
  chat: CHAT_REQUEST_FIELDS,
  responses: RESPONSES_REQUEST_FIELDS,
  'input-tokens': INPUT_TOKENS_REQUEST_FIELDS,
  compact: COMPACT_REQUEST_FIELDS,
}

function refuse(param: string, message: string): never {
  throw new HttpError(400, message, { param, code: 'invalid-parameter' })
}

/**
 * Checks every top-level field of `body` against the API's table: a refused field with a value that asks for
 * something, an accepted one of the wrong type, or (unless `unknownFields` is `'ignore'`) a field the table
 * does not know is a 400 naming it. Honoured fields are checked where they are read.
 */
export function checkRequestFields(
  api: RequestApi | RequestFields,
  body: Record<string, unknown>,
  unknownFields: 'refuse' | 'ignore' = 'refuse',
): void {
  const table = typeof api === 'string' ? TABLES[api] : api
  for (const [name, value] of Object.entries(body)) {
    const field = Object.hasOwn(table, name) ? table[name] : undefined
    if (field === undefined) {
      if (unknownFields === 'refuse') refuse(name, `Unrecognized request argument supplied: ${name}`)
      continue
    }
    if (value === undefined || value === null || field.handling === 'honoured') continue
    if (field.handling === 'refused') {
      if (field.allows?.(value) !== true) refuse(name, `${name} is not supported: ${field.note}`)
    } else if (!hasType(value, field.type!)) refuse(name, `${name} must be ${field.type === 'object' ? 'an object' : `a ${field.type}`}`)
  }
}

function hasType(value: unknown, type: NonNullable<RequestField['type']>): boolean {
  return type === 'object' ? typeof value === 'object' && !Array.isArray(value) : typeof value === type
}
