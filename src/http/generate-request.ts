/**
 * The engine request of a rendered request: the prompt's ids and structured-output schemas, and the request's
 * checked generation parameters. One mapping for every caller (a gateway, the AI SDK provider), so that a
 * field a request sets reaches every engine the same way.
 */

import type { GenerateRequest } from '../engines/types'
import type { RenderedPrompt } from '../render/index'
import type { GenerationParameters } from './validate'

/**
 * `prompt` and `parameters` as a `GenerateRequest`, with `signal` to abort it. Fields the request did not set
 * are left out: an engine refuses a sampling field it cannot apply only when it is there.
 */
export function generateRequestOf(
  prompt: Pick<RenderedPrompt, 'tokens' | 'responseFormat' | 'argumentSchemas'>,
  // `n` is not the engine request's: each choice is a request of its own (one `GenerateRequest` each).
  parameters: Omit<GenerationParameters, 'model' | 'stream' | 'n' | 'includeUsage' | 'stop' | 'background'>,
  signal?: AbortSignal,
): GenerateRequest {
  const fields: Omit<GenerateRequest, 'tokens'> = {
    maxTokens: parameters.maxTokens,
    temperature: parameters.temperature,
    topP: parameters.topP,
    seed: parameters.seed,
    presencePenalty: parameters.presencePenalty,
    frequencyPenalty: parameters.frequencyPenalty,
    logitBias: parameters.logitBias,
    // Structured outputs: the engine enforces the final answer's JSON and strict tools' arguments.
    responseFormat: prompt.responseFormat,
    argumentSchemas: prompt.argumentSchemas,
    logprobs: parameters.logprobs,
    // Routing only: an engine group sends requests sharing it to one engine.
    affinityKey: parameters.affinityKey,
    signal,
  }
  const request: GenerateRequest = { tokens: prompt.tokens }
  for (const [key, value] of Object.entries(fields)) if (value !== undefined) (request as unknown as Record<string, unknown>)[key] = value
  return request
}
