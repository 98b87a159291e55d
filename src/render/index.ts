/**
 * Request rendering: OpenAI requests (Chat Completions, Responses) or the reference's conversation model →
 * Harmony prompt tokens ending with `<|start|>assistant`, token for token what the reference renderer
 * (openai/harmony) makes of the same conversation; and training renders with an assistant mask.
 */

import { implementation as defaultImplementation } from '../backend/choose'
import { ordinaryEncoder } from '../backend/encoder'
import { CHANNEL, CONSTRAIN, MESSAGE, RETURN, START } from '../backend/tokens'
import { checkOptions, is, type OptionSpec } from '../base/options'
import type { Implementation } from '../base/types'
import { BUILTIN_TOOLS, type BuiltinTool } from './builtin-tools'
import { RenderCache } from './cache'
import { chatConversation, type RequestConversation } from './chat'
import { type ConversationMessage, concat, MessageRenderer, nextTurnTokens } from './conversation'
import { dropFinishedAnalysis, referenceAutoDropAnalysis } from './drop'
import { checkConversationLimits, checkRequestLimits, DEFAULT_RENDER_LIMITS, LIMIT_OPTIONS, type RenderLimits } from './limits'
import type { ArgumentSchema, ResponseFormat } from './output-schema'
import type { HostedTools, NotApplied } from './request-fields'
import { responsesConversation } from './responses'
import { DEFAULT_KNOWLEDGE_CUTOFF, DEFAULT_MODEL_IDENTITY, REASONING_EFFORTS, type ReasoningEffort } from './system'
import { validateConversation } from './validate'

export interface RenderEngineOptions {
  /** BPE on this implementation instead of the process-wide one. Both give identical tokens. */
  implementation?: Implementation
  /** The per-message token cache; default: one per implementation per process (64 MiB); null: no cache. */
  cache?: RenderCache | null
  /** Bounds checked before any work, each a 400 naming the field (limits.ts); unset ones keep their defaults. */
  limits?: Partial<RenderLimits>
}

export interface RenderRequestOptions extends RenderEngineOptions {
  /**
   * Tools of a built-in type (`web_search`, `file_search`, `computer_use`, `mcp`, …) that this package does not
   * run: `'omit'` (default) leaves them out of the prompt and says so (`notApplied`); `'refuse'`: a 400 naming them.
   */
  hostedTools?: HostedTools
  /**
   * gpt-oss's own tools the caller runs (a gateway with a python sandbox or a search backend): a Responses
   * request's `code_interpreter` tool is offered to the model as `python`, its `web_search` tool as `browser`,
   * declared in the system message as gpt-oss was trained (`RenderedPrompt.builtinTools`). Default none: they are
   * hosted tools (`hostedTools`).
   */
  builtinTools?: readonly BuiltinTool[]
  /** `Current date: …` in the system message, 'YYYY-MM-DD'; default today (UTC); null: no date line. */
  currentDate?: string | null
  /** Used when the request sets none (`reasoning_effort`, `reasoning.effort`). Default 'medium'. */
  reasoningEffort?: ReasoningEffort
  /** Default "You are ChatGPT, a large language model trained by OpenAI." */
  modelIdentity?: string
  /** Default '2024-06'. */
  knowledgeCutoff?: string
  /** Keep the analysis of finished turns too (default false: dropped, see docs/API.md "Earlier reasoning"). */
  keepAnalysis?: boolean
}

/** An offered function as a request's `tools` holds it (the Responses API's shape). */
export interface OfferedFunction {
  type: 'function'
  name: string
  parameters?: unknown
}

export interface RenderedPrompt {
  /** The whole prompt, ending with `<|start|>assistant`. */
  tokens: Uint32Array
  /** The offered functions as the parser's `toolNames` expects them (`functions.get_weather`). */
  toolNames: string[]
  /** `tokens.length`, for usage. */
  promptTokens: number
  /** The JSON the answer must be (structured outputs): for the engine to enforce and the adapters to check. */
  responseFormat?: ResponseFormat
  /** The offered functions, when one is strict: its arguments for the engine to enforce and the adapters to check. */
  argumentSchemas?: ArgumentSchema[]
  /**
   * The offered functions of the `functions` namespace with their parameters, in the shape of a request's
   * `tools` (the adapters' `tools` option: text-call recovery maps arguments onto them); absent when none.
   */
  functions?: OfferedFunction[]
  /**
   * What the request asked for that gpt-oss cannot do and was taken anyway (a verbosity, a summary, an effort of
   * another model run at the nearest level, a built-in tool left out), each with what was done; absent when none.
   */
  notApplied?: NotApplied[]
  /**
   * `tool_choice` requires a call (`'required'`, or a named function): the tokens a gateway holds the model to. It
   * lets the model reason first (`reasoning`: the analysis header it continues from), then starts the call
   * (`call`: the assistant's header to the function, or up to `functions.` when any offered one will do).
   */
  requiredCall?: { name: string | null; reasoning: Uint32Array; call: Uint32Array }
  /** gpt-oss's own tools the prompt declares (`builtinTools`): the caller runs their calls. */
  builtinTools?: BuiltinTool[]
  /**
   * The request asked to see the model's reasoning with its signature only (`'omitted'`) or not at all
   * (`'none'`): set by a translation of another API's request, which its adapter reads.
   */
  thinkingDisplay?: 'omitted' | 'none'
}

