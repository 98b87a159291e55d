/**
 * Structured outputs of a request: Chat `response_format` and Responses `text.format`, and the arguments of
 * `strict` function tools. Each becomes a JSON Schema that the engine enforces with its own constrained
 * decoding (serving/engines/constraints.ts) and that the adapters check the JSON against afterwards; a
 * response format's schema is also shown in the prompt (developer.ts), as a tool's parameters always are.
 *
 * An engine grammar can express only part of JSON Schema, so a schema is checked here, keyword by keyword,
 * against what both grammar builders the engines use enforce (llama.cpp's json-schema-to-grammar and
 * xgrammar, used by vLLM, SGLang and TensorRT-LLM): anything else is a 400 naming the keyword's path, rather
 * than a schema the engine would quietly enforce in part. docs/API.md "Structured outputs" lists the subset.
 */
import { isRecord } from '../base/records'
import type { OutputSchema } from './developer'
import { array, fail, object, optionalString, string } from './request-fields'

/**
 * A response format that asks for JSON: the final answer's content must match `schema`. `json_object` is
 * `{ type: 'object' }` and shows no schema in the prompt (OpenAI's JSON mode has none to show).
 */
export interface ResponseFormat extends OutputSchema {
  format: 'json_schema' | 'json_object'
}

/** The keywords that only describe a schema; no grammar needs them. */
const ANNOTATIONS = new Set([
  'title',
  'description',
  'default',
  'examples',
  '$schema',
  '$id',
  '$comment',
  'deprecated',
  'readOnly',
  'writeOnly',
])

/** The keywords the engines' grammars enforce. */
const ENFORCED = new Set([
  'type',
  'enum',
  'const',
  'anyOf',
  'oneOf',
  '$ref',
  '$defs',
  'definitions',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'prefixItems',
  'minItems',
  'maxItems',
  'minLength',
  'maxLength',
  'format',
])

/** String formats with a grammar rule (json-grammar.ts) and a rule in xgrammar. */
export const FORMATS: ReadonlySet<string> = new Set(['date', 'time', 'date-time', 'uuid'])

const TYPES = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null'])

/** Why the commonest keywords outside the subset are left out (the rest: "cannot be enforced while generating"). */
const WHY: Record<string, string> = {
  pattern: 'a regular expression cannot be turned into every grammar here',
  minimum: 'number bounds are not enforced by the grammars here',
  maximum: 'number bounds are not enforced by the grammars here',
  exclusiveMinimum: 'number bounds are not enforced by the grammars here',
  exclusiveMaximum: 'number bounds are not enforced by the grammars here',
}

function cannot(path: string, why: string): never {
  fail(
    `${path}: ${why}; structured outputs take the JSON Schema subset the engines' grammars enforce (docs/API.md "Structured outputs")`,
    path,
  )
}

function count(value: unknown, at: string): void {
  if (!Number.isSafeInteger(value) || (value as number) < 0) cannot(at, 'must be a non-negative integer')
}

/**
 * Checks that `schema` (at JSON path `path`) is one the engines' grammars enforce, and that the work it asks
 * of a grammar builder and of the validator is bounded (`checkBounded`).
 */
export function checkEnforceable(schema: unknown, path: string): void {
  checkKeywords(schema, path)
  checkBounded(schema, path)
}

/**
 * Checks that every keyword of `schema` (at JSON path `path`) is one the engines' grammars enforce: the
 * subset json-grammar.ts turns into GBNF and xgrammar into its own grammar. `extra`: the schema of
 * `additionalProperties` or `items`, where `false` (nothing more) is meaningful; elsewhere `false` matches
 * no value, so no grammar could generate one.
 */
