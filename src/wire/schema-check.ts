/**
 * The check of a structured output after generation: is the answer JSON, and does it match the request's
 * schema? The engine's grammar should already have made it so; this check is what tells a client when it
 * did not (an engine that ignored the grammar, a recording, an answer cut by the token limit), as an
 * `invalid-structured-output` diagnostic instead of silence.
 *
 * The validator is @cfworker/json-schema, which interprets a schema instead of compiling it to code: a
 * gateway checks schemas its clients send, one per request, and a code-generating validator (Ajv, used here
 * before) spent about 0.4 s of the event loop on a 1,000-property schema, printed its generated code, and made
 * code nested so deep that V8 overflowed its stack parsing it. Interpreted, the same schema takes milliseconds
 * to prepare and to check, and nothing is generated. Drafts: by `$schema` (draft-07, 2019-09, 2020-12; none:
 * 2020-12): the Agents SDK and the AI SDK send draft-07. A gateway prepares a request's schemas before it
 * generates (`schemaCompileProblem`), so a schema that cannot be checked is a 400, not a note after the answer.
 * `pattern` is not tested: JavaScript's backtracking regular expressions can take exponential time on a hostile
 * pattern, which would hold the event loop, while the engines' grammars enforce patterns as automata.
 */
import type { Schema, SchemaDraft, Validator } from '@cfworker/json-schema'
import { requireOptional } from '../base/optional-package'
import type { HarmonyDiagnostic } from '../base/types'

/** Validators kept, by the schema's JSON text, the least recently used dropped first. */
const MAX_KEPT = 256
/** …and their schemas' JSON text, in characters at most: a few very large schemas cannot fill memory. */
const MAX_KEPT_CHARS = 16 << 20

/** Schema nodes (objects and arrays) checked at most: preparing and checking grow with them. */
const MAX_SCHEMA_NODES = 20_000
/** Nesting of a schema, at most (the copy that leaves `pattern` out recurses). */
const MAX_SCHEMA_DEPTH = 256

type Draft = 'draft-07' | '2019-09' | '2020-12'

const DRAFTS: Record<Draft, SchemaDraft> = { 'draft-07': '7', '2019-09': '2019-09', '2020-12': '2020-12' }

/** The draft a `$schema` names (http or https, with or without the empty fragment), or why it names none. */
function draftOf(schema: object): Draft | string {
  const uri = (schema as { $schema?: unknown }).$schema
  if (uri === undefined) return '2020-12'
  const name = typeof uri === 'string' ? uri.replace(/^https?:\/\//, '').replace(/#$/, '') : ''
  if (name === 'json-schema.org/draft-07/schema') return 'draft-07'
  if (name === 'json-schema.org/draft/2019-09/schema') return '2019-09'
  if (name === 'json-schema.org/draft/2020-12/schema') return '2020-12'
  return `$schema ${JSON.stringify(uri).slice(0, 80)} is not a draft this gateway checks (draft-07, 2019-09, 2020-12)`
}

/** Keywords whose value is a map of names to schemas: the names are not keywords. */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas', 'dependencies'])
/** Keywords whose value is data, not schemas: kept as it is. */
const VALUES = new Set(['enum', 'const', 'default', 'examples'])

/**
 * A copy of `schema` without its `pattern` keywords (see the module comment), counting its nodes; a property
 * *named* `pattern` stays, and so do values (`enum`, `const`…). The copy is also what the validator annotates (it marks the objects it resolves),
 * so the caller's schema is left as it came. Throws a string: why the schema is too large to check.
 */
function withoutPatterns(schema: unknown, budget: { nodes: number }, depth = 0, inMap = false): unknown {
  if (schema === null || typeof schema !== 'object') return schema
  if (--budget.nodes < 0) throw `the schema has more than ${MAX_SCHEMA_NODES} objects and arrays`
  if (depth > MAX_SCHEMA_DEPTH) throw `the schema nests more than ${MAX_SCHEMA_DEPTH} deep`
  if (Array.isArray(schema)) return schema.map((inner) => withoutPatterns(inner, budget, depth + 1))
  const copy: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(schema)) {
    if (!inMap && key === 'pattern' && typeof value === 'string') continue
    copy[key] = !inMap && VALUES.has(key) ? value : withoutPatterns(value, budget, depth + 1, !inMap && SCHEMA_MAPS.has(key))
  }
  return copy
}

/** A validator, with the length of the schema text it is kept by; or why the schema cannot be checked. */
type Prepared = { validator: Validator; chars: number } | string

const kept = new Map<string, Prepared>()
let keptChars = 0

/** Why nothing can be checked: the validator's package is not installed (`message` names it). */
interface ValidatorMissing {
  validatorMissing: string
}