export interface RenderConversationOptions extends RenderEngineOptions {
  /** Keep every analysis message (default false: analysis of finished turns dropped, as for requests). */
  keepAnalysis?: boolean
  /** End with `<|start|>{nextRole}`; default 'assistant'; null: end after the last message. */
  nextRole?: string | null
}

export interface RenderForTrainingOptions extends RenderEngineOptions {
  /**
   * Every assistant message keeps its analysis and ends as it would in a longer conversation (`<|end|>`),
   * so rendering the first k messages gives a prefix of rendering them all. Default false: the reference's
   * training render (earlier analysis dropped by its rule, the last final message ends with `<|return|>`).
   */
  prefixPreserving?: boolean
}

export interface TrainingRender {
  tokens: Uint32Array
  /** 1 for the tokens a trainer learns: each assistant message after its author (`<|start|>assistant`). */
  assistantMask: Uint8Array
}

const COMMON_OPTIONS: OptionSpec = {
  implementation: is.oneOf('native', 'js'),
  cache: is.nullable({ what: 'a RenderCache', test: (v) => v instanceof RenderCache }),
  limits: is.object,
}

/** The limits of checked options: the defaults, with what `limits` sets (checked like options). */
function limitsOf(options: RenderEngineOptions, fn: string): RenderLimits {
  if (options.limits === undefined) return DEFAULT_RENDER_LIMITS
  return { ...DEFAULT_RENDER_LIMITS, ...checkOptions<Partial<RenderLimits>>(options.limits, LIMIT_OPTIONS, `${fn}: option 'limits'`) }
}

const OPTIONS: Record<'request' | 'conversation' | 'training', OptionSpec> = {
  request: {
    ...COMMON_OPTIONS,
    currentDate: is.nullable({ what: "a date 'YYYY-MM-DD'", test: (v) => typeof v === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(v) }),
    reasoningEffort: is.oneOf(...REASONING_EFFORTS),
    modelIdentity: is.string,
    knowledgeCutoff: is.string,
    keepAnalysis: is.boolean,
    hostedTools: is.oneOf('omit', 'refuse'),
    builtinTools: {
      what: "an array of 'browser' and 'python'",
      test: (v) => Array.isArray(v) && v.every((tool) => BUILTIN_TOOLS.includes(tool)),
    },
  },
  conversation: { ...COMMON_OPTIONS, keepAnalysis: is.boolean, nextRole: is.nullable(is.string) },
  training: { ...COMMON_OPTIONS, prefixPreserving: is.boolean },
}

export function checkRenderOptions(options: unknown, kind: keyof typeof OPTIONS, fn: string): Record<string, unknown> {
  return checkOptions(options, OPTIONS[kind], fn)
}

const defaultCaches: Partial<Record<Implementation, RenderCache>> = {}
const renderers = new WeakMap<RenderCache, Partial<Record<Implementation, MessageRenderer>>>()
const uncachedRenderers: Partial<Record<Implementation, MessageRenderer>> = {}

/** The cache a render with these options goes through (null: none). */
function cacheOf(options: RenderEngineOptions): RenderCache | null {
  return options.cache === undefined ? defaultRenderCache(options.implementation) : options.cache
}

/** One renderer per (cache, implementation): it holds the memo of header pieces. */
function rendererFor(options: RenderEngineOptions): MessageRenderer {
  const which = options.implementation ?? defaultImplementation
  const cache = cacheOf(options)
  let byImplementation = cache === null ? uncachedRenderers : renderers.get(cache)
  if (byImplementation === undefined) {
    byImplementation = {}
    renderers.set(cache as RenderCache, byImplementation)
  }
  return (byImplementation[which] ??= new MessageRenderer(ordinaryEncoder(which), cache))
}

/** The cache requests render through by default on `implementation`, e.g. to read its `stats`. */
export function defaultRenderCache(which: Implementation = defaultImplementation): RenderCache {
  return (defaultCaches[which] ??= new RenderCache())
}

