/**
 * Checks a `GenerateRequest` before any engine sees it, so a bad request fails here with a TypeError or
 * RangeError naming the field, not as an engine's 400 (or, worse, as a request the engine quietly reads
 * otherwise: a float temperature sent as a string, a stop id it does not know).
 */
import { CALL, END, END_OF_TEXT, RETURN } from '../backend/tokens'
import { HarmonyRequestError } from '../base/errors'
import { checkEnforceable } from '../render/output-schema'
import { type Engine, type GenerateRequest, SAMPLING_FIELDS, type SamplingField } from './types'

/**
 * The last id a gpt-oss model knows: its vocabulary (o200k_harmony, the embedding's rows) has 201,088 ids,
 * 0 to 201087. Every id sent to an engine or read from one is checked against it. (The parser accepts one
 * more, 201088, because the reference Harmony encoding names it: docs/SEMANTICS.md "Special token ids".)
 */
export const LAST_MODEL_TOKEN = 201_087

/** An id a gpt-oss model can be given or generate: 0 to 201087. */
export function isTokenId(id: unknown): id is number {
  return Number.isInteger(id) && (id as number) >= 0 && (id as number) <= LAST_MODEL_TOKEN
}

/**
 * Where generation ends unless a request says otherwise: `<|return|>` and `<|call|>` (the reference's
 * stop tokens for assistant actions) and `<|endoftext|>`, which gpt-oss's generation config also lists as
 * an end of sequence and llama.cpp stops at. The adapters end a completion at `<|endoftext|>` too.
 */
export const GENERATION_STOP_TOKENS: readonly number[] = Object.freeze([RETURN, CALL, END_OF_TEXT])

/**
 * Checks a request as the package's clients do (each field's type and range); with `engine`, also that it sets
 * no sampling field the engine does not apply (`checkEngineSampling`).
 */
export function checkGenerateRequest(request: Partial<GenerateRequest>, where: string, engine?: Engine): void {
  if (request === null || typeof request !== 'object') throw new TypeError(`${where}: the request must be an object`)
  const { tokens } = request
  if (!(tokens instanceof Uint32Array) && !Array.isArray(tokens))
    throw new TypeError(`${where}: tokens must be a Uint32Array or an array of token ids`)
  for (let i = 0; i < tokens.length; i++) {
    if (!isTokenId(tokens[i]))
      throw new RangeError(`${where}: tokens[${i}] is ${String(tokens[i])}, not a token id from 0 to ${LAST_MODEL_TOKEN}`)
  }
  if (request.maxTokens !== undefined && (!Number.isSafeInteger(request.maxTokens) || request.maxTokens < 1)) {
    throw new RangeError(`${where}: maxTokens must be a positive integer, not ${String(request.maxTokens)}`)
  }
  for (const key of ['temperature', 'topP'] as const) {
    const value = request[key]
    if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value) || value < 0)) {
      throw new RangeError(`${where}: ${key} must be a finite non-negative number, not ${String(value)}`)
    }
  }
  if (request.seed !== undefined && !Number.isSafeInteger(request.seed))
    throw new RangeError(`${where}: seed must be an integer, not ${String(request.seed)}`)
  for (const key of ['presencePenalty', 'frequencyPenalty'] as const) {
    const value = request[key]
    if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value) || value < -2 || value > 2)) {
      throw new RangeError(`${where}: ${key} must be a number from -2 to 2, not ${String(value)}`)
    }
  }
  if (request.logitBias !== undefined) checkLogitBias(request.logitBias, where)
  for (const key of ['traceparent', 'tracestate', 'affinityKey'] as const)
    if (request[key] !== undefined && typeof request[key] !== 'string') throw new TypeError(`${where}: ${key} must be a string`)
  if (request.onEngine !== undefined && typeof request.onEngine !== 'function') throw new TypeError(`${where}: onEngine must be a function`)
  if (request.stopTokens !== undefined) {
    if (!Array.isArray(request.stopTokens)) throw new TypeError(`${where}: stopTokens must be an array of token ids`)
    request.stopTokens.forEach((id, i) => {
      if (!isTokenId(id)) throw new RangeError(`${where}: stopTokens[${i}] is ${String(id)}, not a token id from 0 to ${LAST_MODEL_TOKEN}`)
    })
    if (request.stopTokens.includes(END))
      throw new RangeError(`${where}: stopTokens must not hold <|end|> (${END}): it separates messages within one completion`)
  }
  if (request.responseFormat !== undefined) checkResponseFormat(request.responseFormat, where)
  if (request.argumentSchemas !== undefined) checkArgumentSchemas(request.argumentSchemas, where)
  if (request.callArguments !== undefined) {
    const schema = (request.callArguments as { schema?: unknown } | null)?.schema
    if (schema === null || typeof schema !== 'object' || Array.isArray(schema))
      throw new TypeError(`${where}: callArguments must be an object { schema: object }`)
    if (request.responseFormat !== undefined || request.argumentSchemas !== undefined)
      throw new TypeError(
        `${where}: callArguments constrains the whole completion: it takes no responseFormat or argumentSchemas beside it`,
      )
    checkEnforceable(schema, 'callArguments.schema')
  }
  if (
    request.logprobs !== undefined &&
    (!Number.isSafeInteger(request.logprobs) || request.logprobs < 0 || request.logprobs > MAX_TOP_LOGPROBS)
  )
    throw new RangeError(`${where}: logprobs must be an integer from 0 to ${MAX_TOP_LOGPROBS}, not ${String(request.logprobs)}`)
  if (request.signal !== undefined && !(request.signal instanceof AbortSignal))
    throw new TypeError(`${where}: signal must be an AbortSignal`)
  if (engine !== undefined) checkEngineSampling(request as GenerateRequest, engine)
}

