/**
 * One interface for every token-level inference server: a prompt as token ids in, each decode step's new
 * token ids out. Render and engines know nothing of adapters or HTTP (docs/ARCHITECTURE.md "Layers").
 */

import type { OutputSchema } from '../render/developer'
import type { ArgumentSchema } from '../render/output-schema'

/** Why generation ended: a stop token (`<|return|>`/`<|call|>`), the token limit, or an abort. */
export type EngineFinishReason = 'stop' | 'length' | 'abort'

export interface EngineUsage {
  promptTokens: number
  completionTokens: number
  /** Prompt tokens the engine took from its prefix cache instead of computing them, when it says. */
  cachedPromptTokens?: number
}

/**
 * Something a step could not deliver as meant, reported beside it instead of lost silently.
 * `engine-ids-lost`: the engine generated `count` ids that it never sent and that could not be found again (the
 * text misses their bytes; usage still counts them). `tool-failed`: a tool the gateway ran inside the response
 * (`tool`: `python`, `browser.open`, `label.name` of an MCP server) could not do what was asked; the step holds
 * the result the model read, which says so, and `result` is that result's place among the response's tool
 * results (from 0), which still names it once steps are collected into one. `engine-failover`: an engine of an
 * `EngineGroup` (`from`) failed mid-stream and another (`to`, or the same one after its cool-down) goes on,
 * given the prompt and the `carried` ids generated so far (engines/failover.ts); `engine-failover-refused`: the
 * failure of `from` ends the generation, for the reason the message gives (structured outputs, `maxFailovers`).
 * Both come on a step without ids.
 */
export type EngineDiagnostic =
  | { code: 'engine-ids-lost'; message: string; count: number }
  | { code: 'tool-failed'; message: string; tool: string; result: number }
  | { code: 'engine-failover'; message: string; from: string; to: string; carried: number }
  | { code: 'engine-failover-refused'; message: string; from: string }

/** The log probability of a generated id, and of the ids the model found likeliest there. */
export interface TokenLogprob {
  logprob: number
  /** The `logprobs` likeliest ids at that position, likeliest first (the generated one among them when it is). */
  top: { id: number; logprob: number }[]
}

/** One engine step: the ids generated since the previous step (possibly none), and how generation ended. */
export interface EngineStep {
  tokens: Uint32Array
  /** Present on the last step only. */
  finishReason?: EngineFinishReason
  /** As reported by the engine, when it reports it (usually on the last step). */
  usage?: EngineUsage
  /** What this step could not deliver (rare; absent when there is nothing to report). The adapters keep them in `diagnostics`. */
  diagnostics?: EngineDiagnostic[]
  /**
   * With `GenerateRequest.logprobs`: one entry per id of `tokens`, in order; null where the engine gave none
   * for that id (an id llama.cpp held back and the client found again, a stop id the client appended).
   */
  logprobs?: (TokenLogprob | null)[]
}