function today(): string {
  return new Date().toISOString().slice(0, 10)
}

function requestPrompt(conversation: RequestConversation, options: RenderRequestOptions): RenderedPrompt {
  const messages: ConversationMessage[] = [
    {
      role: 'system',
      content: {
        modelIdentity: options.modelIdentity ?? DEFAULT_MODEL_IDENTITY,
        knowledgeCutoff: options.knowledgeCutoff ?? DEFAULT_KNOWLEDGE_CUTOFF,
        currentDate: options.currentDate === undefined ? today() : options.currentDate,
        reasoningEffort: conversation.reasoningEffort ?? options.reasoningEffort ?? 'medium',
        ...(conversation.builtinTools === undefined ? {} : { tools: conversation.builtinTools }),
      },
    },
  ]
  const { responseFormat } = conversation
  // JSON mode has no schema to show: only a json_schema format gets a `# Response Formats` section.
  const shown = responseFormat?.format === 'json_schema' ? [responseFormat] : []
  const { tools, namespaces } = conversation
  if (conversation.instructions.length > 0 || tools.length > 0 || namespaces.length > 0 || shown.length > 0) {
    const instructions = conversation.instructions.length > 0 ? conversation.instructions.join('\n\n') : null
    messages.push({ role: 'developer', content: { instructions, tools, namespaces, responseFormats: shown } })
  }
  // A loop, not push(...spread): a spread call takes every message as an argument, beyond the stack's room for
  // a long conversation.
  for (const message of options.keepAnalysis ? conversation.messages : dropFinishedAnalysis(conversation.messages)) messages.push(message)
  const renderer = rendererFor(options)
  const tokens = concat([...renderer.render(messages), ...nextTurnTokens(renderer, 'assistant')])
  const prompt: RenderedPrompt = {
    tokens,
    toolNames: [
      ...tools.map((tool) => `functions.${tool.name}`),
      ...namespaces.flatMap((namespace) => namespace.tools.map((tool) => `${namespace.name}.${tool.name}`)),
    ],
    promptTokens: tokens.length,
  }
  if (responseFormat !== undefined) prompt.responseFormat = responseFormat
  if (conversation.argumentSchemas !== undefined) prompt.argumentSchemas = conversation.argumentSchemas
  if (tools.length > 0)
    prompt.functions = tools.map((tool) => ({
      type: 'function',
      name: tool.name,
      ...(tool.parameters == null ? {} : { parameters: tool.parameters }),
    }))
  if (conversation.notApplied.length > 0) prompt.notApplied = conversation.notApplied
  if (conversation.requiredCall !== undefined) prompt.requiredCall = requiredCallTokens(renderer, conversation.requiredCall.name)
  if (conversation.builtinTools !== undefined) prompt.builtinTools = conversation.builtinTools
  return prompt
}

/**
 * The headers of a required call, as gpt-oss writes them: `<|channel|>analysis<|message|>` (after the prompt's
 * `<|start|>assistant`), then `<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>`
 * (or, for any function, up to `functions.`).
 */
function requiredCallTokens(renderer: MessageRenderer, name: string | null): NonNullable<RenderedPrompt['requiredCall']> {
  const encode = (text: string) => renderer.encoder.encode(text)
  const reasoning = concat([CHANNEL, encode('analysis'), MESSAGE])
  const call =
    name === null
      ? concat([START, encode('assistant'), CHANNEL, encode('commentary to=functions.')])
      : concat([START, encode('assistant'), CHANNEL, encode(`commentary to=functions.${name} `), CONSTRAIN, encode('json'), MESSAGE])
  return { name, reasoning, call }
}

const RENDERERS = {
  chat: { fn: 'renderChatCompletionRequest', conversation: chatConversation },
  responses: { fn: 'renderResponsesRequest', conversation: responsesConversation },
} as const

/**
 * The checks a request body gets before any rendering work: the options, and the body's bounds (`limits.ts`).
 * Returns the checked options.
 */
export function checkRequestBody(kind: 'chat' | 'responses', body: unknown, options?: RenderRequestOptions): RenderRequestOptions {
  const { fn } = RENDERERS[kind]
  const checked = checkRenderOptions(options, 'request', fn) as RenderRequestOptions
  checkRequestLimits(body, kind, limitsOf(checked, fn), true, cacheOf(checked))
  return checked
}

/**
 * `checkRequestBody` without the bound that reads every character (long runs of one kind in strings): counts,
 * names, nesting and keys, a walk over the body's values only. `RenderWorkers` runs this on the event loop, so
 * no body too deep to copy crosses to a worker, and the worker checks the body whole before it renders: a 3.5 MB
 * conversation was read character by character on the event loop (40 ms) before it crossed.
 */
