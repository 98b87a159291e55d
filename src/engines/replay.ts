/**
 * The replay engine: stands in for an inference server by replaying recorded completions, `interval` tokens
 * per step and one step per event-loop turn, like a server streaming at a stream interval. The prompt is
 * ignored. The example gateway's default, and the engine of the tests and the HTTP benchmark.
 */
import { checkGenerateRequest } from './request'
import type { Engine, EngineStep, GenerateRequest } from './types'

export interface ReplayEngineOptions {
  /** Completions (the tokens after `<|start|>assistant`), served round-robin. */
  completions: readonly (readonly number[])[]
  /** Tokens per step. Default 1. */
  interval?: number
}

export interface ReplayGenerateRequest extends GenerateRequest {
  /** Replay this completion instead of the next one in turn. */
  replayIndex?: number
}

export class ReplayEngine implements Engine {
  readonly name = 'replay'
  private readonly completions: Uint32Array[]
  private readonly interval: number
  private next = 0

  constructor(options: ReplayEngineOptions) {
    if (options === null || typeof options !== 'object') throw new TypeError('ReplayEngine: options must be an object')
    const { completions, interval = 1 } = options
    if (!Array.isArray(completions) || completions.length === 0) throw new TypeError('ReplayEngine: completions must be a non-empty array of token arrays')
    if (!Number.isSafeInteger(interval) || interval < 1) throw new TypeError('ReplayEngine: interval must be a positive integer')
    this.completions = completions.map((tokens, i) => {
      if (!Array.isArray(tokens) && !(tokens instanceof Uint32Array)) throw new TypeError(`ReplayEngine: completions[${i}] must be an array of token ids`)
      checkGenerateRequest({ tokens }, `ReplayEngine: completions[${i}]`)
      return Uint32Array.from(tokens)
    })
    this.interval = interval
  }

  generate(request: ReplayGenerateRequest): AsyncIterable<EngineStep> {
    checkGenerateRequest(request, 'ReplayEngine.generate')
    const index = request.replayIndex ?? this.next++ % this.completions.length
    if (!Number.isSafeInteger(index) || index < 0 || index >= this.completions.length) {
      throw new RangeError(`ReplayEngine.generate: replayIndex must be from 0 to ${this.completions.length - 1}`)
    }
    return replay(this.completions[index], this.interval, request)
  }
}

/**
 * The completion as recorded (a recording needs no stop tokens: it ends where the engine ended it, `stop`);
 * `maxTokens` cuts it as an engine's limit would (`length`).
 */
async function* replay(completion: Uint32Array, interval: number, request: GenerateRequest): AsyncGenerator<EngineStep> {
  const end = Math.min(completion.length, request.maxTokens ?? completion.length)
  const finishReason = end === completion.length ? 'stop' : 'length'
  const usage = { promptTokens: request.tokens.length, completionTokens: end }
  if (end === 0) {
    yield { tokens: new Uint32Array(0), finishReason, usage }
    return
  }
  for (let at = 0; at < end; at += interval) {
    await new Promise((resolve) => setImmediate(resolve))
    if (request.signal?.aborted) {
      yield { tokens: new Uint32Array(0), finishReason: 'abort' }
      return
    }
    const tokens = completion.subarray(at, Math.min(at + interval, end))
    yield at + interval >= end ? { tokens, finishReason, usage } : { tokens }
  }
}
