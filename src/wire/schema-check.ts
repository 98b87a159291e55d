/**
 * The check of a structured output after generation: is the answer JSON, and does it match the request's
 * schema? The engine's grammar should already have made it so; this check is what tells a client when it
 * did not (an engine that ignored the grammar, a recording, an answer cut by the token limit), as an
 * `invalid-structured-output` diagnostic instead of silence.
 *
 * Ajv compiles each schema once, by the draft its `$schema` names (draft-07, 2019-09, 2020-12; none: 2020-12),
 * with ajv-formats for `date`, `time`, `date-time`, `uuid`: the Agents SDK and the AI SDK send draft-07 schemas,
 * which a 2020-12 validator cannot compile. A gateway compiles a request's schemas before it generates
 * (`schemaCompileProblem`), so a schema that cannot be checked is a 400, not a note after the answer. Compiled
 * checks are kept by the schema's JSON text, at most `MAX_COMPILED`, the oldest dropped first.
 * `pattern` is not tested here: JavaScript's backtracking regular expressions can take exponential time on a
 * hostile pattern, which would hold the event loop, while the engines' grammars enforce patterns as automata.
 */
import type Ajv from 'ajv'
import type { ValidateFunction } from 'ajv'
import { requireOptional } from '../base/optional-package'
import type { HarmonyDiagnostic } from '../base/types'

/** Compiled schemas kept (a gateway sees few distinct schemas; each compiled one is a function of its own). */
const MAX_COMPILED = 256

/** Ajv's regular expression engine, for which every pattern passes: see the module comment. */
const untestedPatterns = Object.assign(() => ({ test: () => true }), { code: 'untestedPatterns' })

type Draft = 'draft-07' | '2019-09' | '2020-12'

/** The Ajv module of each draft, and the meta-schema URI it knows the draft by. */
const DRAFTS: Record<Draft, { module: string; uri: string }> = {
  'draft-07': { module: 'ajv', uri: 'http://json-schema.org/draft-07/schema#' },
  '2019-09': { module: 'ajv/dist/2019', uri: 'https://json-schema.org/draft/2019-09/schema' },
  '2020-12': { module: 'ajv/dist/2020', uri: 'https://json-schema.org/draft/2020-12/schema' },
}

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

/** Schema nodes (objects and arrays) compiled at most: compiling is on the event loop, and grows with them. */
const MAX_SCHEMA_NODES = 2000

function nodesOf(value: unknown, limit: number): number {
  if (value === null || typeof value !== 'object') return 0
  let count = 1
  for (const child of Object.values(value)) {
    count += nodesOf(child, limit - count)
    if (count > limit) break
  }
  return count
}

/**
 * The validators, each made on its first check: loading Ajv takes about 40 ms, which a process that never sees a
 * response format should not pay at start. Schemas are not registered by their `$id` (two requests may use one
 * id for different schemas), nor logged (Ajv prints the code of a schema it cannot compile).
 */
const checkers: Partial<Record<Draft, Ajv>> = {}

function checker(draft: Draft): Ajv {
  let ajv = checkers[draft]
  if (ajv === undefined) {
    const { default: Validator } = requireOptional<{ default: typeof Ajv }>(DRAFTS[draft].module, 'Checking structured outputs')
    const { default: addFormats } = requireOptional<typeof import('ajv-formats')>('ajv-formats', 'Checking structured outputs')
    ajv = new Validator({ strict: false, allErrors: false, addUsedSchema: false, logger: false, code: { regExp: untestedPatterns } })
    addFormats(ajv, ['date', 'time', 'date-time', 'uuid'])
    checkers[draft] = ajv
  }
  return ajv
}

/** A compiled check, with what Ajv keeps of it (dropped with it), or why the schema does not compile. */
type Compiled = { check: ValidateFunction; draft: Draft; schema: object } | string

const compiled = new Map<string, Compiled>()

/** Why nothing can be checked: the validator's package is not installed (`message` names it). */
interface ValidatorMissing {
  validatorMissing: string
}

function compile(schema: object): Compiled | ValidatorMissing {
  const draft = draftOf(schema)
  if (draft !== 'draft-07' && draft !== '2019-09' && draft !== '2020-12') return draft
  if (nodesOf(schema, MAX_SCHEMA_NODES) > MAX_SCHEMA_NODES) return `the schema has more than ${MAX_SCHEMA_NODES} objects and arrays`
  // Ajv knows each draft by one URI: the schema is compiled with that one.
  const canonical = (schema as { $schema?: unknown }).$schema === undefined ? schema : { ...schema, $schema: DRAFTS[draft].uri }
  try {
    return { check: checker(draft).compile(canonical), draft, schema: canonical }
  } catch (error) {
    // A missing validator is the operator's to fix, not the request's: said, and not kept.
    if ((error as { code?: unknown }).code === 'package-missing') return { validatorMissing: (error as Error).message }
    return error instanceof Error ? error.message : String(error)
  }
}

/** The compiled check of `schema`, or why it does not compile. */
function checkOf(schema: object): ValidateFunction | string | ValidatorMissing {
  const key = JSON.stringify(schema)
  let entry = compiled.get(key)
  if (entry === undefined) {
    const made = compile(schema)
    if (typeof made === 'object' && 'validatorMissing' in made) return made
    entry = made
    if (compiled.size >= MAX_COMPILED) {
      const oldest = compiled.keys().next().value as string
      const dropped = compiled.get(oldest)
      compiled.delete(oldest)
      // Ajv keeps every schema it compiled, by the object: dropped with the entry, so memory stays bounded.
      if (typeof dropped === 'object') checker(dropped.draft).removeSchema(dropped.schema)
    }
  } else {
    // Most recently used last.
    compiled.delete(key)
  }
  compiled.set(key, entry)
  return typeof entry === 'string' ? entry : entry.check
}

/**
 * Why `schema` cannot be checked (its draft, or Ajv's compile error), or null when it can, or when no validator
 * is installed (the engine's grammar still holds the answer to it; the adapters then say it was not checked).
 */
export function schemaCompileProblem(schema: object): string | null {
  const check = checkOf(schema)
  return typeof check === 'string' ? check : null
}

/** What is wrong with `text` as JSON matching `schema`, or null when nothing is. */
export function schemaProblem(text: string, schema: object): string | null {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return 'is not valid JSON'
  }
  const check = checkOf(schema)
  if (typeof check === 'object') return `could not be checked: ${check.validatorMissing}`
  if (typeof check === 'string') return `could not be checked: the schema does not compile (${check})`
  if (check(value)) return null
  const error = check.errors?.[0]
  return error === undefined
    ? 'does not match the schema'
    : `does not match the schema: ${error.instancePath || '/'} ${error.message ?? ''}`.trim()
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