function checkKeywords(schema: unknown, path: string, root: unknown = schema, extra = false): void {
  if (schema === true || (schema === false && extra)) return
  if (schema === false) cannot(path, 'a false schema matches no value')
  const node = object(schema, path)
  for (const [keyword, value] of Object.entries(node)) {
    const at = `${path}.${keyword}`
    if (ANNOTATIONS.has(keyword)) continue
    if (!ENFORCED.has(keyword)) cannot(at, WHY[keyword] ?? `'${keyword}' cannot be enforced while generating`)
    switch (keyword) {
      case 'type': {
        const types = Array.isArray(value) ? value : [value]
        if (types.length === 0 || !types.every((t) => typeof t === 'string' && TYPES.has(t))) cannot(at, 'type must name JSON types')
        break
      }
      case 'enum':
        if (array(value, at).length === 0) cannot(at, 'an empty enum matches nothing')
        break
      case 'const':
        break
      case 'anyOf':
      case 'oneOf':
      case 'prefixItems': {
        const schemas = array(value, at)
        if (schemas.length === 0) cannot(at, `an empty ${keyword} matches nothing`)
        schemas.forEach((inner, i) => {
          checkKeywords(inner, `${at}[${i}]`, root)
        })
        break
      }
      case '$defs':
      case 'definitions':
      case 'properties':
        for (const [name, inner] of Object.entries(object(value, at))) checkKeywords(inner, `${at}.${name}`, root)
        break
      case 'additionalProperties':
        // A grammar cannot keep an extra key from being one of the declared names with another value: extra
        // keys are taken only where no property is declared (a map).
        if (value !== false && isRecord(node.properties) && Object.keys(node.properties).length > 0)
          cannot(
            at,
            'properties beside declared ones cannot be told apart from them by a grammar: declare them all, or use additionalProperties alone (a map)',
          )
        checkKeywords(value, at, root, true)
        break
      case 'items':
        checkKeywords(value, at, root, true)
        break
      case 'required':
        for (const name of array(value, at)) {
          // A grammar generates the properties it knows: a required one it does not know it could never write.
          if (typeof name !== 'string' || !isRecord(node.properties) || !Object.hasOwn(node.properties, name))
            cannot(at, `required lists ${JSON.stringify(name).slice(0, 60)}, which properties does not declare`)
        }
        break
      case '$ref':
        checkReference(string(value, at), at, root)
        // The grammar follows the reference alone: a keyword beside it would be left out. Definitions are no
        // constraint (a root `$ref` beside its `$defs` is how zod-to-json-schema writes a named schema).
        for (const other of Object.keys(node))
          if (other !== '$ref' && other !== '$defs' && other !== 'definitions' && !ANNOTATIONS.has(other))
            cannot(`${path}.${other}`, 'no keyword but annotations and definitions may stand beside $ref')
        break
      case 'format':
        if (!FORMATS.has(string(value, at))) cannot(at, `format ${JSON.stringify(value)} has no grammar rule (${[...FORMATS].join(', ')})`)
        break
      default:
        // minItems, maxItems, minLength, maxLength.
        count(value, at)
    }
  }
}

/** The definition `reference` names in `root`'s own `$defs` (or `definitions`), or undefined. */
function definitionOf(reference: unknown, root: unknown): unknown {
  const match = typeof reference === 'string' ? /^#\/(\$defs|definitions)\/([^/]+)$/.exec(reference) : null
  const defs = match === null || !isRecord(root) ? undefined : root[match[1]]
  return isRecord(defs) && Object.hasOwn(defs, match![2]) ? defs[match![2]] : undefined
}

/** Only references into the schema's own `$defs` (or `definitions`) resolve inside a grammar. */
function checkReference(reference: string, at: string, root: unknown): void {
  if (definitionOf(reference, root) === undefined)
    cannot(at, `$ref ${JSON.stringify(reference).slice(0, 80)} must point into the schema's own $defs`)
}

/**
 * Schema nodes visited for one value at most, references followed: what a validator walks when a value fails
 * every alternative. Shared definitions make a small schema large (each of forty definitions `anyOf` the next
 * one twice: 2^40), so the bound is on the schema as expanded, not as written.
 */
const MAX_EXPANDED_NODES = 100_000
/** References and nested schemas followed in a row at most (the builders and the validator recurse). */
const MAX_CHAIN = 500

/** The schemas applied to the very value `node` applies to: its alternatives and its reference. */
function sameValue(node: Record<string, unknown>, root: unknown): unknown[] {
  const next: unknown[] = []
  if (Array.isArray(node.anyOf)) next.push(...node.anyOf)
  if (Array.isArray(node.oneOf)) next.push(...node.oneOf)
  if (node.$ref !== undefined) next.push(definitionOf(node.$ref, root))
  return next
}

/** The schemas applied to the parts of the value `node` applies to (its properties, its items). */
function partsOf(node: Record<string, unknown>): unknown[] {
  const next: unknown[] = isRecord(node.properties) ? Object.values(node.properties) : []
  if (Array.isArray(node.prefixItems)) next.push(...node.prefixItems)
  if (isRecord(node.items)) next.push(node.items)
  if (isRecord(node.additionalProperties)) next.push(node.additionalProperties)
  return next
}

/**
 * Checks, after `checkKeywords`, that what `schema` asks of a grammar builder and of the validator is
 * bounded: no reference cycle that never reaches a property or an item (`a` is `b`, `b` is `a`: it describes
 * no value, and a grammar of it is left-recursive), no chain of references deeper than the builders' stacks,
 * and at most `MAX_EXPANDED_NODES` nodes with references followed (recursion through a property or an item is
 * counted once: each round of it needs a deeper value).
 */
function checkBounded(schema: unknown, path: string): void {
  const definitions = isRecord(schema) ? [schema.$defs, schema.definitions].filter(isRecord).flatMap(Object.values) : []
  // Every cycle of references passes through a definition: a search from each finds them all.
  const state = new Map<object, 'open' | 'done'>()
  const follow = (node: unknown, depth: number): void => {
    if (!isRecord(node) || state.get(node) === 'done') return
    if (state.get(node) === 'open') cannot(path, 'a $ref cycle never reaches a property or item: it describes no value')
    if (depth > MAX_CHAIN) cannot(path, `references and alternatives nest more than ${MAX_CHAIN} deep`)
    state.set(node, 'open')
    for (const next of sameValue(node, schema)) follow(next, depth + 1)
    state.set(node, 'done')
  }
  for (const definition of definitions) follow(definition, 0)
  const sizes = new Map<object, number>()
  const open = new Set<object>()
  const size = (node: unknown, depth: number): number => {
    if (!isRecord(node)) return 1
    const known = sizes.get(node)
    if (known !== undefined) return known
    if (open.has(node)) return 1
    if (depth > MAX_CHAIN) cannot(path, `references and nested schemas go more than ${MAX_CHAIN} deep`)
    open.add(node)
    let total = 1
    for (const next of [...sameValue(node, schema), ...partsOf(node)]) {
      total += size(next, depth + 1)
      if (total > MAX_EXPANDED_NODES) cannot(path, `with its references followed, the schema has more than ${MAX_EXPANDED_NODES} nodes`)
    }
    open.delete(node)
    sizes.set(node, total)
    return total
  }
  size(schema, 0)
}

