/**
 * An AI SDK call (`LanguageModelV3CallOptions`) as the Chat Completions request it stands for, so that the
 * existing renderer and checks take it as they take any Chat request: the prompt's messages (system, user
 * text, assistant text, reasoning and tool calls, tool results), the function tools and `toolChoice`,
 * `responseFormat` as `response_format` (structured outputs), the sampling settings, and the provider options
 * (`reasoningEffort`). What Harmony cannot take is refused with the SDK's own errors, naming it: files,
 * provider-defined tools, a `toolChoice` a prompt cannot enforce. What the engines have no setting for
 * (`topK`, extra headers) is a warning, as the SDK's providers do.
 */
import type {
  LanguageModelV3CallOptions,
  LanguageModelV3Message,
  LanguageModelV3ToolResultOutput,
  SharedV3Warning,
  UnsupportedFunctionalityError,
} from '@ai-sdk/provider'
import { HarmonyRequestError } from '../base/errors'
import { HttpError } from '../http/errors'
import { aiSdkProvider } from './sdk'

type Json = Record<string, unknown>

/** What the provider options under the provider's name may hold. */
export interface HarmonyProviderOptions {
  /** Harmony's reasoning level, in the system message: `low`, `medium` (the default) or `high`. */
  reasoningEffort?: 'low' | 'medium' | 'high'
  /** `'recover'`: a call of an offered tool written as JSON in the answer becomes a tool call (docs/API.md). */
  textToolCalls?: 'off' | 'recover'
}

const PROVIDER_OPTIONS: Record<keyof HarmonyProviderOptions, readonly string[]> = {
  reasoningEffort: ['low', 'medium', 'high'],
  textToolCalls: ['off', 'recover'],
}

/** The SDK's settings that are Chat request fields as they are, each with its Chat name. */
const SAMPLING: readonly (readonly [keyof LanguageModelV3CallOptions, string])[] = [
  ['maxOutputTokens', 'max_tokens'],
  ['temperature', 'temperature'],
  ['topP', 'top_p'],
  ['seed', 'seed'],
  ['presencePenalty', 'presence_penalty'],
  ['frequencyPenalty', 'frequency_penalty'],
  ['stopSequences', 'stop'],
]

export interface ChatRequest {
  /** The Chat Completions body the call stands for. */
  body: Json
  /** What the call asked for that has no effect here. */
  warnings: SharedV3Warning[]
  /** The provider options read (checked). */
  providerOptions: HarmonyProviderOptions
}

/** The Chat Completions request of an AI SDK call; the SDK's errors for what Harmony cannot take. */
export function chatRequestOf(options: LanguageModelV3CallOptions, modelId: string, provider: string): ChatRequest {
  const warnings: SharedV3Warning[] = []
  const body: Json = { model: modelId, messages: options.prompt.flatMap((message, i) => messagesOf(message, i)) }
  const own = providerOptionsOf(options.providerOptions?.[provider], provider)
  const effort = own.reasoningEffort ?? reasoningLevel(options, warnings)
  if (own.reasoningEffort !== undefined && (options as AiSdk7Options).reasoning != null)
    warnings.push({
      type: 'other',
      message: `reasoning is overridden by providerOptions.${provider}.reasoningEffort (${own.reasoningEffort})`,
    })
  if (effort !== undefined) body.reasoning_effort = effort
  const tools = (options.tools ?? []).map((tool) => {
    if (tool.type !== 'function')
      throw new (aiSdkProvider().UnsupportedFunctionalityError)({
        functionality: `provider-defined tool ${tool.id}`,
        message: `the tool ${tool.name} (${tool.id}) is defined by another provider; gpt-oss takes function tools here`,
      })
    const fn: Json = { name: tool.name, parameters: tool.inputSchema }
    if (tool.description !== undefined) fn.description = tool.description
    if (tool.strict !== undefined) fn.strict = tool.strict
    return { type: 'function', function: fn }
  })
  if (tools.length > 0) body.tools = tools
  const choice = options.toolChoice
  if (choice !== undefined) {
    if (choice.type === 'auto' || choice.type === 'none') body.tool_choice = choice.type
    else
      throw new (aiSdkProvider().UnsupportedFunctionalityError)({
        functionality: `toolChoice ${choice.type === 'tool' ? `{ type: 'tool', toolName: '${choice.toolName}' }` : `'${choice.type}'`}`,
        message: `toolChoice ${choice.type} cannot be enforced for gpt-oss: a prompt can offer tools ('auto') or not ('none'), not make the model call one`,
      })
  }
  const format = options.responseFormat
  if (format?.type === 'json') {
    body.response_format =
      format.schema === undefined
        ? { type: 'json_object' }
        : {
            type: 'json_schema',
            json_schema: {
              name: format.name ?? 'response',
              ...(format.description === undefined ? {} : { description: format.description }),
              schema: format.schema,
              strict: true,
            },
          }
  }
  for (const [setting, field] of SAMPLING) if (options[setting] != null) body[field] = options[setting]
  if (Array.isArray(body.stop) && body.stop.length === 0) delete body.stop
  if (options.topK != null) warnings.push({ type: 'unsupported', feature: 'topK', details: 'the engine clients have no top-k setting' })
  const headers = Object.keys(options.headers ?? {}).filter((name) => name.toLowerCase() !== 'user-agent')
  if (headers.length > 0)
    warnings.push({
      type: 'unsupported',
      feature: 'headers',
      details: `the model runs in this process: no request carries ${headers.join(', ')}`,
    })
  return { body, warnings, providerOptions: own }
}

