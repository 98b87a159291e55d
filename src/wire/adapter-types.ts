/**
 * What the wire adapters' base shares with its formats and callers, apart from the class: the options every
 * format takes, an adapter's diagnostic, how a format describes itself, and a message as the base tracks it.
 */

import type { OptionSpec } from '../base/options'
import type { HarmonyDiagnostic, HarmonyStreamParserOptions } from '../base/types'
import type { InputKind } from './message-stream'
import type { Route, RoutingOptions } from './routing'

/** A diagnostic of the adapter itself, e.g. tool arguments that are not valid JSON. */
export interface AdapterDiagnostic extends HarmonyDiagnostic {
  /** The tool call concerned, for `invalid-tool-arguments`, `closed-tool-arguments` and `text-tool-call`. */
  toolCallId?: string
}

/** The options every wire format takes. */
export interface AdapterOptions extends RoutingOptions {
  model: string
  /** The completion's id; ids of tool calls and items derive from it. Default: a random one. */
  id?: string
  /**
   * Options of the underlying parser (role, strict, toolNames, implementation…). Tool names may be bare
   * (`get_weather`): names without a namespace get `functions.`.
   */
  parser?: HarmonyStreamParserOptions
  /** The request's `tools` array as it came (Chat or Responses shape): its functions become the parser's `toolNames`. */
  tools?: readonly unknown[] | null
  /**
   * `'recover'`: a call of a declared tool that the model wrote as JSON text (in its answer, or as a preamble
   * with no recipient) becomes a real tool call (docs/API.md "Tool calls written as text"). Default `'recover'`
   * when tools are declared, except with `logprobs: true` or a `responseFormat`, where it is `'off'`.
   */
  textToolCalls?: 'off' | 'recover'
  /**
   * `'text'` to feed text whose markers arrive as text (llama.cpp, Ollama) instead of token ids; `'stripped'`
   * for text whose markers the server dropped (`skip_special_tokens`: `analysis…assistantfinal…`).
   */
  input?: InputKind
  /**
   * OpenAI's `stop`: up to 4 strings. The answer's text ends before the first of them (never shown, also when
   * split across tokens or steps), the completion ends there with finish reason `stop`, and `stopped` tells
   * the caller to stop reading the engine. Reasoning and tool arguments are not cut.
   */
  stop?: string | readonly string[]
  /**
   * The request's structured output (`response_format` / `text.format` asking for JSON, as the renderer reads
   * it: `RenderedPrompt.responseFormat`): each final answer is checked against `schema` when it closes, and one
   * that is not such JSON gets an `invalid-structured-output` diagnostic. The text is delivered as it is.
   */
  responseFormat?: { name: string; schema: object }
  /**
   * The offered functions with the schemas of the strict ones (`RenderedPrompt.argumentSchemas`): a strict
   * tool's arguments are checked against its schema when the call closes; arguments that do not match get an
   * `invalid-tool-arguments` diagnostic (they are delivered as they are).
   */
  argumentSchemas?: readonly { name: string; schema: object | null }[]
  /**
   * Log probabilities of the answer's tokens (content only: never reasoning, tool arguments, headers or
   * special tokens), from engine steps' `logprobs` (asked for with `GenerateRequest.logprobs`): Chat
   * `logprobs.content`, Responses `output_text` logprobs. Tokens pushed without one are left out and counted
   * in a `logprobs-missing` diagnostic. Not with `stop`, `textToolCalls: 'recover'` or `input: 'text'`.
   */
  logprobs?: boolean
}

/** What a format tells the base about itself. */
export interface WireFormat {
  /** The class name, for errors (`ChatCompletionsStream`). */
  readonly name: string
  /** Its options (`options.ts`); `model` is always required. */
  readonly options: OptionSpec
  /** Of its random ids (`chatcmpl-`, `resp_`); ids of tool calls and items derive from the id without it. */
  readonly idPrefix: string
  /** The option that gives the prompt's tokens for usage (`promptTokens`, `inputTokens`). */
  readonly promptTokensOption: string
  /** What `push` after the end says, after `push() after `. */
  readonly finished: string
}

/** A message of the completion as the base tracks it from its header to its close. */
export interface WireMessage<Kept> {
  readonly index: number
  readonly route: Route
  /** Its text goes through text-call recovery (answer or preamble, `textToolCalls`): released only when it cannot be a call. */
  readonly held: boolean
  /** The function name of a tool call (`get_weather`; a built-in keeps its recipient), else null. */
  readonly toolName: string | null
  /** A call to a tool of an offered namespace other than `functions`: that namespace (its `toolName` starts with it). */
  readonly toolNamespace: string | null
  /** A tool call's place among the completion's tool calls (recovered ones included), from 0; -1 for others. */
  readonly toolIndex: number
  /**
   * Route `builtin`: the built-in tool (`python`, `browser.search`), and whether this is its result (the message
   * the gateway gave the model) rather than the model's call; null for other routes.
   */
  readonly builtin: { tool: string; result: boolean } | null
  /** What the format keeps for it (Chat: its call's announcement and frame; Responses: its output item). */
  kept: Kept | null
}

/** An HTTP answer to a failure in the shape of a format's API (`WireAdapter.errorAnswer`). */
export interface ErrorAnswer {
  status: number
  body: object
  headers?: Record<string, string>
}
