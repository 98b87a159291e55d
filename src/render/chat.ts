/**
 * A Chat Completions request → the Harmony conversation (docs/API.md "The mapping" has the table):
 * system/developer messages → the developer message's instructions; user → user; assistant → analysis
 * (from `reasoning` or `reasoning_content`), then a commentary preamble and one tool call message per call, or
 * a final message; tool → a message from `functions.NAME` to the assistant, NAME found by `tool_call_id`.
 */
import { isRecord } from '../base/records'
import type { BuiltinTool } from './builtin-tools'
import type { TextMessage } from './conversation'
import type { FunctionTool, ToolNamespace } from './developer'
import { type ArgumentSchema, argumentSchemas, type ResponseFormat, responseFormat } from './output-schema'
import {
  array,
  fail,
  functionName,
  functionTools,
  type HostedTools,
  type JsonObject,
  type NotApplied,
  noControl,
  object,
  optionalString,
  reasoningEffort,
  string,
  TEXT_PARTS,
  textContent,
  toolArguments,
} from './request-fields'
import type { ReasoningEffort } from './system'

/** What a request contributes to a prompt, in the reference's terms. */
export interface RequestConversation {
  /** Texts of the system and developer messages, in order (the developer message's `# Instructions`). */
  instructions: string[]
  /** The `functions` namespace. */
  tools: FunctionTool[]
  /** Other namespaces of functions (Responses `namespace` tools). */
  namespaces: ToolNamespace[]
  messages: TextMessage[]
  reasoningEffort: ReasoningEffort | undefined
  /** Chat `response_format` / Responses `text.format` asking for JSON (structured outputs). */
  responseFormat: ResponseFormat | undefined
  /** The offered functions, when one of them is strict (its arguments enforced). */
  argumentSchemas: ArgumentSchema[] | undefined
  /** What the request asked for that gpt-oss cannot do, taken and said. */
  notApplied: NotApplied[]
  /** `tool_choice` requires a call: of this function, or (null) of any offered one. */
  requiredCall?: { name: string | null }
  /** gpt-oss's own tools offered for the caller to run (a Responses `code_interpreter` or `web_search` tool). */
  builtinTools?: BuiltinTool[]
}

/** What a conversation's reading depends on beyond the body. */
export interface ConversationOptions {
  hostedTools: HostedTools
  /** gpt-oss's own tools the caller runs: the hosted tool types that stand for them are offered as them. */
  builtinTools: readonly BuiltinTool[]
}

/** A call of function `name` of `namespace` (default `functions`). */
export function toolCallMessage(name: string, args: string, namespace = 'functions'): TextMessage {
  return { role: 'assistant', recipient: `${namespace}.${name}`, channel: 'commentary', contentType: '<|constrain|>json', content: args }
}

/** The result of a call of function `name` of `namespace` (default `functions`). */
export function toolResultMessage(name: string, output: string, namespace = 'functions'): TextMessage {
  return { role: 'tool', name: `${namespace}.${name}`, recipient: 'assistant', channel: 'commentary', content: output }
}

/**
 * `tool_choice`: whether the tools are offered, and the call the answer must be: `'required'` (some offered
 * function: `name` null, or the only one's name) or a function named in the Chat (`{ type: 'function', function:
 * { name } }`) or the Responses shape (`{ type: 'function', name }`), which must be an offered function.
 */
export function toolChoiceOf(
  toolChoice: unknown,
  param: string,
  tools: readonly FunctionTool[],
): { offered: boolean; requiredCall: { name: string | null } | undefined } {
  if (toolChoice === undefined || toolChoice === null || toolChoice === 'auto') return { offered: true, requiredCall: undefined }
  if (toolChoice === 'none') return { offered: false, requiredCall: undefined }
  if (toolChoice === 'required') {
    if (tools.length === 0) fail(`${param} 'required' needs a function in tools`, param)
    return { offered: true, requiredCall: { name: tools.length === 1 ? tools[0]!.name : null } }
  }
  const choice = isRecord(toolChoice) && toolChoice.type === 'function' ? toolChoice : null
  const nested = choice !== null && isRecord(choice.function)
  const name = nested ? (choice.function as JsonObject).name : choice?.name
  const at = nested ? `${param}.function.name` : `${param}.name`
  if (choice === null || typeof name !== 'string')
    fail(
      `${param} ${JSON.stringify(toolChoice).slice(0, 60)} is not one gpt-oss can be held to: 'auto', 'none', 'required' or a function`,
      param,
    )
  if (!tools.some((tool) => tool.name === name)) fail(`${at} '${name.slice(0, 64)}' is not a function in tools`, at)
  return { offered: true, requiredCall: { name } }
}

