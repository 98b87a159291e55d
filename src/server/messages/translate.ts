/**
 * An Anthropic Messages request → the Chat Completions request that means the same, which the Chat renderer
 * then renders: one mapping of a conversation to Harmony for all three APIs, so that one conversation sent
 * through any of them gives the same prompt tokens. llama.cpp's server reads Messages the same way
 * (ggml-org/llama.cpp tools/server/server-chat.cpp, `server_chat_convert_anthropic_to_oai`), as does vLLM
 * (vllm-project/vllm vllm/entrypoints/anthropic/serving.py).
 *
 * Blocks: `text` → text; `thinking` → the assistant's `reasoning_content` (its chain of thought, rendered as
 * analysis where gpt-oss keeps it); `tool_use` → a tool call (its `input` as JSON arguments); `tool_result` →
 * a `tool` message (placed before the user's other blocks, right after the calls it answers); `system` (and a
 * `role: 'system'` message, which Claude Code sends) → the developer message's instructions. What gpt-oss cannot
 * read (images, documents) is a 400 naming the block. The errors found here name the Messages field
 * (`messages[2].content[0]`); those the Chat renderer finds after (a bad schema, say) name the Chat request's.
 */
import { isRecord } from '../../base/records'
import {
  checkRenderOptions,
  checkTranslatedBodyLimits,
  type RenderedPrompt,
  type RenderRequestOptions,
  renderChatCompletionRequest,
} from '../../render/index'
import {
  array,
  fail,
  type HostedTools,
  type JsonObject,
  type NotApplied,
  object,
  optionalString,
  string,
} from '../../render/request-fields'

/** What a Messages request becomes. */
export interface MessagesAsChat {
  /** The Chat Completions request (its fields only, all checked by the Chat renderer and validation). */
  chat: JsonObject
  /** What was taken and not applied, said as Chat's are (`x-harmony-not-applied`). */
  notApplied: NotApplied[]
  /**
   * How the answer shows the model's reasoning (`thinking` blocks): with their text (`full`), signature only
   * (`omitted`: `thinking.display: 'omitted'`), or not at all (`none`: `thinking.type: 'disabled'`).
   */
  thinkingDisplay: 'full' | 'omitted' | 'none'
}

/**
 * Anthropic's server tools (run by Anthropic's servers) and the client tools it defines by type (`bash_…`,
 * `text_editor_…`, `computer_…`): not offered here, left out and said (a 400 with `hostedTools: 'refuse'`).
 */
const TYPED_TOOL = /^(web_search|web_fetch|code_execution|bash|text_editor|computer|memory|tool_search_tool_\w+)_\d{8}$/

/** `thinking.budget_tokens` → gpt-oss's reasoning level: the budget's order of magnitude (Anthropic's minimum is 1,024). */
function effortOfBudget(budget: number): 'low' | 'medium' | 'high' {
  return budget < 4_096 ? 'low' : budget < 16_384 ? 'medium' : 'high'
}

const EFFORTS: Readonly<Record<string, 'low' | 'medium' | 'high'>> = {
  low: 'low',
  medium: 'medium',
  high: 'high',
  xhigh: 'high',
  max: 'high',
}

/**
 * The Chat request of a Messages request. Top-level fields are checked against their table before this
 * (`MESSAGES_REQUEST_FIELDS`); here each is read and mapped.
 */