/**
 * `ai` 7's `reasoning` call option. V3 call options have none, but `ai` 7 passes it to a V3 model as a key of
 * its own beside the others (ai 7.0.173, dist/index.js: `prepareLanguageModelCallOptions` returns it as given,
 * and `asLanguageModelV4` hands a V3 model the options with only the prompt converted).
 */
interface AiSdk7Options {
  reasoning?: unknown
}

/** `ai` 7's reasoning levels on Harmony's three (gpt-oss always reasons: `none` and `minimal` are its least). */
const REASONING_LEVELS: Record<string, 'low' | 'medium' | 'high' | undefined> = {
  'provider-default': undefined,
  none: 'low',
  minimal: 'low',
  low: 'low',
  medium: 'medium',
  high: 'high',
  xhigh: 'high',
  max: 'high',
}

function reasoningLevel(options: LanguageModelV3CallOptions, warnings: SharedV3Warning[]): 'low' | 'medium' | 'high' | undefined {
  const reasoning = (options as AiSdk7Options).reasoning
  if (reasoning === undefined || reasoning === null) return undefined
  if (typeof reasoning !== 'string' || !Object.hasOwn(REASONING_LEVELS, reasoning))
    throw new (aiSdkProvider().InvalidArgumentError)({
      argument: 'reasoning',
      message: `reasoning must be one of ${Object.keys(REASONING_LEVELS).join(', ')}`,
    })
  const level = REASONING_LEVELS[reasoning]
  if (reasoning === 'none' || reasoning === 'xhigh' || reasoning === 'max' || reasoning === 'minimal')
    warnings.push({
      type: 'compatibility',
      feature: `reasoning: '${reasoning}'`,
      details: `gpt-oss has three reasoning levels: taken as '${level}'`,
    })
  return level
}

/** The SDK's setting a Chat request field stands for (errors name what the caller wrote). */
const SETTINGS: Record<string, string> = {
  ...Object.fromEntries(SAMPLING.map(([setting, field]) => [field, setting])),
  response_format: 'responseFormat',
  tools: 'tools',
  reasoning_effort: 'providerOptions.reasoningEffort',
}

/**
 * A request error of the renderer or the checks (a `HarmonyRequestError`, an `HttpError` 400) as the SDK's: a
 * message or a part of the prompt → `InvalidPromptError`; a setting → `InvalidArgumentError` naming it.
 */