export function checkRequestShape(kind: 'chat' | 'responses', body: unknown, options?: RenderRequestOptions): void {
  const { fn } = RENDERERS[kind]
  checkRequestLimits(body, kind, limitsOf(checkRenderOptions(options, 'request', fn) as RenderRequestOptions, fn), false)
}

/** The prompt of a body `checkRequestBody` accepted, with the options it returned (the bounds are not walked again). */
export function renderCheckedRequest(kind: 'chat' | 'responses', body: unknown, checked: RenderRequestOptions): RenderedPrompt {
  return requestPrompt(
    RENDERERS[kind].conversation(body, { hostedTools: checked.hostedTools ?? 'omit', builtinTools: checked.builtinTools ?? [] }),
    checked,
  )
}

/** A Chat Completions request body → the prompt. Bad requests throw `HarmonyRequestError` (HTTP 400). */
export function renderChatCompletionRequest(body: unknown, options?: RenderRequestOptions): RenderedPrompt {
  return renderCheckedRequest('chat', body, checkRequestBody('chat', body, options))
}

/** A Responses request body → the prompt. Bad requests throw `HarmonyRequestError` (HTTP 400). */
export function renderResponsesRequest(body: unknown, options?: RenderRequestOptions): RenderedPrompt {
  return renderCheckedRequest('responses', body, checkRequestBody('responses', body, options))
}

/**
 * A request body's bounds checked (`limits.ts`) before anything reads it, for a body of another API that a
 * gateway translates into a Chat request (its `messages` and `system` counted as Chat's are).
 */
export function checkTranslatedBodyLimits(body: unknown, options: RenderRequestOptions, fn: string): void {
  checkRequestLimits(body, 'messages', limitsOf(options, fn), true, cacheOf(options))
}

/** Messages of the reference's conversation model → tokens (for completion: ending with `<|start|>assistant`). */
export function renderConversation(
  messages: readonly ConversationMessage[],
  options?: RenderConversationOptions,
): { tokens: Uint32Array; promptTokens: number } {
  const checked = checkRenderOptions(options, 'conversation', 'renderConversation') as RenderConversationOptions
  checkConversationLimits(messages, limitsOf(checked, 'renderConversation'))
  validateConversation(messages, 'renderConversation')
  const renderer = rendererFor(checked)
  const kept = checked.keepAnalysis ? messages : dropFinishedAnalysis(messages)
  const pieces: ArrayLike<number>[] = renderer.render(kept)
  const nextRole = checked.nextRole === undefined ? 'assistant' : checked.nextRole
  if (nextRole !== null) pieces.push(...nextTurnTokens(renderer, nextRole))
  const tokens = concat(pieces)
  return { tokens, promptTokens: tokens.length }
}

/** A conversation → the tokens a trainer sees, with the mask of the tokens it learns (see the options). */
export function renderForTraining(messages: readonly ConversationMessage[], options?: RenderForTrainingOptions): TrainingRender {
  const checked = checkRenderOptions(options, 'training', 'renderForTraining') as RenderForTrainingOptions
  checkConversationLimits(messages, limitsOf(checked, 'renderForTraining'))
  validateConversation(messages, 'renderForTraining')
  const kept = checked.prefixPreserving ? [...messages] : referenceAutoDropAnalysis(messages)
  const renderer = rendererFor(checked)
  const perMessage = renderer.render(kept)
  const tokens = concat(perMessage)
  const assistantMask = new Uint8Array(tokens.length)
  let at = 0
  kept.forEach((message, i) => {
    if (message.role === 'assistant') assistantMask.fill(1, at + renderer.authorLength(message), at + perMessage[i].length)
    at += perMessage[i].length
  })
  const last = kept[kept.length - 1]
  // The reference: a conversation that ends with the assistant's final answer ends with <|return|>.
  if (!checked.prefixPreserving && last !== undefined && last.role === 'assistant' && last.channel === 'final')
    tokens[tokens.length - 1] = RETURN
  return { tokens, assistantMask }
}

export type { BuiltinTool } from './builtin-tools'
export { DEFAULT_RENDER_CACHE_BYTES, RenderCache, type RenderCacheOptions, type RenderCacheStats } from './cache'
export type { ConversationMessage, DeveloperMessage, SystemMessage, TextMessage } from './conversation'
export type { DeveloperContent, FunctionTool, OutputSchema, ToolNamespace } from './developer'
export type { ArgumentSchema, ResponseFormat } from './output-schema'
export { type HostedTools, type NotApplied, nearestEffort } from './request-fields'
export type { ReasoningEffort, SystemContent } from './system'