function chatRequestOfMessages(body: JsonObject, hosted: HostedTools, counting = false): MessagesAsChat {
  const notApplied: NotApplied[] = []
  const chat: JsonObject = { model: body.model }
  // `count_tokens` (counting) has no max_tokens; a message needs one.
  if (!counting) {
    const max = body.max_tokens
    if (max === undefined || max === null) fail('max_tokens: Field required', 'max_tokens')
    if (typeof max !== 'number' || !Number.isSafeInteger(max) || max < 1) fail('max_tokens must be an integer of at least 1', 'max_tokens')
    chat.max_completion_tokens = max
  }
  for (const field of ['stream', 'temperature', 'top_p'] as const) if (body[field] !== undefined) chat[field] = body[field]
  if (body.top_k !== undefined && body.top_k !== null)
    notApplied.push({ param: 'top_k', note: 'not applied: the engine clients have no top-k setting' })

  const messages: JsonObject[] = []
  const system = body.system === undefined || body.system === null ? '' : blockText(body.system, 'system', { system: true })
  if (system !== '') messages.push({ role: 'system', content: system })
  const turns = array(body.messages, 'messages')
  if (turns.length === 0) fail('messages: at least one message is required', 'messages')
  // A `system` message may carry the effort of the turns from it on (Claude Code's per-turn effort).
  let turnEffort: { at: string; config: unknown } | undefined
  turns.forEach((raw, i) => {
    for (const message of chatMessages(raw, `messages[${i}]`, notApplied)) messages.push(message)
    const config = (raw as JsonObject).output_config
    if ((raw as JsonObject).role === 'system' && config !== undefined && config !== null)
      turnEffort = { at: `messages[${i}].output_config`, config }
  })
  chat.messages = messages
  if (messages.at(-1)?.role === 'assistant')
    notApplied.push({
      param: `messages[${turns.length - 1}]`,
      note: 'a last assistant turn is not continued (prefill): it is read as a finished turn, and the model answers after it',
    })

  const tools = body.tools === undefined || body.tools === null ? [] : array(body.tools, 'tools')
  const functions: JsonObject[] = []
  tools.forEach((raw, i) => {
    const tool = functionOf(raw, `tools[${i}]`, hosted, notApplied)
    if (tool !== null) functions.push(tool)
  })
  if (functions.length > 0) chat.tools = functions
  readToolChoice(body.tool_choice, chat)

  if (body.stop_sequences !== undefined && body.stop_sequences !== null) {
    const stops = array(body.stop_sequences, 'stop_sequences').map((stop, i) => {
      if (string(stop, `stop_sequences[${i}]`) === '') fail(`stop_sequences[${i}] must not be empty`, `stop_sequences[${i}]`)
      return stop
    })
    if (stops.length > 4) fail('stop_sequences: at most 4 stop sequences are supported here', 'stop_sequences')
    if (stops.length > 0) chat.stop = stops
  }
  const user = isRecord(body.metadata) ? optionalString(body.metadata.user_id, 'metadata.user_id') : undefined
  if (user !== undefined) chat.user = user

  const thinkingDisplay = readThinking(body, chat)
  readOutputConfig(body.output_config, 'output_config', chat, notApplied)
  if (turnEffort !== undefined)
    readOutputConfig({ effort: object(turnEffort.config, turnEffort.at).effort }, turnEffort.at, chat, notApplied)
  if (thinkingDisplay === 'none')
    notApplied.push({
      param: 'thinking',
      note: `gpt-oss always reasons: it ran at ${String(chat.reasoning_effort)} effort, and its thinking is not shown`,
    })
  // The older name of `output_config.format`, which older clients send.
  if (body.output_format !== undefined && body.output_format !== null)
    readOutputConfig({ format: body.output_format }, 'output_format', chat, notApplied)
  if (body.context_management !== undefined && body.context_management !== null)
    notApplied.push({
      param: 'context_management',
      note: 'not applied: the gateway does not edit the conversation (send it as it should be read)',
    })
  return { chat, notApplied, thinkingDisplay }
}

/**
 * Claude Code's first system block: what it tells Anthropic's billing (its version and entry point), not the
 * model. Left out, as vLLM leaves it out (vllm/entrypoints/anthropic/serving.py), so the prompt holds
 * instructions only and stays the same prefix across client versions.
 */
const BILLING_HEADER = 'x-anthropic-billing-header:'

/**
 * `system`, a `system` message's content, a document's or a tool result's: a string, or text blocks joined by
 * blank lines (`system`: the billing block left out). A block that is not text is a 400, unless `other` gives
 * what the model reads in its place.
 */
