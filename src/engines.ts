/**
 * harmony-stream/engines: clients for token-level inference servers (vLLM, SGLang, llama.cpp, TensorRT-LLM) and the replay
 * engine, behind one interface (`Engine.generate`). The subpath's whole public API, listed by name.
 */
export { EngineError } from './engines/errors'
export { EngineGroup, type EngineGroupOptions, type EngineStatus } from './engines/group'
export {
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_MAX_EVENT_BYTES,
  DEFAULT_MAX_STREAM_BYTES,
  DEFAULT_READ_TIMEOUT_MS,
  type HttpOptions,
} from './engines/http'
export { LlamaCppEngine, type LlamaCppEngineOptions } from './engines/llamacpp'
export { createEngine, type EngineName, type EngineOptionsByName } from './engines/registry'
export { ReplayEngine, type ReplayEngineOptions, type ReplayGenerateRequest } from './engines/replay'
export { checkGenerateRequest, GENERATION_STOP_TOKENS, LAST_MODEL_TOKEN } from './engines/request'
export { SglangEngine, type SglangEngineOptions } from './engines/sglang'
export { collectSteps } from './engines/steps'
export { TrtllmEngine, type TrtllmEngineOptions } from './engines/trtllm'
export type {
  Engine,
  EngineDiagnostic,
  EngineFinishReason,
  EngineStep,
  EngineUsage,
  GenerateRequest,
  SamplingField,
  TokenLogprob,
} from './engines/types'
export { VLLM_DEFAULT_MAX_TOKENS, VllmEngine, type VllmEngineOptions } from './engines/vllm'
