/**
 * harmony-stream/engines: clients for token-level inference servers (vLLM, SGLang, llama.cpp) and the replay
 * engine, behind one interface (`Engine.generate`).
 */
export { EngineError } from './errors'
export type { Engine, EngineFinishReason, EngineStep, EngineUsage, GenerateRequest } from './types'