/**
 * A response format of the subset the engines' grammars enforce: a name, and a schema `checkEnforceable`
 * takes (a schema outside it is a `HarmonyRequestError` naming the keyword, a 400 through the HTTP helpers).
 */
function checkResponseFormat(format: unknown, where: string): void {
  const { name, schema } = (format ?? {}) as { name?: unknown; schema?: unknown }
  if (typeof name !== 'string' || schema === null || typeof schema !== 'object' || Array.isArray(schema))
    throw new TypeError(`${where}: responseFormat must be an object { name: string, schema: object }`)
  checkEnforceable(schema, 'responseFormat.schema')
}

/** Offered functions by name, each with the schema of its arguments (a strict tool) or null. */
function checkArgumentSchemas(schemas: unknown, where: string): void {
  if (!Array.isArray(schemas)) throw new TypeError(`${where}: argumentSchemas must be an array of { name, schema }`)
  schemas.forEach((entry, i) => {
    const { name, schema } = (entry ?? {}) as { name?: unknown; schema?: unknown }
    if (typeof name !== 'string' || !/^[A-Za-z0-9_.-]{1,128}$/.test(name))
      throw new TypeError(`${where}: argumentSchemas[${i}].name must be a function name (1 to 128 letters, digits, '_', '-' or '.')`)
    if (schema !== null && (typeof schema !== 'object' || Array.isArray(schema)))
      throw new TypeError(`${where}: argumentSchemas[${i}].schema must be a JSON Schema object or null`)
    if (schema !== null) checkEnforceable(schema, `argumentSchemas[${i}].schema`)
  })
}

/** The most alternatives per position OpenAI reports (`top_logprobs`). */
export const MAX_TOP_LOGPROBS = 20

/** Largest logit bias OpenAI takes, either way. */
const MAX_BIAS = 100

/**
 * What is wrong with a logit bias (an object of token id to a bias from -100 to 100), with `name` as the field
 * is called where it was given (`logitBias`, `logit_bias`); null when nothing is. `kind` tells a value of the
 * wrong shape from one out of range. The one check of the engine clients and of the HTTP helpers.
 */
export function logitBiasProblem(bias: unknown, name: string): { kind: 'type' | 'range'; message: string } | null {
  if (bias === null || typeof bias !== 'object' || Array.isArray(bias))
    return { kind: 'type', message: `${name} must be an object of token id to bias` }
  for (const [key, value] of Object.entries(bias)) {
    if (!/^(0|[1-9][0-9]*)$/.test(key) || !isTokenId(Number(key)))
      return { kind: 'range', message: `${name} key ${JSON.stringify(key).slice(0, 40)} is not a token id from 0 to ${LAST_MODEL_TOKEN}` }
    if (typeof value !== 'number' || !Number.isFinite(value) || Math.abs(value) > MAX_BIAS)
      return { kind: 'range', message: `${name}[${key}] must be a number from -${MAX_BIAS} to ${MAX_BIAS}, not ${String(value)}` }
  }
  return null
}

function checkLogitBias(bias: unknown, where: string): void {
  const problem = logitBiasProblem(bias, 'logitBias')
  if (problem !== null) throw new (problem.kind === 'type' ? TypeError : RangeError)(`${where}: ${problem.message}`)
}

/**
 * A request that sets a sampling field `engine` does not apply is refused as a request error (HTTP 400 naming
 * OpenAI's field), rather than sent to an engine that would ignore it.
 */
function checkEngineSampling(request: GenerateRequest, engine: Engine): void {
  const applies = engine.sampling
  if (applies === undefined) return
  for (const [field, param] of Object.entries(SAMPLING_FIELDS) as [SamplingField, string][]) {
    if (request[field] !== undefined && !applies.includes(field))
      throw new HarmonyRequestError(`${param} is not supported by the ${engine.name} engine`, param)
  }
}
