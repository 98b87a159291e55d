/**
 * The fields of a Chat Completions or Responses request that steer generation (the conversation itself is
 * checked by the renderer): each must have the type and range OpenAI documents, else 400 naming it. Every
 * other field is checked against the API's table of fields first (fields.ts).
 */
import { checkOptions, is, type OptionSpec } from '../base/options'
import { logitBiasProblem, MAX_TOP_LOGPROBS } from '../engines/request'
import { STOP_STRINGS } from '../wire/options'
import { HttpError } from './errors'
import { checkRequestFields, type RequestApi } from './fields'

export interface GenerationParameters {
  model: string
  stream: boolean
  /**
   * Chat `n`: how many choices to generate, 1 to `MAX_CHOICES`, each a generation of its own of the one
   * prompt (1 for Responses, which has no such field).
   */
  n: number
  /** Chat `stream_options.include_usage`. */
  includeUsage: boolean
  maxTokens: number | undefined
  temperature: number | undefined
  topP: number | undefined
  seed: number | undefined
  /** `prompt_cache_key`: requests sharing it go to one engine of a group (`GenerateRequest.affinityKey`). */
  affinityKey: string | undefined
  presencePenalty: number | undefined
  frequencyPenalty: number | undefined
  /** Chat `logit_bias`: token id → bias. */
  logitBias: Record<number, number> | undefined
  /** Chat `stop`: up to 4 strings that end the answer (the adapters' `stop` option). */
  stop: string[] | undefined
  /** Responses `background: true`: run detached, answered at once as `queued` (a gateway that keeps responses). */
  background: boolean
  /**
   * Log probabilities asked for (Chat `logprobs: true`, Responses `include: ['message.output_text.logprobs']`):
   * the number of alternatives per token (`top_logprobs`, 0 when not given); undefined when none are asked for.
   */
  logprobs: number | undefined
  /**
   * Responses `include: ['reasoning.encrypted_content']`: each reasoning item carries its reasoning sealed, for a
   * client that keeps no responses here to send back (false for Chat).
   */
  encryptedReasoning: boolean
}

/**
 * The most choices one Chat request may ask for (`n`). Each is a generation of its own (an engine sequence,
 * a parser, a place in a key's limits), so one request cannot fan out without bound; OpenAI's reference names no
 * maximum. Eight covers sampling several answers to pick from.
 */
const MAX_CHOICES = 8

function bad(param: string, message: string): never {
  throw new HttpError(400, `${param} ${message}`, { param, code: 'invalid-parameter' })
}

function optionalNumber(body: Record<string, unknown>, param: string, min: number, max: number): number | undefined {
  const value = body[param]
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max)
    bad(param, `must be a number from ${min} to ${max}`)
  return value
}

function optionalInteger(body: Record<string, unknown>, param: string, min: number): number | undefined {
  const value = body[param]
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) bad(param, `must be an integer of at least ${min}`)
  return value
}

export interface GenerationParameterOptions {
  /** Longest `model` accepted, in characters: it is repeated in every chunk of the stream. Default 256. */
  maxModelLength?: number
  /**
   * A field no table of fields.ts knows: `'refuse'` (default) answers 400 as OpenAI does ("Unrecognized
   * request argument supplied"); `'ignore'` takes the request without it.
   */
  unknownFields?: 'refuse' | 'ignore'
}

export const DEFAULT_MAX_MODEL_LENGTH = 256

const PARAMETER_OPTIONS: OptionSpec = { maxModelLength: is.integer(1), unknownFields: is.oneOf('refuse', 'ignore') }

function common(
  api: RequestApi,
  body: Record<string, unknown>,
  options: GenerationParameterOptions,
  where: string,
): Omit<
  GenerationParameters,
  'n' | 'maxTokens' | 'includeUsage' | 'logitBias' | 'stop' | 'logprobs' | 'background' | 'encryptedReasoning'
