/**
 * The adapters' options, checked once at construction: a `TypeError` naming the option instead of a
 * default silently taken. Also where `tools` (a request's own tools array, Chat or Responses shape) and bare
 * tool names become the parser's `toolNames` (`functions.get_weather`).
 */
import { checkParserOptions } from '../api/parser'
import type { HarmonyStreamParserOptions } from '../base/types'

type Options = Record<string, unknown>

const ROUTING = ['preamble', 'builtinTools', 'textToolCalls'] as const
const COMMON = ['model', 'id', 'parser', 'input', 'tools', ...ROUTING]
export const CHAT_OPTIONS = new Set([...COMMON, 'created', 'reasoningField', 'promptTokens', 'includeUsage', 'truncated'])
export const RESPONSES_OPTIONS = new Set([...COMMON, 'createdAt', 'inputTokens', 'truncated'])

const CHOICES: Record<string, readonly unknown[]> = {
  reasoningField: ['reasoning_content', 'reasoning', 'both'],
  preamble: ['content', 'reasoning'],
  builtinTools: ['ignore', 'surface'],
  input: ['tokens', 'text'],
  textToolCalls: ['off', 'recover'],
}

function fail(where: string, message: string): never {
  throw new TypeError(`${where}: ${message}`)
}

/** Checks `options` of the adapter `where` (`ChatCompletionsStream`, …) against the option names `known`. */
export function checkAdapterOptions(options: unknown, known: ReadonlySet<string>, where: string): asserts options is Options {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) fail(where, 'options must be an object')
  const o = options as Options
  for (const key of Object.keys(o)) if (!known.has(key)) fail(where, `unknown option '${key}' (known: ${[...known].join(', ')})`)
  if (typeof o.model !== 'string' || o.model === '') fail(where, "option 'model' is required: a non-empty string")
  if (o.id !== undefined && (typeof o.id !== 'string' || o.id === '')) fail(where, "option 'id' must be a non-empty string")
  for (const key of ['created', 'createdAt', 'promptTokens', 'inputTokens']) {
    if (o[key] !== undefined && (typeof o[key] !== 'number' || !Number.isSafeInteger(o[key]) || (o[key] as number) < 0)) {
      fail(where, `option '${key}' must be a non-negative integer`)
    }
  }
  for (const key of ['includeUsage', 'truncated'])
    if (o[key] !== undefined && typeof o[key] !== 'boolean') fail(where, `option '${key}' must be a boolean`)
  for (const [key, choices] of Object.entries(CHOICES)) {
    if (o[key] !== undefined && !choices.includes(o[key]))
      fail(where, `option '${key}' must be ${choices.map((c) => `'${c}'`).join(' or ')}, not ${JSON.stringify(o[key])}`)
  }
  if (o.parser !== undefined) checkParserOptions(o.parser, `${where}: option 'parser'`)

  if (o.tools !== undefined && o.tools !== null && !Array.isArray(o.tools)) fail(where, "option 'tools' must be the request's tools array")
}

/**
 * The function names of a request's `tools`: Chat `{ type: 'function', function: { name } }` or Responses
 * `{ type: 'function', name }`; other tool types have no Harmony function.
 */
export function functionNamesOf(tools: unknown, where: string): string[] {
  if (tools === undefined || tools === null) return []
  return (tools as unknown[]).flatMap((tool, i) => {
    if (tool === null || typeof tool !== 'object') fail(where, `tools[${i}] must be an object`)
    const fields = functionFields(tool)
    if (fields === null) return []
    const name = fields.name ?? (tool as { name?: unknown }).name
    if (typeof name !== 'string' || name === '') fail(where, `tools[${i}] has no function name`)
    return [name]
  })
}

/**
 * The fields (`name`, `description`, `parameters`) of a function tool in either API's shape: Chat nests them
 * under `function`, Responses has them on the tool; null for other tool types.
 */
export function functionFields(tool: unknown): Record<string, unknown> | null {
  if (tool === null || typeof tool !== 'object' || (tool as { type?: unknown }).type !== 'function') return null
  const nested = (tool as { function?: unknown }).function
  return nested !== null && typeof nested === 'object' && !Array.isArray(nested)
    ? (nested as Record<string, unknown>)
    : (tool as Record<string, unknown>)
}

/** A tool name as the parser wants it: bare names (as requests spell them) get the `functions.` namespace. */
export function qualifiedToolName(name: string): string {
  return name.includes('.') ? name : `functions.${name}`
}

/** The parser options the adapter runs with: its `toolNames` qualified and joined with the request's `tools`. */
export function parserOptionsOf(options: Options, where: string): HarmonyStreamParserOptions {
  const parser = { ...((options.parser as HarmonyStreamParserOptions | undefined) ?? {}) }
  const names = [...(parser.toolNames ?? []), ...functionNamesOf(options.tools, where)].map(qualifiedToolName)
  if (names.length > 0) parser.toolNames = [...new Set(names)]
  return parser
}
