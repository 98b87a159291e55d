/**
 * Reading untrusted request JSON: each helper returns the value with its type, or throws a
 * `HarmonyRequestError` naming the field by its JSON path (`messages[2].content[0].text`).
 */

import { HarmonyRequestError } from '../base/errors'
import { isRecord } from '../base/records'
import type { BuiltinTool } from './builtin-tools'
import type { FunctionTool, ToolNamespace } from './developer'
import { REASONING_EFFORTS, type ReasoningEffort } from './system'

export type JsonObject = Record<string, unknown>

export function fail(message: string, param: string | null): never {
  throw new HarmonyRequestError(message, param)
}

function describe(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  return typeof value === 'object' ? 'an object' : `${typeof value} ${JSON.stringify(value)?.slice(0, 40)}`
}

export function object(value: unknown, param: string): JsonObject {
  if (!isRecord(value)) fail(`${param} must be an object, not ${describe(value)}`, param)
  return value
}

export function string(value: unknown, param: string): string {
  if (typeof value !== 'string') fail(`${param} must be a string, not ${describe(value)}`, param)
  return value
}

/** Absent and null are the same in OpenAI requests. */
export function optionalString(value: unknown, param: string): string | undefined {
  return value === undefined || value === null ? undefined : string(value, param)
}

export function array(value: unknown, param: string): unknown[] {
  if (!Array.isArray(value)) fail(`${param} must be an array, not ${describe(value)}`, param)
  return value
}

/** Content part types that carry text, per API; anything else (images, audio, files) gpt-oss cannot read. */
export const TEXT_PARTS = {
  chat: new Set(['text', 'refusal']),
  responses: new Set(['input_text', 'output_text', 'text', 'refusal', 'reasoning_text', 'summary_text']),
  /** A Responses reasoning item: its content, and its summary. */
  reasoning: new Set(['reasoning_text']),
  summary: new Set(['summary_text']),
}

/** A message's content: a string, or an array of text parts joined by `separator` (default none). */
export function textContent(value: unknown, param: string, textParts: ReadonlySet<string>, separator = ''): string {
  if (typeof value === 'string') return value
  const parts = array(value, param)
  let text = ''
  parts.forEach((raw, i) => {
    if (i > 0) text += separator
    const part = object(raw, `${param}[${i}]`)
    const type = string(part.type, `${param}[${i}].type`)
    if (!textParts.has(type)) {
      fail(
        `${param}[${i}] is a '${type}' part; gpt-oss reads text only (parts of type ${[...textParts].map((t) => `'${t}'`).join(', ')})`,
        `${param}[${i}].type`,
      )
    }
    // A refusal part carries its text in `refusal`.
    text += string(type === 'refusal' ? part.refusal : part.text, `${param}[${i}].${type === 'refusal' ? 'refusal' : 'text'}`)
  })
  return text
}

/**
 * What a request asked for that gpt-oss cannot do and that is a preference, not a meaning (a verbosity, a
 * reasoning summary, an effort level it does not have, a built-in tool this gateway does not run): taken, never
 * a 400, and said (`RenderedPrompt.notApplied`: a gateway answers with a header and a diagnostic).
 */
export interface NotApplied {
  /** The request field, as a JSON path (`text.verbosity`, `tools[2]`). */
  param: string
  /** What was done instead, and why. */
  note: string
}

/** The efforts of other OpenAI models, run at the nearest gpt-oss level (and said). */
const NEAREST_EFFORT: ReadonlyMap<unknown, ReasoningEffort> = new Map([
  ['none', 'low'],
  ['minimal', 'low'],
  ['xhigh', 'high'],
])

/** The gpt-oss level an effort of another model runs at (`none`, `minimal`, `xhigh`), or undefined for any other value. */
export function nearestEffort(value: unknown): ReasoningEffort | undefined {
  return NEAREST_EFFORT.get(value)
}

export function reasoningEffort(value: unknown, param: string, notApplied: NotApplied[]): ReasoningEffort | undefined {
  if (value === undefined || value === null) return undefined
  const nearest = nearestEffort(value)
  if (nearest !== undefined) {
    notApplied.push({ param, note: `'${value}' ran as '${nearest}': gpt-oss reasons at low, medium or high` })
    return nearest
  }
  if (!REASONING_EFFORTS.includes(value as ReasoningEffort)) {
    fail(
      `${param} must be 'low', 'medium' or 'high' for gpt-oss (or none, minimal, xhigh: run at the nearest), not ${describe(value)}`,
      param,
    )
  }
  return value as ReasoningEffort
}

