/**
 * harmony-stream/engines: clients for token-level inference servers (vLLM, SGLang, llama.cpp) and the replay
 * engine, behind one interface (`Engine.generate`).
 */
export { EngineError } from './errors'
export { DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_READ_TIMEOUT_MS, type HttpOptions } from './http'
export { LlamaCppEngine, type LlamaCppEngineOptions } from './llamacpp'
export { ReplayEngine, type ReplayEngineOptions, type ReplayGenerateRequest } from './replay'
export { checkGenerateRequest } from './request'
export { SglangEngine, type SglangEngineOptions } from './sglang'
export type { Engine, EngineFinishReason, EngineStep, EngineUsage, GenerateRequest } from './types'
export { VllmEngine, type VllmEngineOptions } from './vllm'

import { LlamaCppEngine } from './llamacpp'
import { ReplayEngine } from './replay'
import { SglangEngine } from './sglang'
import type { Engine } from './types'
import { VllmEngine } from './vllm'

export type EngineName = 'replay' | 'vllm' | 'sglang' | 'llamacpp'

/** An engine by name, e.g. from configuration; the options are those of its class. */
export function createEngine(name: EngineName, options: object): Engine {
  switch (name) {
    case 'replay':
      return new ReplayEngine(options as never)
    case 'vllm':
      return new VllmEngine(options as never)
    case 'sglang':
      return new SglangEngine(options as never)
    case 'llamacpp':
      return new LlamaCppEngine(options as never)
    default:
      throw new TypeError(`createEngine: unknown engine ${JSON.stringify(name)} (replay, vllm, sglang, llamacpp)`)
  }
}