export interface GenerateRequest {
  /** The whole prompt, e.g. from `renderChatCompletionRequest(...).tokens` (ends with `<|start|>assistant`). */
  tokens: Uint32Array | readonly number[]
  /** Upper bound on generated tokens; the engine's own default when absent. */
  maxTokens?: number
  temperature?: number
  topP?: number
  seed?: number
  /** OpenAI's presence penalty, -2 to 2: subtracted once from the logit of every id already generated. */
  presencePenalty?: number
  /** OpenAI's frequency penalty, -2 to 2: subtracted from an id's logit once for each time it was generated. */
  frequencyPenalty?: number
  /** Added to the logits of these ids, -100 to 100 (-100 bans an id in practice), by token id. */
  logitBias?: Readonly<Record<number, number>>
  /**
   * Structured outputs: the final answer must be JSON that `schema` accepts (the JSON Schema subset of
   * docs/API.md "Structured outputs"), enforced by the engine's constrained decoding on the final message only
   * (analysis, preambles and tool calls stay free). `RenderedPrompt.responseFormat` is one.
   */
  responseFormat?: OutputSchema
  /**
   * The functions the prompt offers, when one is strict (`RenderedPrompt.argumentSchemas`): a strict tool's
   * arguments (an entry with a `schema`) are enforced by the engine like a response format; the others stay
   * free, and so do calls of functions not listed. Absent: tool calls are not constrained.
   */
  argumentSchemas?: readonly ArgumentSchema[]
  /**
   * The completion is the arguments of the call whose header the prompt ends with (a required call's second
   * step, server/required-call.ts): JSON `schema` accepts, then `<|call|>`, enforced from the first token.
   * Takes the place of `responseFormat` and `argumentSchemas`, which wait for a header the model writes.
   */
  callArguments?: { schema: Record<string, unknown> }
  /**
   * Log probabilities: each generated id's, with the `logprobs` likeliest ids at its position (0 to 20; 0:
   * the generated id's alone), on `EngineStep.logprobs`. Absent: none are asked for.
   */
  logprobs?: number
  /**
   * Ids that end generation. Default `<|return|>`, `<|call|>` and `<|endoftext|>` (`GENERATION_STOP_TOKENS`);
   * `<|end|>` must never be among them (it only separates messages within one completion).
   */
  stopTokens?: readonly number[]
  /** Aborting it aborts the HTTP request to the engine, so the engine frees the sequence. */
  signal?: AbortSignal
  /**
   * The W3C trace context the engine request carries (`traceparent`, `tracestate` headers), so that an engine
   * that traces (vLLM) joins the caller's trace. HTTP engines send it; a malformed one is left out.
   */
  traceparent?: string
  tracestate?: string
  /**
   * Requests that share it share a prefix (a system prompt, a conversation), says the client: an `EngineGroup`
   * sends them to one engine while it is healthy and not overloaded, so its prefix cache serves them (OpenAI's
   * `prompt_cache_key`, which the gateway passes here). A single engine ignores it.
   */
  affinityKey?: string
  /**
   * Told which engine serves the request, when that is chosen per request: an `EngineGroup` calls it with the
   * member's label (`EngineStatus.name`) each time it tries one, and with the failure when that one failed and
   * the group moved on (before the first step, or mid-stream by a failover: the client never sees that
   * failure). Metrics count each engine apart by it.
   */
  onEngine?: (name: string, failure?: unknown) => void
}

/** The sampling fields of a `GenerateRequest`, each named as OpenAI's request field it comes from. */
export const SAMPLING_FIELDS = Object.freeze({
  temperature: 'temperature',
  topP: 'top_p',
  seed: 'seed',
  presencePenalty: 'presence_penalty',
  frequencyPenalty: 'frequency_penalty',
  logitBias: 'logit_bias',
  responseFormat: 'response_format',
  logprobs: 'logprobs',
} as const)

export type SamplingField = keyof typeof SAMPLING_FIELDS

/** Every sampling field, for an engine's `sampling` list. */
export const ALL_SAMPLING_FIELDS: readonly SamplingField[] = Object.freeze(Object.keys(SAMPLING_FIELDS) as SamplingField[])

export interface Engine {
  /** e.g. `'vllm'`, `'sglang'`, `'llamacpp'`, `'replay'`. */
  readonly name: string
  /**
   * The sampling fields this engine applies; a request setting any other is refused (`HarmonyRequestError`,
   * a 400 naming OpenAI's field) rather than sent to an engine that would ignore it. Absent: all of them.
   */
  readonly sampling?: readonly SamplingField[]
  /**
   * Streams one generation. The iterator pulls from the engine only as fast as it is consumed (no unbounded
   * buffering); breaking out of the loop or aborting `signal` ends the engine request. Failures throw
   * `EngineError`.
   */
  generate(request: GenerateRequest): AsyncIterable<EngineStep>
}