function blockText(
  value: unknown,
  param: string,
  { system = false, other = null }: { system?: boolean; other?: ((type: string, param: string) => string) | null } = {},
): string {
  if (typeof value === 'string') return value
  return array(value, param)
    .flatMap((raw, i) => {
      const block = object(raw, `${param}[${i}]`)
      const type = string(block.type, `${param}[${i}].type`)
      if (type !== 'text') {
        if (other === null) fail(`${param}[${i}] is a '${type}' block; gpt-oss reads text only`, `${param}[${i}].type`)
        return [other(type, `${param}[${i}]`)]
      }
      const text = string(block.text, `${param}[${i}].text`)
      return system && text.startsWith(BILLING_HEADER) ? [] : [text]
    })
    .join('\n\n')
}

/** One Messages message → its Chat messages (a user turn with tool results is several). */
function chatMessages(raw: unknown, at: string, notApplied: NotApplied[]): JsonObject[] {
  const message = object(raw, at)
  const role = message.role
  if (role === 'system') {
    const content = blockText(message.content, `${at}.content`)
    return content === '' ? [] : [{ role: 'system', content }]
  }
  if (role !== 'user' && role !== 'assistant')
    fail(`${at}.role must be 'user' or 'assistant', not ${JSON.stringify(role)?.slice(0, 40)}`, `${at}.role`)
  if (typeof message.content === 'string') return [{ role, content: message.content }]
  const blocks = array(message.content, `${at}.content`)
  return role === 'user' ? userMessages(blocks, `${at}.content`, notApplied) : [assistantMessage(blocks, `${at}.content`)]
}

function userMessages(blocks: unknown[], at: string, notApplied: NotApplied[]): JsonObject[] {
  const results: JsonObject[] = []
  const texts: string[] = []
  blocks.forEach((raw, i) => {
    const block = object(raw, `${at}[${i}]`)
    const type = string(block.type, `${at}[${i}].type`)
    if (type === 'text') texts.push(string(block.text, `${at}[${i}].text`))
    else if (type === 'tool_result') {
      const content = toolResultText(block.content, `${at}[${i}].content`, notApplied)
      results.push({ role: 'tool', tool_call_id: string(block.tool_use_id, `${at}[${i}].tool_use_id`), content })
    } else if (type === 'document') texts.push(documentText(block, `${at}[${i}]`))
    else fail(`${at}[${i}] is a '${type}' block; gpt-oss reads text only (text, text document and tool_result blocks)`, `${at}[${i}].type`)
  })
  // The results answer the calls of the turn before: they come first, as Chat's tool messages do.
  if (texts.length > 0) results.push({ role: 'user', content: texts.join('\n\n') })
  return results
}

/**
 * A tool result's content: its text. What a tool gave that gpt-oss cannot read (an image a file reader returned)
 * is a placeholder the model reads, and said: a 400 would end the client's agent loop over what its tool did.
 */
function toolResultText(value: unknown, param: string, notApplied: NotApplied[]): string {
  if (value === undefined || value === null) return ''
  return blockText(value, param, {
    other: (type, at) => {
      notApplied.push({ param: at, note: `a '${type}' block: gpt-oss reads text only; the model read that it was left out` })
      return `[${type} left out: this model reads text only]`
    },
  })
}

/**
 * A `document` block whose source is text (`{ type: 'text', data }`, or `{ type: 'content', content }` of text
 * blocks): its text, under its title and context when it has them. A PDF, an image or a URL is a 400: gpt-oss
 * reads text, and the gateway fetches nothing for a client.
 */
function documentText(block: JsonObject, at: string): string {
  const source = object(block.source, `${at}.source`)
  let text: string
  if (source.type === 'text') text = string(source.data, `${at}.source.data`)
  else if (source.type === 'content') text = blockText(source.content, `${at}.source.content`)
  else
    return fail(
      `${at} is a document of source type '${String(source.type).slice(0, 40)}'; gpt-oss reads text only ('text' and 'content' sources)`,
      `${at}.source.type`,
    )
  const title = optionalString(block.title, `${at}.title`)
  const context = optionalString(block.context, `${at}.context`)
  return [title, context, text].filter((part) => part !== undefined && part !== '').join('\n\n')
}

