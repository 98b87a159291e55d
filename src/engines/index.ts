/**
 * harmony-stream/engines: clients for token-level inference servers (vLLM, SGLang, llama.cpp) and the replay
 * engine, behind one interface (`Engine.generate`).
 */
export { EngineError } from './errors'
export { ReplayEngine, type ReplayEngineOptions, type ReplayGenerateRequest } from './replay'
export { checkGenerateRequest } from './request'
export type { Engine, EngineFinishReason, EngineStep, EngineUsage, GenerateRequest } from './types'

import { ReplayEngine, type ReplayEngineOptions } from './replay'
import type { Engine } from './types'

/** An engine by name, e.g. from configuration. */
export function createEngine(name: string, options: ReplayEngineOptions | Record<string, unknown>): Engine {
  if (name === 'replay') return new ReplayEngine(options as unknown as ReplayEngineOptions)
  throw new TypeError(`createEngine: unknown engine '${name}' (replay, vllm, sglang, llamacpp)`)
}