> {
  const checked = checkOptions<GenerationParameterOptions>(options, PARAMETER_OPTIONS, where)
  const maxModelLength = checked.maxModelLength ?? DEFAULT_MAX_MODEL_LENGTH
  checkRequestFields(api, body, checked.unknownFields)
  if (typeof body.model !== 'string' || body.model === '') bad('model', 'must be a non-empty string')
  if (body.model.length > maxModelLength) bad('model', `must be at most ${maxModelLength} characters (it is repeated in every chunk)`)
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== 'boolean') bad('stream', 'must be a boolean')
  const seed = body.seed === undefined || body.seed === null ? undefined : body.seed
  if (seed !== undefined && (typeof seed !== 'number' || !Number.isSafeInteger(seed))) bad('seed', 'must be an integer')
  const affinityKey = body.prompt_cache_key === undefined || body.prompt_cache_key === null ? undefined : body.prompt_cache_key
  if (affinityKey !== undefined && typeof affinityKey !== 'string') bad('prompt_cache_key', 'must be a string')
  return {
    model: body.model,
    stream: body.stream === true,
    temperature: optionalNumber(body, 'temperature', 0, 2),
    topP: optionalNumber(body, 'top_p', 0, 1),
    seed: seed as number | undefined,
    affinityKey: affinityKey as string | undefined,
    presencePenalty: optionalNumber(body, 'presence_penalty', -2, 2),
    frequencyPenalty: optionalNumber(body, 'frequency_penalty', -2, 2),
  }
}

/** Chat `logprobs` and `top_logprobs` (which needs `logprobs: true`, as OpenAI answers). */
function chatLogprobs(body: Record<string, unknown>): number | undefined {
  const asked = body.logprobs
  if (asked !== undefined && asked !== null && typeof asked !== 'boolean') bad('logprobs', 'must be a boolean')
  const top = optionalInteger(body, 'top_logprobs', 0)
  if (top !== undefined && top > MAX_TOP_LOGPROBS) bad('top_logprobs', `must be an integer from 0 to ${MAX_TOP_LOGPROBS}`)
  if (asked !== true) {
    if (top !== undefined) bad('top_logprobs', 'needs logprobs: true')
    return undefined
  }
  return top ?? 0
}

/** Responses `background`: a boolean, and only with `store` (a background response is kept to be polled or resumed). */
function background(body: Record<string, unknown>): boolean {
  const value = body.background
  if (value === undefined || value === null || value === false) return false
  if (value !== true) bad('background', 'must be a boolean')
  if (body.store === false) bad('background', 'needs store: a background response is kept to be polled')
  return true
}

/** What a Responses `include` may ask for here. */
const OUTPUT_TEXT_LOGPROBS = 'message.output_text.logprobs'
const ENCRYPTED_REASONING = 'reasoning.encrypted_content'
/** What python printed, in `code_interpreter_call` items (a gateway that runs python; nothing to include elsewhere). */
const CODE_OUTPUTS = 'code_interpreter_call.outputs'
const INCLUDABLE: readonly unknown[] = [OUTPUT_TEXT_LOGPROBS, ENCRYPTED_REASONING, CODE_OUTPUTS]

/** Responses `include`, each entry one this gateway can include. */
function responsesInclude(body: Record<string, unknown>): unknown[] {
  const include = body.include
  if (include !== undefined && include !== null && !Array.isArray(include)) bad('include', 'must be an array of strings')
  const items = (include ?? []) as unknown[]
  items.forEach((item, i) => {
    if (!INCLUDABLE.includes(item))
      throw new HttpError(
        400,
        `include[${i}] ${JSON.stringify(item).slice(0, 60)} is not supported: this gateway can include '${OUTPUT_TEXT_LOGPROBS}', '${ENCRYPTED_REASONING}' and '${CODE_OUTPUTS}'`,
        { param: `include[${i}]`, code: 'invalid-parameter' },
      )
  })
  return items
}

/** Responses `top_logprobs`: log probabilities only when `include` asks for them, as OpenAI does. */
function responsesLogprobs(body: Record<string, unknown>, include: unknown[]): number | undefined {
  const top = optionalInteger(body, 'top_logprobs', 0)
  if (top !== undefined && top > MAX_TOP_LOGPROBS) bad('top_logprobs', `must be an integer from 0 to ${MAX_TOP_LOGPROBS}`)
  return include.includes(OUTPUT_TEXT_LOGPROBS) ? (top ?? 0) : undefined
}

