/**
 * The adapters' options, checked once at construction through the option kit (`base/options.ts`): a misspelt
 * option is a TypeError naming it and the closest valid name, instead of a default silently taken. Also
 * where `tools` (a request's own tools array, Chat or Responses shape) and bare tool names become the
 * parser's `toolNames` (`functions.get_weather`).
 */

import { checkParserOptions } from '../api/parser'
import { checkOptions, is, type OptionSpec, optionError, type Rule } from '../base/options'
import type { HarmonyStreamParserOptions } from '../base/types'

type Options = Record<string, unknown>

/** A count (tokens, Unix seconds). Negative is a TypeError, as these options have always answered. */
const count: Rule = { what: 'a non-negative integer', test: (value) => Number.isSafeInteger(value) && (value as number) >= 0 }

/** The request's `tools` as it came; its elements are read by `functionNamesOf`. */
const toolsArray: Rule = { what: "the request's tools array (or null)", test: (value) => value === null || Array.isArray(value) }

/** OpenAI's `stop`: a non-empty string, or up to 4 of them (the adapters' option, and Chat's request field). */
export const STOP_STRINGS: Rule = {
  what: 'a non-empty string or an array of 1 to 4 of them',
  test: (value) =>
    (typeof value === 'string' && value !== '') ||
    (Array.isArray(value) && value.length >= 1 && value.length <= 4 && value.every((s) => typeof s === 'string' && s !== '')),
}

/** A response format as the renderer reads it: a name, and the JSON Schema of the answer. */
const responseFormat: Rule = {
  what: 'an object { name: string, schema: object }',
  test: (value) => {
    const format = value as { name?: unknown; schema?: unknown } | null
    return (
      format !== null &&
      typeof format === 'object' &&
      typeof format.name === 'string' &&
      format.schema !== null &&
      typeof format.schema === 'object' &&
      !Array.isArray(format.schema)
    )
  },
}

/** Offered functions with the schemas of the strict ones' arguments (or null). */
const argumentSchemas: Rule = {
  what: 'an array of { name: string, schema: object | null }',
  test: (value) =>
    Array.isArray(value) &&
    value.every((entry) => {
      const { name, schema } = (entry ?? {}) as { name?: unknown; schema?: unknown }
      return typeof name === 'string' && (schema === null || (typeof schema === 'object' && !Array.isArray(schema)))
    }),
}

/** The options of every wire format (routing, parser, input, identity, stop strings, structured output). */
export const ADAPTER_OPTIONS: OptionSpec = {
  model: is.nonEmptyString,
  id: is.nonEmptyString,
  parser: is.object,
  input: is.oneOf('tokens', 'text', 'stripped'),
  tools: toolsArray,
  preamble: is.oneOf('content', 'reasoning'),
  builtinTools: is.oneOf('ignore', 'surface', 'run'),
  runNamespaces: is.arrayOf(is.string),
  textToolCalls: is.oneOf('off', 'recover'),
  stop: STOP_STRINGS,
  responseFormat,
  argumentSchemas,
  logprobs: is.boolean,
}

export const CHAT_OPTIONS: OptionSpec = {
  ...ADAPTER_OPTIONS,
  created: count,
  reasoningField: is.oneOf('reasoning_content', 'reasoning', 'both'),
  promptTokens: count,
  includeUsage: is.boolean,
  choiceIndex: count,
}

export const RESPONSES_OPTIONS: OptionSpec = {
  ...ADAPTER_OPTIONS,
  createdAt: count,
  completedAt: count,
  inputTokens: count,
  request: is.object,
  stored: is.boolean,
  background: is.boolean,
  sealReasoning: is.function,
  reasoningSummary: is.boolean,
  dialect: is.oneOf('openai', 'open-responses'),
  codeInterpreterOutputs: is.boolean,
  citedPage: is.function,
  mcpListTools: is.array,
  mcpApproved: is.array,
  needsApproval: is.function,
}

export const MESSAGES_OPTIONS: OptionSpec = {
  ...ADAPTER_OPTIONS,
  inputTokens: count,
  thinkingDisplay: is.oneOf('full', 'omitted', 'none'),
  signThinking: is.function,
}

/** `finish(options)`, and the non-streaming functions' extra option. */
export const FINISH_OPTIONS: OptionSpec = { truncated: is.boolean }

/** The options of a non-streaming function (`chatCompletion`, `responseObject`): the stream's, and how it ended. */
export function wholeOptions(spec: OptionSpec): OptionSpec {
  return { ...spec, ...FINISH_OPTIONS }
}

function fail(where: string, message: string): never {
  throw optionError(TypeError, `${where}: ${message}`)
}

/**
 * Checks `options` of the adapter `where` (`ChatCompletionsStream`, …) against `spec`; `model` is required,
 * every function tool in `tools` needs a name, and `parser` must be what `HarmonyStreamParser` takes.
 */
export function checkAdapterOptions(options: unknown, spec: OptionSpec, where: string): asserts options is Options {
  const checked = checkOptions<Options>(options, spec, where, ['model'])
  functionNamesOf(checked.tools, where)
  if (checked.parser !== undefined) checkParserOptions(checked.parser, `${where}: option 'parser'`)
}

/**
 * The function names of a request's `tools`: Chat `{ type: 'function', function: { name } }` or Responses
 * `{ type: 'function', name }`; other tool types have no Harmony function.
 */
function functionNamesOf(tools: unknown, where: string): string[] {
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
function qualifiedToolName(name: string): string {
  return name.includes('.') ? name : `functions.${name}`
}

/** The parser options the adapter runs with: its `toolNames` qualified and joined with the request's `tools`. */
export function parserOptionsOf(options: Options, where: string): HarmonyStreamParserOptions {
  const parser = { ...((options.parser as HarmonyStreamParserOptions | undefined) ?? {}) }
  const names = [...(parser.toolNames ?? []), ...functionNamesOf(options.tools, where)].map(qualifiedToolName)
  if (names.length > 0) parser.toolNames = [...new Set(names)]
  return parser
}