export function sdkRequestError(error: unknown, options: LanguageModelV3CallOptions): unknown {
  const request = error instanceof HarmonyRequestError || (error instanceof HttpError && error.status === 400) ? error : null
  const param = request?.param
  if (request === null || param === null || param === undefined) return error
  if (param.startsWith('messages'))
    return new (aiSdkProvider().InvalidPromptError)({ prompt: options.prompt, message: request.message, cause: error })
  const top = param.split(/[.[]/)[0]!
  const argument = SETTINGS[top] === undefined ? param : SETTINGS[top] + param.slice(top.length)
  return new (aiSdkProvider().InvalidArgumentError)({ argument, message: request.message, cause: error })
}

function providerOptionsOf(value: unknown, provider: string): HarmonyProviderOptions {
  if (value === undefined) return {}
  const own: HarmonyProviderOptions = {}
  for (const [key, setting] of Object.entries(value as Json)) {
    const allowed = PROVIDER_OPTIONS[key as keyof HarmonyProviderOptions]
    if (allowed === undefined)
      throw new (aiSdkProvider().InvalidArgumentError)({
        argument: `providerOptions.${provider}.${key}`,
        message: `unknown provider option ${key}: ${Object.keys(PROVIDER_OPTIONS).join(', ')} are known`,
      })
    if (setting === undefined || setting === null) continue
    if (typeof setting !== 'string' || !allowed.includes(setting))
      throw new (aiSdkProvider().InvalidArgumentError)({
        argument: `providerOptions.${provider}.${key}`,
        message: `${key} must be one of ${allowed.join(', ')}`,
      })
    ;(own as Json)[key] = setting
  }
  return own
}

function unsupportedPart(kind: string, at: string): UnsupportedFunctionalityError {
  return new (aiSdkProvider().UnsupportedFunctionalityError)({
    functionality: `${kind} parts`,
    message: `${at}: gpt-oss reads text only (${kind} parts are not supported)`,
  })
}

/** One SDK message as Chat messages (a tool message's results are one Chat message each). */
function messagesOf(message: LanguageModelV3Message, index: number): Json[] {
  const at = `prompt[${index}]`
  switch (message.role) {
    case 'system':
      return [{ role: 'system', content: message.content }]
    case 'user':
      return [
        {
          role: 'user',
          content: message.content
            .map((part, j) => {
              if (part.type !== 'text') throw unsupportedPart(part.type, `${at}.content[${j}]`)
              return part.text
            })
            .join(''),
        },
      ]
    case 'assistant': {
      let content = ''
      let reasoning = ''
      const calls: Json[] = []
      message.content.forEach((part, j) => {
        if (part.type === 'text') content += part.text
        else if (part.type === 'reasoning') reasoning += part.text
        else if (part.type === 'tool-call')
          calls.push({
            id: part.toolCallId,
            type: 'function',
            function: { name: part.toolName, arguments: JSON.stringify(part.input ?? {}) },
          })
        else throw unsupportedPart(part.type, `${at}.content[${j}]`)
      })
      const chat: Json = { role: 'assistant', content: content === '' ? null : content }
      if (reasoning !== '') chat.reasoning_content = reasoning
      if (calls.length > 0) chat.tool_calls = calls
      return [chat]
    }
    case 'tool':
      return message.content.map((part, j) => {
        if (part.type !== 'tool-result') throw unsupportedPart(part.type, `${at}.content[${j}]`)
        return { role: 'tool', tool_call_id: part.toolCallId, content: resultText(part.output, `${at}.content[${j}]`) }
      })
  }
}

/** A tool's result as the text the model reads. */
function resultText(output: LanguageModelV3ToolResultOutput, at: string): string {
  switch (output.type) {
    case 'text':
    case 'error-text':
      return output.value
    case 'json':
    case 'error-json':
      return JSON.stringify(output.value)
    case 'execution-denied':
      return output.reason === undefined ? 'The tool call was denied.' : `The tool call was denied: ${output.reason}`
    case 'content':
      return output.value
        .map((part, k) => {
          if (part.type !== 'text') throw unsupportedPart(part.type, `${at}.output.value[${k}]`)
          return part.text
        })
        .join('')
  }
}