/** OpenAI takes at most 300 biased tokens. */
const MAX_LOGIT_BIAS = 300

/** Chat `stop`: a string or up to 4, none empty. */
function stopStrings(body: Record<string, unknown>): string[] | undefined {
  const value = body.stop
  if (value === undefined || value === null) return undefined
  // An empty list asks for nothing, as null does.
  if (Array.isArray(value) && value.length === 0) return undefined
  if (!STOP_STRINGS.test(value)) bad('stop', `must be ${STOP_STRINGS.what}`)
  return typeof value === 'string' ? [value] : (value as string[])
}

/** Chat `logit_bias`: `{"<token id>": bias}`, bias from -100 to 100, at most 300 ids. */
function logitBias(body: Record<string, unknown>): Record<number, number> | undefined {
  const value = body.logit_bias
  if (value === undefined || value === null) return undefined
  const problem = logitBiasProblem(value, 'logit_bias')
  if (problem !== null) throw new HttpError(400, problem.message, { param: 'logit_bias', code: 'invalid-parameter' })
  const entries = Object.entries(value as Record<string, number>)
  if (entries.length > MAX_LOGIT_BIAS) bad('logit_bias', `must hold at most ${MAX_LOGIT_BIAS} token ids`)
  return entries.length === 0 ? undefined : Object.fromEntries(entries.map(([id, bias]) => [Number(id), bias]))
}

export function chatGenerationParameters(body: Record<string, unknown>, options: GenerationParameterOptions = {}): GenerationParameters {
  const base = common('chat', body, options, 'chatGenerationParameters')
  const n = body.n ?? 1
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1 || n > MAX_CHOICES) bad('n', `must be an integer from 1 to ${MAX_CHOICES}`)
  const maxTokens = optionalInteger(body, 'max_completion_tokens', 1) ?? optionalInteger(body, 'max_tokens', 1)
  const streamOptions = body.stream_options
  if (streamOptions !== undefined && streamOptions !== null && (typeof streamOptions !== 'object' || Array.isArray(streamOptions)))
    bad('stream_options', 'must be an object')
  const includeUsage = (streamOptions as Record<string, unknown> | null | undefined)?.include_usage
  if (includeUsage !== undefined && typeof includeUsage !== 'boolean') bad('stream_options.include_usage', 'must be a boolean')
  const obfuscation = (streamOptions as Record<string, unknown> | null | undefined)?.include_obfuscation
  if (obfuscation !== undefined && obfuscation !== null && typeof obfuscation !== 'boolean')
    bad('stream_options.include_obfuscation', 'must be a boolean')
  const stop = stopStrings(body)
  const logprobs = chatLogprobs(body)
  // The adapters cannot give each token's log probability with text cut at a stop string.
  if (logprobs !== undefined && stop !== undefined) bad('logprobs', 'cannot be combined with stop here')
  return {
    ...base,
    n,
    maxTokens,
    includeUsage: includeUsage === true,
    logitBias: logitBias(body),
    stop,
    logprobs,
    encryptedReasoning: false,
    background: false,
  }
}

export function responsesGenerationParameters(
  body: Record<string, unknown>,
  options: GenerationParameterOptions = {},
): GenerationParameters {
  // Read by the gateway, not the engine: checked here so that no other type is looked up (or echoed as text).
  const previous = body.previous_response_id
  if (previous !== undefined && previous !== null && typeof previous !== 'string') bad('previous_response_id', 'must be a string')
  const include = responsesInclude(body)
  return {
    ...common('responses', body, options, 'responsesGenerationParameters'),
    n: 1,
    maxTokens: optionalInteger(body, 'max_output_tokens', 1),
    includeUsage: true,
    logitBias: undefined,
    stop: undefined,
    logprobs: responsesLogprobs(body, include),
    encryptedReasoning: include.includes(ENCRYPTED_REASONING),
    background: background(body),
  }
}
