/**
 * A Responses request → the Harmony conversation. Each input item becomes its own Harmony message (as the
 * model wrote them): `message` items by role as in Chat, `reasoning` → analysis, `function_call` → a tool
 * call, `function_call_output` → a tool result named through its `call_id`. `instructions` come first among
 * the developer message's instructions. No server-side state is kept, so `previous_response_id`,
 * `conversation` and `item_reference` are refused with a clear error instead of being ignored (a gateway with a
 * response store resolves them before it renders: serving/responses/conversation.ts).
 *
 * Unlike vLLM's merging of Responses items into one chat turn for non-Harmony models (vLLM PR #42189), nothing
 * is merged: Harmony has one message per channel and recipient, which is exactly one item each.
 */

import { isRecord } from '../base/records'
import { type ConversationOptions, type RequestConversation, toolCallMessage, toolChoiceOf, toolResultMessage } from './chat'
import type { TextMessage } from './conversation'
import { argumentSchemas, responseFormat } from './output-schema'
import {
  array,
  builtinTools,
  fail,
  functionName,
  functionTools,
  type JsonObject,
  type NotApplied,
  namespaceName,
  namespaceTools,
  noControl,
  object,
  optionalString,
  reasoningEffort,
  string,
  TEXT_PARTS,
  textContent,
  toolArguments,
} from './request-fields'

/**
 * Request fields that name state kept on the server: `previous_response_id` is read by a gateway with a response
 * store, which renders the stored items in its place (`continuedBody`); here, without one, it is refused.
 */
const SERVER_STATE = ['previous_response_id', 'conversation', 'prompt'] as const

export function responsesConversation(body: unknown, options: ConversationOptions): RequestConversation {
  const request = object(body, 'body')
  for (const field of SERVER_STATE) {
    if (request[field] !== undefined && request[field] !== null) {
      fail(`${field} is not supported: no response store is kept here; send the whole conversation in input`, field)
    }
  }
  const notApplied: NotApplied[] = []
  const run = builtinTools(request.tools, 'tools', options.builtinTools)
  const declared = functionTools(request.tools, 'tools', 'responses', options.hostedTools, notApplied, run)
  const namespaces = namespaceTools(request.tools, 'tools', options.hostedTools, notApplied)
  const { offered, requiredCall } = toolChoiceOf(request.tool_choice, 'tool_choice', declared)
  const text = request.text === undefined || request.text === null ? undefined : object(request.text, 'text')
  noControl(text?.verbosity, 'text.verbosity', 'verbosity', notApplied)
  const reasoning = request.reasoning === undefined || request.reasoning === null ? undefined : object(request.reasoning, 'reasoning')
  const conversation: RequestConversation = {
    instructions: [],
    tools: offered ? declared : [],
    namespaces: offered ? namespaces : [],
    messages: [],
    reasoningEffort: reasoningEffort(reasoning?.effort, 'reasoning.effort', notApplied),
    responseFormat: responseFormat(text?.format, 'text.format', 'responses'),
    argumentSchemas: offered ? argumentSchemas(request.tools, 'responses') : undefined,
    notApplied,
    ...(requiredCall === undefined ? {} : { requiredCall }),
    ...(run.length === 0 ? {} : { builtinTools: run }),
  }
  // gpt-oss writes no reasoning summary: 'auto' (as the model can) is taken as it is; a kind of summary asked
  // for is taken and said (a gateway gives the raw reasoning, in the reasoning item's `reasoning_text` content
  // and, by its rule, as its summary).
  for (const field of ['summary', 'generate_summary']) {
    const summary = reasoning?.[field]
    if (summary !== undefined && summary !== null && summary !== 'auto')
      notApplied.push({
        param: `reasoning.${field}`,
        note: `${JSON.stringify(summary).slice(0, 40)} not applied: gpt-oss writes no reasoning summary (its raw reasoning is given instead)`,
      })
  }
  const instructions = optionalString(request.instructions, 'instructions')
  if (instructions !== undefined) conversation.instructions.push(instructions)

  if (typeof request.input === 'string') {
    conversation.messages.push({ role: 'user', content: request.input })
    return conversation
  }
  const items = array(request.input, 'input')
  if (items.length === 0) fail('input must hold at least one item', 'input')
  // A call's function and namespace by its call id, for its output.
  const calls = new Map<string, { name: string; namespace: string }>()
  const callFollows = functionCallFollows(items)
  items.forEach((raw, i) => {
    const at = `input[${i}]`
    const item = object(raw, at)
    // Easy input messages (`{ role, content }`) have no type.
    const type = item.type === undefined ? 'message' : string(item.type, `${at}.type`)
    switch (type) {
      case 'message':
        messageItem(item, at, isPreamble(item, callFollows[i]), conversation)
        break
      case 'reasoning': {
        const text = reasoningItemText(item, at)
        if (text !== '') conversation.messages.push({ role: 'assistant', channel: 'analysis', content: text })
        break
      }
      case 'function_call': {
        const name = functionName(item.name, `${at}.name`)
        const namespace =
          item.namespace === undefined || item.namespace === null ? 'functions' : namespaceName(item.namespace, `${at}.namespace`)
        calls.set(string(item.call_id, `${at}.call_id`), { name, namespace })
        conversation.messages.push(toolCallMessage(name, toolArguments(item.arguments, `${at}.arguments`), namespace))
        break
      }
      case 'function_call_output': {
        const id = string(item.call_id, `${at}.call_id`)
        const call = calls.get(id)
        if (call === undefined) fail(`${at}.call_id '${id}' matches no earlier function_call item`, `${at}.call_id`)
        conversation.messages.push(
          toolResultMessage(call.name, textContent(item.output, `${at}.output`, TEXT_PARTS.responses), call.namespace),
        )
        break
      }
      case 'mcp_approval_request': {
        // A remote MCP server's call that waited for approval: a call of its namespace (the label), answered by
        // a `function_call_output` of the same id (a gateway turns the client's approval into one).
        const name = functionName(item.name, `${at}.name`)
        const namespace = namespaceName(item.server_label, `${at}.server_label`)
        calls.set(string(item.id, `${at}.id`), { name, namespace })
        conversation.messages.push(toolCallMessage(name, toolArguments(item.arguments, `${at}.arguments`), namespace))
        break
      }
      case 'mcp_call': {
        // A remote MCP server's call a gateway ran inside a response: the call and its result, as the model saw them.
        const name = functionName(item.name, `${at}.name`)
        const namespace = namespaceName(item.server_label, `${at}.server_label`)
        conversation.messages.push(toolCallMessage(name, toolArguments(item.arguments, `${at}.arguments`), namespace))
        const output = item.output ?? item.error
        if (typeof output === 'string') conversation.messages.push(toolResultMessage(name, output, namespace))
        break
      }
      case 'mcp_list_tools':
      case 'code_interpreter_call':
      case 'web_search_call':
        // The server's own tool work of an earlier turn (gpt-oss's python and browser, run by a gateway): like
        // that turn's reasoning, which it happened in, not part of the prompt (docs/API.md "Earlier reasoning").
        break
      case 'item_reference':
        fail(`${at} is an item_reference, which is not supported: send the item itself`, `${at}.type`)
        break
      case 'compaction':
        // A gateway opens compaction items before rendering (Compactor.expand): one here came to a renderer that cannot.
        fail(`${at} is a compaction item, which this server does not open: send the conversation's items instead`, `${at}.type`)
        break
      default:
        fail(
          `${at}.type '${type}' is not supported (message, reasoning, function_call, function_call_output, code_interpreter_call, web_search_call, mcp_list_tools, mcp_call, mcp_approval_request)`,
          `${at}.type`,
        )
    }
  })
  return conversation
}

