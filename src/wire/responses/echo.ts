/**
 * What a response says of its request (`responsesRequestEcho`): the request's fields, each as it came when it has
 * the field's type, else OpenAI's default.
 */

import { functionFields } from '../options'
import type { ResponseFunctionTool, ResponseRequestEcho } from './types'

export type Fields = Readonly<Record<string, unknown>>

export function fieldsOf(value: unknown): Fields | null {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Fields) : null
}

export function stringOr<T>(value: unknown, otherwise: T): string | T {
  return typeof value === 'string' ? value : otherwise
}

function numberOr<T>(value: unknown, otherwise: T): number | T {
  return typeof value === 'number' && Number.isFinite(value) ? value : otherwise
}

function integerOr<T>(value: unknown, otherwise: T): number | T {
  return Number.isSafeInteger(value) ? (value as number) : otherwise
}

/**
 * A tool as the response lists it: a function tool (Responses shape, or Chat's nested `function`) in the
 * Responses shape with `description`, `parameters` and `strict` null where the request left them out (the
 * specification's FunctionTool requires the three, nullable); another tool type as it came.
 */
function echoedTool(tool: unknown): ResponseFunctionTool | Record<string, unknown> {
  const fields = functionFields(tool)
  if (fields === null) return tool as Record<string, unknown>
  const { function: _nested, ...rest } = tool as Record<string, unknown>
  return {
    ...rest,
    type: 'function',
    name: fields.name as string,
    description: (fields.description as string | null | undefined) ?? null,
    parameters: (fields.parameters as Record<string, unknown> | null | undefined) ?? null,
    strict: (fields.strict as boolean | null | undefined) ?? null,
  }
}

/**
 * What a response says of its request (`ResponsesAdapterOptions.request`): the fields of a Responses request
 * `body` that the response object repeats, each as the request gave it when it has the field's type, else
 * what OpenAI answers when a request leaves it out. The defaults are those of the Open Responses
 * specification's example response (public/openapi/openapi.json, ResponseResource `example`): `temperature`
 * 1, `top_p` 1, the penalties 0, `top_logprobs` 0, `parallel_tool_calls` true, `tool_choice` 'auto', `tools`
 * [], `metadata` {}, `text` `{ format: { type: 'text' } }`, `truncation` 'disabled' (also "`disabled`
 * (default)" in the openai package's Response type, resources/responses/responses.d.ts); the nullable ones
 * (`instructions`, `max_output_tokens`, `max_tool_calls`, `previous_response_id`, `safety_identifier`,
 * `prompt_cache_key`, `user`; `reasoning.effort` "if specified", and `.summary`) null. Three say what
 * happened rather than what was asked: `store` false (the adapters' `stored` option says when a gateway kept
 * the response), `background` false (nothing runs in the background), `service_tier` 'default' (OpenAI's
 * response names the tier it used, responses.d.ts; there is one). The result shares nothing with `body`.
 */
export function responsesRequestEcho(body: object | null = null): ResponseRequestEcho {
  const request: Fields = fieldsOf(body) ?? {}
  const reasoning = fieldsOf(request.reasoning)
  const text = fieldsOf(request.text)
  const format = fieldsOf(text?.format)
  const toolChoice = request.tool_choice
  const metadata = fieldsOf(request.metadata)
  const echo: ResponseRequestEcho = {
    background: false,
    instructions: stringOr(request.instructions, null),
    max_output_tokens: integerOr(request.max_output_tokens, null),
    max_tool_calls: integerOr(request.max_tool_calls, null),
    parallel_tool_calls: typeof request.parallel_tool_calls === 'boolean' ? request.parallel_tool_calls : true,
    presence_penalty: numberOr(request.presence_penalty, 0),
    frequency_penalty: numberOr(request.frequency_penalty, 0),
    previous_response_id: stringOr(request.previous_response_id, null),
    prompt_cache_key: stringOr(request.prompt_cache_key, null),
    reasoning: { effort: stringOr(reasoning?.effort, null), summary: stringOr(reasoning?.summary, null) },
    safety_identifier: stringOr(request.safety_identifier, null),
    service_tier: 'default',
    store: false,
    temperature: numberOr(request.temperature, 1),
    text: { ...text, format: format === null ? { type: 'text' } : { type: stringOr(format.type, 'text'), ...format } },
    tool_choice: typeof toolChoice === 'string' ? toolChoice : ((fieldsOf(toolChoice) as Record<string, unknown> | null) ?? 'auto'),
    tools: Array.isArray(request.tools) ? request.tools.map(echoedTool) : [],
    top_logprobs: integerOr(request.top_logprobs, 0),
    top_p: numberOr(request.top_p, 1),
    truncation: request.truncation === 'auto' ? 'auto' : 'disabled',
    user: stringOr(request.user, null),
    metadata: (metadata ?? {}) as Record<string, string>,
  }
  // The conversation the response belongs to, as OpenAI's Response has it (`conversation: { id }`, the `openai`
  // package's resources/responses/responses.d.ts): only where the request named one.
  const conversation = fieldsOf(request.conversation)?.id ?? request.conversation
  if (typeof conversation === 'string') echo.conversation = { id: conversation }
  // Detached from the request: the fields that hold its objects are copied (the rest are new objects or
  // primitives). Most requests have none of them, and a clone of the whole echo cost more than the rest of
  // a response's opening.
  if (text !== null || fieldsOf(toolChoice) !== null || echo.tools.length > 0 || metadata !== null) {
    const copied = structuredClone({ text: echo.text, tool_choice: echo.tool_choice, tools: echo.tools, metadata: echo.metadata })
    echo.text = copied.text
    echo.tool_choice = copied.tool_choice
    echo.tools = copied.tools
    echo.metadata = copied.metadata
  }
  return echo
}
