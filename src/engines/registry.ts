/**
 * The inference clients by name (`createEngine`), for configuration: one line per engine.
 */

import { optionError } from '../base/options'
import { LlamaCppEngine, type LlamaCppEngineOptions } from './llamacpp'
import { ReplayEngine, type ReplayEngineOptions } from './replay'
import { SglangEngine, type SglangEngineOptions } from './sglang'
import { TrtllmEngine, type TrtllmEngineOptions } from './trtllm'
import type { Engine } from './types'
import { VllmEngine, type VllmEngineOptions } from './vllm'

export type EngineName = 'replay' | 'vllm' | 'sglang' | 'llamacpp' | 'trtllm'

/** The options of each engine, by name. */
export interface EngineOptionsByName {
  replay: ReplayEngineOptions
  vllm: VllmEngineOptions
  sglang: SglangEngineOptions
  llamacpp: LlamaCppEngineOptions
  trtllm: TrtllmEngineOptions
}

const ENGINES: { [N in EngineName]: new (options: EngineOptionsByName[N]) => Engine } = {
  replay: ReplayEngine,
  vllm: VllmEngine,
  sglang: SglangEngine,
  llamacpp: LlamaCppEngine,
  trtllm: TrtllmEngine,
}

/**
 * An engine by name, e.g. from configuration. The options are those of its class and are checked as its
 * constructor checks them: a TypeError naming the option (an unknown one included).
 */
export function createEngine(name: 'replay', options: ReplayEngineOptions): ReplayEngine
export function createEngine(name: 'vllm', options: VllmEngineOptions): VllmEngine
export function createEngine(name: 'sglang', options: SglangEngineOptions): SglangEngine
export function createEngine(name: 'llamacpp', options: LlamaCppEngineOptions): LlamaCppEngine
export function createEngine(name: 'trtllm', options: TrtllmEngineOptions): TrtllmEngine
export function createEngine(name: EngineName, options: EngineOptionsByName[EngineName]): Engine
export function createEngine(name: EngineName, options: EngineOptionsByName[EngineName]): Engine {
  if (typeof name !== 'string' || !Object.hasOwn(ENGINES, name)) {
    throw optionError(TypeError, `createEngine: unknown engine ${JSON.stringify(name)} (${Object.keys(ENGINES).join(', ')})`)
  }
  const Class = ENGINES[name] as new (options: EngineOptionsByName[EngineName]) => Engine
  return new Class(options)
}