function messageItem(item: JsonObject, at: string, preamble: boolean, conversation: RequestConversation): void {
  const role = string(item.role, `${at}.role`)
  const content = textContent(item.content, `${at}.content`, TEXT_PARTS.responses)
  switch (role) {
    case 'system':
    case 'developer':
      conversation.instructions.push(content)
      return
    case 'user':
      conversation.messages.push({ role: 'user', content })
      return
    case 'assistant': {
      const message: TextMessage = { role: 'assistant', channel: preamble ? 'commentary' : 'final', content }
      conversation.messages.push(message)
      return
    }
    default:
      fail(`${at}.role must be 'user', 'assistant', 'system' or 'developer', not ${JSON.stringify(role).slice(0, 40)}`, `${at}.role`)
  }
}

/**
 * Whether an assistant message item is a preamble (commentary) rather than an answer (final): its `phase`
 * says so when present; otherwise it is one when a function_call follows it within the same turn (before the
 * next message from someone else), as text beside tool calls is in Chat.
 */
function isPreamble(item: JsonObject, callFollows: boolean): boolean {
  if (item.role !== 'assistant') return false
  if (item.phase === 'commentary') return true
  if (item.phase === 'final_answer') return false
  return callFollows
}

/**
 * For each item, whether a function_call comes after it before the next message from someone other than the
 * assistant (or anything that is not an object): one pass from the end, so a request of many assistant items
 * costs linear time (a scan forward from each of them was quadratic).
 */
function functionCallFollows(items: readonly unknown[]): boolean[] {
  const follows: boolean[] = new Array(items.length)
  let callAhead = false
  for (let i = items.length - 1; i >= 0; i--) {
    follows[i] = callAhead
    const item = items[i]
    if (!isRecord(item)) callAhead = false
    else {
      const type = item.type ?? 'message'
      if (type === 'function_call') callAhead = true
      else if (type === 'message' && item.role !== 'assistant') callAhead = false
    }
  }
  return follows
}

/** The chain of thought of a reasoning item: its `reasoning_text` content when sent, else its summary. */
function reasoningItemText(item: JsonObject, at: string): string {
  const content = item.content === undefined || item.content === null ? [] : array(item.content, `${at}.content`)
  if (content.length > 0) return textContent(content, `${at}.content`, TEXT_PARTS.reasoning)
  const summary = item.summary === undefined || item.summary === null ? [] : array(item.summary, `${at}.summary`)
  // Summary parts are separate paragraphs.
  return textContent(summary, `${at}.summary`, TEXT_PARTS.summary, '\n\n')
}