function prepare(schema: object, chars: number): Prepared | ValidatorMissing {
  const draft = draftOf(schema)
  if (draft !== 'draft-07' && draft !== '2019-09' && draft !== '2020-12') return draft
  let module: typeof import('@cfworker/json-schema')
  try {
    module = requireOptional('@cfworker/json-schema', 'Checking structured outputs')
  } catch (error) {
    // A missing validator is the operator's to fix, not the request's: said, and not kept.
    return { validatorMissing: (error as Error).message }
  }
  try {
    const copy = withoutPatterns(schema, { nodes: MAX_SCHEMA_NODES }) as Schema
    return { validator: new module.Validator(copy, DRAFTS[draft], true), chars }
  } catch (error) {
    if (typeof error === 'string') return error
    return error instanceof RangeError ? 'the schema nests too deep to check' : String((error as Error).message ?? error)
  }
}

/** The validator of `schema`, or why it cannot be checked. */
function validatorOf(schema: object): Validator | string | ValidatorMissing {
  const key = JSON.stringify(schema)
  let entry = kept.get(key)
  if (entry === undefined) {
    const made = prepare(schema, key.length)
    if (typeof made === 'object' && 'validatorMissing' in made) return made
    entry = made
    keptChars += key.length
    while (kept.size >= MAX_KEPT || (keptChars > MAX_KEPT_CHARS && kept.size > 0)) {
      const oldest = kept.keys().next().value as string
      kept.delete(oldest)
      keptChars -= oldest.length
    }
  } else {
    // Most recently used last.
    kept.delete(key)
  }
  kept.set(key, entry)
  return typeof entry === 'string' ? entry : entry.validator
}

/**
 * Why `schema` cannot be checked (its draft, its size, its nesting), or null when it can, or when no validator
 * is installed (the engine's grammar still holds the answer to it; the adapters then say it was not checked).
 */
export function schemaCompileProblem(schema: object): string | null {
  const validator = validatorOf(schema)
  return typeof validator === 'string' ? validator : null
}

/** What is wrong with `text` as JSON matching `schema`, or null when nothing is. */
function schemaProblem(text: string, schema: object): string | null {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return 'is not valid JSON'
  }
  const validator = validatorOf(schema)
  if (typeof validator === 'object' && 'validatorMissing' in validator) return `could not be checked: ${validator.validatorMissing}`
  if (typeof validator === 'string') return `could not be checked: ${validator}`
  let result: ReturnType<Validator['validate']>
  try {
    result = validator.validate(value)
  } catch (error) {
    // A reference the schema does not hold, or a value nested deeper than the stack.
    const why = error instanceof RangeError ? 'the value nests too deep' : String((error as Error).message ?? error)
    return `could not be checked: ${why}`
  }
  if (result.valid) return null
  // The last error is the innermost: the one that says what is wrong, where; but not a `false` schema's
  // ("False boolean schema."), whose parent names the property it refused.
  const errors = result.errors
  const error = errors.at(-1)?.keyword === 'false' && errors.length > 1 ? errors.at(-2) : errors.at(-1)
  return error === undefined
    ? 'does not match the schema'
    : `does not match the schema: ${error.instanceLocation.replace(/^#/, '') || '/'} ${error.error}`.trim()
}

/** The diagnostic of an answer that is not the JSON its response format asks for (null when it is). */
export function structuredOutputDiagnostic(
  text: string,
  format: { name: string; schema: object },
  tokenOffset: number,
): HarmonyDiagnostic | null {
  const problem = schemaProblem(text, format.schema)
  if (problem === null) return null
  return { code: 'invalid-structured-output', message: `the answer (response format ${format.name}) ${problem}`, tokenOffset, text }
}

/**
 * A strict tool's arguments that do not match its schema (`AdapterOptions.argumentSchemas`): an
 * `invalid-tool-arguments` diagnostic; null when they match, or when the tool has no schema.
 */
export function strictArgumentsDiagnostic(
  call: { name: string; id: string; arguments: string },
  schemas: readonly { name: string; schema: object | null }[] | undefined,
  tokenOffset: number,
): (HarmonyDiagnostic & { toolCallId: string }) | null {
  const schema = schemas?.find((entry) => entry.name === call.name)?.schema
  if (schema === undefined || schema === null) return null
  const problem = schemaProblem(call.arguments, schema)
  if (problem === null) return null
  return {
    code: 'invalid-tool-arguments',
    message: `the arguments of tool call ${call.name} (strict) ${problem}; passed through as they are`,
    tokenOffset,
    text: call.arguments,
    toolCallId: call.id,
  }
}
