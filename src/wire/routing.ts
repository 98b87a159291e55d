/**
 * Where a message's text goes in OpenAI's wire formats, decided by its channel and recipient (never by
 * its position in the completion), the same way for Chat Completions and Responses, streaming or not.
 */

import type { HarmonyDiagnostic } from '../base/types'

/**
 * What the gateway does with a message. `builtin`: a call to one of gpt-oss's own tools that the gateway runs
 * (`builtinTools: 'run'`), or that tool's result, which the gateway put into the stream: the formats show them
 * as the work of the server (Responses: `code_interpreter_call`, `web_search_call` items), never as client calls.
 */
export type Route = 'reasoning' | 'content' | 'tool' | 'builtin' | 'ignore'

export interface RoutingOptions {
  /**
   * A commentary message without a recipient (a "preamble" the model writes before calling tools):
   * shown to the user as content (default, as vLLM's chat path and llama.cpp do) or kept as reasoning.
   */
  preamble?: 'content' | 'reasoning'
  /**
   * Messages to built-in tools (`browser.*`, `python`, `container.*`, any recipient outside `functions.`):
   * dropped (default; the gateway did not offer them) or surfaced as tool calls named by the recipient;
   * `'run'`: the gateway runs gpt-oss's own (`browser.*`, `python`), so their calls and results are the server's
   * work (route `builtin`), and other recipients are dropped.
   */
  builtinTools?: 'ignore' | 'surface' | 'run'
  /**
   * With `builtinTools: 'run'`: namespaces whose tools the caller runs too (a Responses request's remote MCP
   * servers, by label): their calls and results are the caller's work (route `builtin`), not the client's.
   */
  runNamespaces?: readonly string[]
}

export interface RouteFields {
  role: string
  /** The author's name: a tool's (`python`, `browser.search`) for a tool's message. */
  name?: string | null
  channel?: string | null
  recipient?: string | null
}

const FUNCTIONS = 'functions.'
const NO_NAMESPACES: ReadonlySet<string> = new Set()

/**
 * `namespaces`: the tool namespaces besides `functions` the request offered (a Responses `namespace` tool is
 * one): a message to one of their tools is a call as a function's is.
 */
export function routeOf(header: RouteFields, options: RoutingOptions = {}, namespaces = NO_NAMESPACES): Route {
  const runs = options.builtinTools === 'run'
  const ran = (tool: string) => isBuiltinTool(tool) || (options.runNamespaces?.includes(namespaceOf(tool) ?? '') ?? false)
  // Completions are assistant messages; anything else is not output: a tool result the model hallucinated, or,
  // when the gateway runs the built-in tools, the result it gave the model.
  if (header.role !== 'assistant') return runs && header.role === 'tool' && ran(header.name ?? '') ? 'builtin' : 'ignore'
  const recipient = header.recipient ?? null
  if (recipient !== null && recipient !== 'assistant' && recipient !== 'user') {
    if (runs && ran(recipient)) return 'builtin'
    if (recipient.startsWith(FUNCTIONS) || namespaces.has(namespaceOf(recipient) ?? '')) return 'tool'
    if (runs) return 'ignore'
    return options.builtinTools === 'surface' ? 'tool' : 'ignore'
  }
  if (header.channel === 'analysis') return 'reasoning'
  if (header.channel === 'commentary') return options.preamble === 'reasoning' ? 'reasoning' : 'content'
  // final, or a message whose channel the model left out or garbled (recovered by lenient mode): the answer.
  return 'content'
}

/** Whether a recipient (or a tool result's author) is one of gpt-oss's own tools: `python`, `browser.search`, …. */
export function isBuiltinTool(name: string): boolean {
  return name === 'python' || name.startsWith('browser.')
}

/** The function name of a tool message: `functions.get_weather` → `get_weather`; another namespace's keeps it. */
export function toolName(recipient: string): string {
  return recipient.startsWith(FUNCTIONS) ? recipient.slice(FUNCTIONS.length) : recipient
}

/** The namespace of a recipient (`multi_agent.spawn` → `multi_agent`); null for one without (`python`). */
export function namespaceOf(recipient: string): string | null {
  const dot = recipient.indexOf('.')
  return dot > 0 ? recipient.slice(0, dot) : null
}

/** A namespaced recipient split at its first dot (`calc.add` → `calc`, `add`); null for one without (`python`). */
export function splitRecipient(recipient: string): { namespace: string; name: string } | null {
  const namespace = namespaceOf(recipient)
  return namespace === null ? null : { namespace, name: recipient.slice(namespace.length + 1) }
}

/** The namespaces besides `functions` of the parser's tool names (`functions.get_weather`, `multi_agent.spawn`). */
export function offeredNamespaces(toolNames: readonly string[]): ReadonlySet<string> {
  const namespaces = new Set<string>()
  for (const name of toolNames) {
    const namespace = namespaceOf(name)
    if (namespace !== null && namespace !== 'functions') namespaces.add(namespace)
  }
  return namespaces
}

/**
 * The `invalid-tool-arguments` diagnostic for a closed tool call whose arguments should be JSON and are not
 * (they were streamed as they are), or null.
 */
export function toolArgumentsDiagnostic(
  call: { name: string; id: string; arguments: string; contentType: string | null | undefined },
  tokenOffset: number,
): (HarmonyDiagnostic & { toolCallId: string }) | null {
  if (!expectsJson(call.contentType) || isJson(call.arguments)) return null
  return {
    code: 'invalid-tool-arguments',
    message: `the arguments of tool call ${call.name} are not valid JSON; passed through as they are`,
    tokenOffset,
    text: call.arguments,
    toolCallId: call.id,
  }
}

/** Whether a tool call's arguments should be JSON: content type absent or mentioning json (as vLLM decides). */
function expectsJson(contentType: string | null | undefined): boolean {
  return contentType == null || contentType.includes('json')
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

/**
 * The `dropped-message` diagnostic for a message the adapters do not send (a call to a built-in tool the
 * gateway did not offer, a non-assistant message the model wrote): dropped text never disappears silently.
 */
export function droppedDiagnostic(
  message: { role: string; recipient?: string | null; content: string },
  tokenOffset: number,
): HarmonyDiagnostic {
  const what = message.role !== 'assistant' ? `a ${message.role} message` : `a message to ${message.recipient}`
  return {
    code: 'dropped-message',
    message: `${what} was not sent to the client (${message.role !== 'assistant' ? 'not an assistant message' : "builtinTools: 'ignore'"})`,
    tokenOffset,
    text: message.content,
  }
}