function assistantMessage(blocks: unknown[], at: string): JsonObject {
  const texts: string[] = []
  const thinking: string[] = []
  const calls: JsonObject[] = []
  blocks.forEach((raw, i) => {
    const block = object(raw, `${at}[${i}]`)
    const type = string(block.type, `${at}[${i}].type`)
    if (type === 'text') texts.push(string(block.text, `${at}[${i}].text`))
    else if (type === 'thinking') thinking.push(string(block.thinking, `${at}[${i}].thinking`))
    else if (type === 'tool_use') {
      const input = object(block.input, `${at}[${i}].input`)
      calls.push({
        id: string(block.id, `${at}[${i}].id`),
        type: 'function',
        function: { name: string(block.name, `${at}[${i}].name`), arguments: JSON.stringify(input) },
      })
    } else if (type !== 'redacted_thinking')
      // Redacted thinking is another model's, sealed by Anthropic: nothing gpt-oss can read, so left out.
      fail(`${at}[${i}] is a '${type}' block; an assistant turn here holds text, thinking and tool_use blocks`, `${at}[${i}].type`)
  })
  const message: JsonObject = { role: 'assistant', content: texts.length > 0 ? texts.join('\n\n') : null }
  if (thinking.length > 0) message.reasoning_content = thinking.join('\n\n')
  if (calls.length > 0) message.tool_calls = calls
  return message
}

/** A Messages tool → a Chat function tool; null for a typed tool left out (and said). */
function functionOf(raw: unknown, at: string, hosted: HostedTools, notApplied: NotApplied[]): JsonObject | null {
  const tool = object(raw, at)
  const type = tool.type
  if (typeof type === 'string' && type !== 'custom') {
    if (!TYPED_TOOL.test(type)) fail(`${at}.type '${type.slice(0, 60)}' is not a tool type of the Messages API`, `${at}.type`)
    if (hosted === 'refuse') fail(`${at}: a '${type}' tool is not run here`, `${at}.type`)
    notApplied.push({ param: at, note: `a '${type}' tool: Anthropic's typed tools are not offered here; left out of the prompt` })
    return null
  }
  const fn: JsonObject = { name: string(tool.name, `${at}.name`), parameters: object(tool.input_schema, `${at}.input_schema`) }
  const description = optionalString(tool.description, `${at}.description`)
  if (description !== undefined) fn.description = description
  if (tool.strict === true) fn.strict = true
  // `defer_loading` (Anthropic's tool search loads such tools on demand) and `cache_control`: every tool is in
  // the prompt here, and the engine's prefix cache needs no marks.
  return { type: 'function', function: fn }
}

/** `tool_choice`: auto, any (a call is required), a named tool, none; `disable_parallel_tool_use`. */
function readToolChoice(value: unknown, chat: JsonObject): void {
  if (value === undefined || value === null) return
  const choice = object(value, 'tool_choice')
  const type = choice.type
  if (type === 'auto') chat.tool_choice = 'auto'
  else if (type === 'any') chat.tool_choice = 'required'
  else if (type === 'none') chat.tool_choice = 'none'
  else if (type === 'tool') chat.tool_choice = { type: 'function', function: { name: string(choice.name, 'tool_choice.name') } }
  else fail(`tool_choice.type must be 'auto', 'any', 'tool' or 'none', not ${JSON.stringify(type)?.slice(0, 40)}`, 'tool_choice.type')
  if (typeof choice.disable_parallel_tool_use === 'boolean') chat.parallel_tool_calls = !choice.disable_parallel_tool_use
}

/**
 * `thinking`: gpt-oss always reasons. `enabled` sets the reasoning level from `budget_tokens` (gpt-oss has levels,
 * not budgets); `adaptive` and `between_tools` leave it to `output_config.effort` (or the default); `disabled`
 * runs at low and hides the thinking (said); `display: 'omitted'` gives thinking blocks with their signature only.
 */