/** A preference gpt-oss has no control for (`verbosity`): taken, and said when set. */
export function noControl(value: unknown, param: string, what: string, notApplied: NotApplied[]): void {
  if (value !== undefined && value !== null)
    notApplied.push({ param, note: `${JSON.stringify(value)?.slice(0, 40)} not applied: gpt-oss has no ${what} control` })
}

/**
 * Tools a request may offer that gpt-oss is not offered here, each left out of the prompt and said by default
 * (`hostedTools: 'omit'`), so a client that always offers them (Codex) works, or a 400 naming them (`'refuse'`):
 * - hosted tools, which OpenAI's servers run (web and file search, code interpreter, computer use, …): this
 *   gateway runs none;
 * - tool types the client runs that are not rendered for gpt-oss yet (`custom` free-text tools, `local_shell`,
 *   `shell`, `apply_patch`; in Chat, `namespace` groups of functions, which Responses renders).
 */
const HOSTED_TOOLS: ReadonlySet<unknown> = new Set([
  'web_search',
  'web_search_preview',
  'web_search_2025_08_26',
  'web_search_preview_2025_03_11',
  'file_search',
  'computer_use',
  'computer_use_preview',
  'code_interpreter',
  'image_generation',
  'mcp',
  'tool_search',
])
const CLIENT_TOOLS_NOT_RENDERED: ReadonlySet<unknown> = new Set(['custom', 'local_shell', 'shell', 'apply_patch', 'namespace'])

export type HostedTools = 'omit' | 'refuse'

/** The hosted tool types that stand for one of gpt-oss's own tools, offered as it when the caller runs it. */
const BUILTIN_TOOL_TYPES: Readonly<Record<string, BuiltinTool>> = {
  code_interpreter: 'python',
  web_search: 'browser',
  web_search_preview: 'browser',
  web_search_2025_08_26: 'browser',
  web_search_preview_2025_03_11: 'browser',
}

/**
 * gpt-oss's own tools a Responses request offers (`code_interpreter` → `python`, `web_search` → `browser`), of
 * those the caller runs (`runs`); each once, in the order first offered.
 */
export function builtinTools(value: unknown, param: string, runs: readonly BuiltinTool[]): BuiltinTool[] {
  if (value === undefined || value === null || runs.length === 0) return []
  const offered: BuiltinTool[] = []
  for (const [i, raw] of array(value, param).entries()) {
    const tool = BUILTIN_TOOL_TYPES[object(raw, `${param}[${i}]`).type as string]
    if (tool !== undefined && runs.includes(tool) && !offered.includes(tool)) offered.push(tool)
  }
  return offered
}

/** A function name as it appears after `functions.` in the prompt and in the model's recipients. */
/** Whether `name` is a function name the renderer takes: 1 to 128 letters, digits, '_', '-' or '.'. */
export function isFunctionName(name: string): boolean {
  return /^[A-Za-z0-9_.-]{1,128}$/.test(name)
}

export function functionName(value: unknown, param: string): string {
  const name = string(value, param)
  if (!isFunctionName(name)) {
    fail(`${param} must be 1 to 128 letters, digits, '_', '-' or '.', not ${JSON.stringify(name).slice(0, 80)}`, param)
  }
  return name
}

/**
 * The request's function tools. Chat: `{ type: 'function', function: { name, description, parameters } }`;
 * Responses: `{ type: 'function', name, description, parameters }`. The hosted and not-yet-rendered types above
 * are left out and said (`hosted: 'omit'`) or refused; any other type is refused, never silently dropped.
 */