/**
 * A function the prompt offers, for the engine's grammar: with `schema`, a strict tool whose arguments must be
 * JSON the schema accepts; null, a tool whose arguments stay free.
 */
export interface ArgumentSchema {
  name: string
  schema: Record<string, unknown> | null
}

/** A function without parameters takes an empty object. */
const NO_PARAMETERS = Object.freeze({ type: 'object', properties: {}, additionalProperties: false })

/**
 * The offered functions with the schemas of the strict ones (Chat `tools[i].function.strict`, Responses
 * `tools[i].strict`: `true` only; OpenAI's Responses API takes an absent `strict` as true, but here a tool is
 * strict only when it says so, so that a schema outside the subset never turns a working request into a 400).
 * Undefined when no tool is strict: nothing to enforce. `tools` was checked by `functionTools` already.
 */
export function argumentSchemas(tools: unknown, shape: 'chat' | 'responses'): ArgumentSchema[] | undefined {
  if (!Array.isArray(tools)) return undefined
  // The function tools (`functionTools` checked them, and left the built-in ones out), at their own indices.
  const functions = tools.flatMap((tool, i) => (isRecord(tool) && tool.type === 'function' ? [[tool, i] as const] : []))
  const strict = functions.map(([tool, i]) => strictOf(tool, shape, i))
  if (!strict.includes(true)) return undefined
  return functions.map(([tool, i], k) => {
    const fields = (shape === 'chat' ? tool.function : tool) as Record<string, unknown>
    if (!strict[k]) return { name: fields.name as string, schema: null }
    const schema = (fields.parameters ?? NO_PARAMETERS) as Record<string, unknown>
    checkEnforceable(schema, shape === 'chat' ? `tools[${i}].function.parameters` : `tools[${i}].parameters`)
    return { name: fields.name as string, schema }
  })
}

function strictOf(tool: unknown, shape: 'chat' | 'responses', i: number): boolean {
  const fields = shape === 'chat' ? (tool as { function?: unknown }).function : tool
  const strict = isRecord(fields) ? fields.strict : undefined
  const param = shape === 'chat' ? `tools[${i}].function.strict` : `tools[${i}].strict`
  if (strict !== undefined && strict !== null && typeof strict !== 'boolean') fail(`${param} must be a boolean`, param)
  return strict === true
}

/** OpenAI's rule for a response format's name. */
const FORMAT_NAME = /^[A-Za-z0-9_-]{1,64}$/

const JSON_OBJECT: ResponseFormat = { format: 'json_object', name: 'json_object', schema: { type: 'object' } }

/**
 * A response format: Chat `response_format` (`{ type, json_schema: { name, description, schema, strict } }`)
 * or Responses `text.format` (`{ type, name, description, schema, strict }`). `text` asks for nothing.
 * A schema is enforced whatever `strict` says (vLLM and SGLang enforce it too): an answer that follows the
 * schema is what a client sending one is after.
 */
export function responseFormat(value: unknown, param: string, shape: 'chat' | 'responses'): ResponseFormat | undefined {
  if (value === undefined || value === null) return undefined
  const format = object(value, param)
  const type = string(format.type, `${param}.type`)
  if (type === 'text') return undefined
  if (type === 'json_object') return JSON_OBJECT
  if (type !== 'json_schema')
    fail(`${param}.type must be 'text', 'json_object' or 'json_schema', not ${JSON.stringify(type).slice(0, 40)}`, `${param}.type`)
  const at = shape === 'chat' ? `${param}.json_schema` : param
  const fields = shape === 'chat' ? object(format.json_schema, at) : format
  const name = string(fields.name, `${at}.name`)
  if (!FORMAT_NAME.test(name)) fail(`${at}.name must be 1 to 64 letters, digits, '_' or '-'`, `${at}.name`)
  const description = optionalString(fields.description, `${at}.description`)
  if (fields.strict !== undefined && fields.strict !== null && typeof fields.strict !== 'boolean')
    fail(`${at}.strict must be a boolean`, `${at}.strict`)
  // OpenAI: a json_schema format without a schema takes any JSON object.
  const schema = fields.schema === undefined || fields.schema === null ? { type: 'object' } : object(fields.schema, `${at}.schema`)
  checkEnforceable(schema, `${at}.schema`)
  return { format: 'json_schema', name, ...(description === undefined ? {} : { description }), schema }
}
