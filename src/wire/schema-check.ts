/**
 * The check of a structured output after generation: is the answer JSON, and does it match the request's
 * schema? The engine's grammar should already have made it so; this check is what tells a client when it
 * did not (an engine that ignored the grammar, a recording, an answer cut by the token limit), as an
 * `invalid-structured-output` diagnostic instead of silence.
 *
 * Ajv (JSON Schema 2020-12, with ajv-formats for `date`, `time`, `date-time`, `uuid`) compiles each schema once;
 * compiled checks are kept by the schema's JSON text, at most `MAX_COMPILED`, the oldest dropped first.
 * `pattern` is not tested here: JavaScript's backtracking regular expressions can take exponential time on a
 * hostile pattern, which would hold the event loop, while the engines' grammars enforce patterns as automata.
 */
import type { ValidateFunction } from 'ajv'
import type Ajv2020 from 'ajv/dist/2020'
import { requireOptional } from '../base/optional-package'
import type { HarmonyDiagnostic } from '../base/types'

/** Compiled schemas kept (a gateway sees few distinct schemas; each compiled one is a function of its own). */
const MAX_COMPILED = 256

/** Ajv's regular expression engine, for which every pattern passes: see the module comment. */
const untestedPatterns = Object.assign(() => ({ test: () => true }), { code: 'untestedPatterns' })

/**
 * Ajv, made on the first check: loading it takes about 40 ms, which a process that never sees a response
 * format should not pay at start.
 */
let ajv: Ajv2020 | undefined

function checker(): Ajv2020 {
  if (ajv === undefined) {
    const { default: Ajv } = requireOptional<typeof import('ajv/dist/2020')>('ajv/dist/2020', 'Checking structured outputs')
    const { default: addFormats } = requireOptional<typeof import('ajv-formats')>('ajv-formats', 'Checking structured outputs')
    ajv = new Ajv({ strict: false, allErrors: false, code: { regExp: untestedPatterns } })
    addFormats(ajv, ['date', 'time', 'date-time', 'uuid'])
  }
  return ajv
}

const compiled = new Map<string, ValidateFunction | string>()

/** The compiled check of `schema`, or why it does not compile (a schema the request check let through). */
function checkOf(schema: object): ValidateFunction | string {
  const key = JSON.stringify(schema)
  let check = compiled.get(key)
  if (check !== undefined) {
    // Most recently used last.
    compiled.delete(key)
    compiled.set(key, check)
    return check
  }
  try {
    check = checker().compile(schema)
  } catch (error) {
    check = error instanceof Error ? error.message : String(error)
  }
  if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value as string)
  compiled.set(key, check)
  return check
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