export function functionTools(
  value: unknown,
  param: string,
  shape: 'chat' | 'responses',
  hosted: HostedTools,
  notApplied: NotApplied[],
  run: readonly BuiltinTool[] = [],
): FunctionTool[] {
  if (value === undefined || value === null) return []
  const seen = new Set<string>()
  const tools: FunctionTool[] = []
  for (const [i, raw] of array(value, param).entries()) {
    const at = `${param}[${i}]`
    const tool = object(raw, at)
    // Its own namespace in the prompt (`namespaceTools`).
    if (shape === 'responses' && tool.type === 'namespace') continue
    // gpt-oss's own tool, which the caller runs (`builtinTools`).
    if (run.includes(BUILTIN_TOOL_TYPES[tool.type as string]!)) continue
    if (tool.type !== 'function' && hosted === 'omit' && HOSTED_TOOLS.has(tool.type)) {
      notApplied.push({ param: at, note: `a '${tool.type}' tool: hosted tools are not run here; left out of the prompt` })
      continue
    }
    if (tool.type !== 'function' && hosted === 'omit' && CLIENT_TOOLS_NOT_RENDERED.has(tool.type)) {
      notApplied.push({ param: at, note: `a '${tool.type}' tool: not rendered for gpt-oss yet; left out of the prompt` })
      continue
    }
    if (tool.type !== 'function')
      fail(`${at}.type must be 'function' (the only tool type rendered for gpt-oss), not ${describe(tool.type)}`, `${at}.type`)
    const fields = shape === 'chat' ? object(tool.function, `${at}.function`) : tool
    const prefix = shape === 'chat' ? `${at}.function` : at
    const name = functionName(fields.name, `${prefix}.name`)
    if (seen.has(name)) fail(`${prefix}.name '${name}' is declared twice`, `${prefix}.name`)
    seen.add(name)
    const description = optionalString(fields.description, `${prefix}.description`)
    const parameters = fields.parameters
    if (parameters !== undefined && parameters !== null) object(parameters, `${prefix}.parameters`)
    tools.push({ name, description, parameters: parameters ?? undefined })
  }
  return tools
}

/**
 * The namespaces of a Responses request's `tools` (`{ type: 'namespace', name, description, tools: [functions] }`,
 * as Codex groups its tools): each is a Harmony namespace of its own, which the model calls as
 * `to={name}.{function}`. A tool inside one that is not a function is left out and said, or refused, as at the
 * top level; `strict` is not enforced inside one (said).
 */
export function namespaceTools(value: unknown, param: string, hosted: HostedTools, notApplied: NotApplied[]): ToolNamespace[] {
  if (value === undefined || value === null) return []
  const namespaces: ToolNamespace[] = []
  for (const [i, raw] of array(value, param).entries()) {
    const at = `${param}[${i}]`
    const tool = object(raw, at)
    if (tool.type !== 'namespace') continue
    const name = namespaceName(tool.name, `${at}.name`)
    if (name === 'functions') fail(`${at}.name 'functions' is the namespace of the function tools`, `${at}.name`)
    if (namespaces.some((namespace) => namespace.name === name)) fail(`${at}.name '${name}' is declared twice`, `${at}.name`)
    const description = optionalString(tool.description, `${at}.description`)
    for (const [j, inner] of array(tool.tools, `${at}.tools`).entries()) {
      if (isRecord(inner) && inner.type === 'namespace') fail(`${at}.tools[${j}]: namespaces do not nest`, `${at}.tools[${j}].type`)
      if (isRecord(inner) && inner.strict === true)
        notApplied.push({
          param: `${at}.tools[${j}].strict`,
          note: 'not enforced inside a namespace (the model is not constrained to the schema)',
        })
    }
    const tools = functionTools(tool.tools, `${at}.tools`, 'responses', hosted, notApplied)
    namespaces.push({ name, ...(description === undefined ? {} : { description }), tools })
  }
  return namespaces
}

/** A namespace's name as it appears before `.` in the prompt and the model's recipients. */
export function namespaceName(value: unknown, param: string): string {
  const name = string(value, param)
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(name))
    fail(`${param} must be 1 to 64 letters, digits, '_' or '-', not ${JSON.stringify(name).slice(0, 80)}`, param)
  return name
}

/** Tool call arguments: JSON text as the client sent it; an object is accepted and serialized. */
export function toolArguments(value: unknown, param: string): string {
  if (typeof value === 'string') return value
  if (isRecord(value)) return JSON.stringify(value)
  fail(`${param} must be a string of JSON, not ${describe(value)}`, param)
}