export function chatConversation(body: unknown, options: ConversationOptions): RequestConversation {
  const request = object(body, 'body')
  const rawMessages = array(request.messages, 'messages')
  if (rawMessages.length === 0) fail('messages must hold at least one message', 'messages')
  const notApplied: NotApplied[] = []
  const declared = functionTools(request.tools, 'tools', 'chat', options.hostedTools, notApplied)
  const { offered, requiredCall } = toolChoiceOf(request.tool_choice, 'tool_choice', declared)
  const tools = offered ? declared : []
  const conversation: RequestConversation = {
    instructions: [],
    tools,
    namespaces: [],
    messages: [],
    reasoningEffort: reasoningEffort(request.reasoning_effort, 'reasoning_effort', notApplied),
    responseFormat: responseFormat(request.response_format, 'response_format', 'chat'),
    argumentSchemas: offered ? argumentSchemas(request.tools, 'chat') : undefined,
    notApplied,
    ...(requiredCall === undefined ? {} : { requiredCall }),
  }
  noControl(request.verbosity, 'verbosity', 'verbosity', notApplied)
  /** tool_call_id → function name, from the assistant messages seen so far. */
  const calls = new Map<string, string>()
  rawMessages.forEach((raw, i) => {
    const at = `messages[${i}]`
    const message = object(raw, at)
    const role = string(message.role, `${at}.role`)
    switch (role) {
      case 'system':
      case 'developer':
        conversation.instructions.push(textContent(message.content, `${at}.content`, TEXT_PARTS.chat))
        break
      case 'user': {
        const name = optionalString(message.name, `${at}.name`)
        conversation.messages.push({
          role: 'user',
          ...(name === undefined ? {} : { name }),
          content: textContent(message.content, `${at}.content`, TEXT_PARTS.chat),
        })
        break
      }
      case 'assistant':
        for (const rendered of assistantMessages(message, at, calls)) conversation.messages.push(rendered)
        break
      case 'tool': {
        const id = string(message.tool_call_id, `${at}.tool_call_id`)
        const name = calls.get(id)
        if (name === undefined)
          fail(`${at}.tool_call_id '${id}' matches no tool call of an earlier assistant message`, `${at}.tool_call_id`)
        conversation.messages.push(toolResultMessage(name, textContent(message.content, `${at}.content`, TEXT_PARTS.chat)))
        break
      }
      default:
        fail(
          `${at}.role must be 'system', 'developer', 'user', 'assistant' or 'tool', not ${JSON.stringify(role).slice(0, 40)}`,
          `${at}.role`,
        )
    }
  })
  return conversation
}

/** The chain of thought a client sent back: vLLM and most clients use `reasoning_content`, others `reasoning`. */
function reasoningText(message: JsonObject, at: string): string | undefined {
  const content = optionalString(message.reasoning_content, `${at}.reasoning_content`)
  const reasoning = optionalString(message.reasoning, `${at}.reasoning`)
  if (content !== undefined && reasoning !== undefined && content !== reasoning) {
    fail(`${at} has both reasoning and reasoning_content, and they differ; send one`, `${at}.reasoning`)
  }
  return content ?? reasoning
}

function assistantMessages(message: JsonObject, at: string, calls: Map<string, string>): TextMessage[] {
  const out: TextMessage[] = []
  const reasoning = reasoningText(message, at)
  if (reasoning !== undefined && reasoning !== '') out.push({ role: 'assistant', channel: 'analysis', content: reasoning })
  const content =
    message.content === undefined || message.content === null ? undefined : textContent(message.content, `${at}.content`, TEXT_PARTS.chat)
  const toolCalls = message.tool_calls === undefined || message.tool_calls === null ? [] : array(message.tool_calls, `${at}.tool_calls`)
  if (toolCalls.length === 0) {
    if (content !== undefined) out.push({ role: 'assistant', channel: 'final', content })
    else if (out.length === 0) fail(`${at} has no content, reasoning or tool_calls`, `${at}.content`)
    return out
  }
  // Text beside tool calls is what the model said before calling: a preamble on the commentary channel.
  if (content !== undefined && content !== '') out.push({ role: 'assistant', channel: 'commentary', content })
  toolCalls.forEach((raw, j) => {
    const callAt = `${at}.tool_calls[${j}]`
    const call = object(raw, callAt)
    if (call.type !== undefined && call.type !== 'function') fail(`${callAt}.type must be 'function'`, `${callAt}.type`)
    const id = string(call.id, `${callAt}.id`)
    const fn = object(call.function, `${callAt}.function`)
    const name = functionName(fn.name, `${callAt}.function.name`)
    calls.set(id, name)
    out.push(toolCallMessage(name, toolArguments(fn.arguments, `${callAt}.function.arguments`)))
  })
  return out
}