function readThinking(body: JsonObject, chat: JsonObject): MessagesAsChat['thinkingDisplay'] {
  if (body.thinking === undefined || body.thinking === null) return 'full'
  const thinking = object(body.thinking, 'thinking')
  const type = thinking.type
  const { display } = thinking
  if (display !== undefined && display !== null && display !== 'summarized' && display !== 'omitted' && display !== 'updates')
    fail(`thinking.display must be 'summarized' or 'omitted', not ${JSON.stringify(display)?.slice(0, 40)}`, 'thinking.display')
  // `summarized` (and the beta `updates`) show the thinking whole: gpt-oss's reasoning is shown as it is.
  const shown = display === 'omitted' ? 'omitted' : 'full'
  if (type === 'enabled') {
    const budget = thinking.budget_tokens
    if (typeof budget !== 'number' || !Number.isSafeInteger(budget) || budget < 1)
      fail('thinking.budget_tokens must be a positive integer', 'thinking.budget_tokens')
    chat.reasoning_effort = effortOfBudget(budget)
    return shown
  }
  if (type === 'adaptive' || type === 'between_tools') return shown
  // Disabled thinking runs at low unless `output_config.effort` says otherwise (read after this); it is said then.
  if (type === 'disabled') {
    chat.reasoning_effort = 'low'
    return 'none'
  }
  return fail(
    `thinking.type must be 'enabled', 'adaptive', 'between_tools' or 'disabled', not ${JSON.stringify(type)?.slice(0, 40)}`,
    'thinking.type',
  )
}

/** `output_config`: `effort` → the reasoning level (`max` runs as high, said); `format` → structured outputs. */
function readOutputConfig(config: unknown, at: string, chat: JsonObject, notApplied: NotApplied[]): void {
  if (config === undefined || config === null) return
  const { effort, format } = object(config, at)
  if (effort !== undefined && effort !== null) {
    const level = typeof effort === 'string' && Object.hasOwn(EFFORTS, effort) ? EFFORTS[effort] : undefined
    if (level === undefined) fail("output_config.effort must be 'low', 'medium', 'high', 'xhigh' or 'max'", 'output_config.effort')
    if (effort !== level)
      notApplied.push({ param: 'output_config.effort', note: `'${effort}' ran as 'high': gpt-oss reasons at low, medium or high` })
    chat.reasoning_effort = level
  }
  if (format !== undefined && format !== null) {
    const param = at === 'output_format' ? at : `${at}.format`
    const shape = object(format, param)
    if (shape.type !== 'json_schema') fail(`${param}.type must be 'json_schema'`, `${param}.type`)
    chat.response_format = {
      type: 'json_schema',
      json_schema: { name: 'output', schema: object(shape.schema, `${param}.schema`), strict: true },
    }
  }
}

/**
 * An Anthropic Messages request body → the prompt: the Chat Completions request it means (below), rendered
 * as Chat's are, with what the translation took and did not apply said too. Bad requests throw
 * `HarmonyRequestError` (HTTP 400) naming the Messages field.
 */
export function renderMessagesRequest(body: unknown, options?: RenderRequestOptions): RenderedPrompt {
  const checked = checkRenderOptions(options, 'request', 'renderMessagesRequest') as RenderRequestOptions
  const translated = messagesAsChat(body, checked)
  return withMessagesRequest(renderChatCompletionRequest(translated.chat, checked), translated)
}

/**
 * A Messages request as the Chat request it means (below), its bounds checked first (`limits.ts`, named by
 * the Messages fields); `counting`: a `count_tokens` body, which has no `max_tokens`; `open`: what the caller does
 * to the bounded body before it is read (a gateway opens the thinking it signed).
 */
export function messagesAsChat(
  body: unknown,
  options: RenderRequestOptions,
  counting = false,
  open: (body: JsonObject) => JsonObject = (same) => same,
): MessagesAsChat {
  checkTranslatedBodyLimits(body, options, 'renderMessagesRequest')
  return chatRequestOfMessages(open(object(body, 'body')), options.hostedTools ?? 'omit', counting)
}

/** The prompt of a Messages request's Chat request, with what only the Messages request says. */
export function withMessagesRequest(
  prompt: RenderedPrompt,
  translated: Pick<MessagesAsChat, 'notApplied' | 'thinkingDisplay'>,
): RenderedPrompt {
  const notApplied = [...translated.notApplied, ...(prompt.notApplied ?? [])]
  return {
    ...prompt,
    ...(notApplied.length > 0 ? { notApplied } : {}),
    ...(translated.thinkingDisplay === 'full' ? {} : { thinkingDisplay: translated.thinkingDisplay }),
  }
}
