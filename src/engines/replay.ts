/**
 * The replay engine: stands in for an inference server by replaying recorded completions, `interval` tokens
 * per step and one step per event-loop turn (setImmediate), like a server streaming at a stream interval.
 * The prompt is ignored. The example gateway's default, and the engine of the tests and the HTTP benchmark.
 *
 * Finish reason: `stop` when the recording is replayed to its end (it ends where its engine ended it),
 * `length` when `maxTokens` cuts it short; the adapters tell an unterminated last message from the tokens
 * themselves. An aborted `signal` ends the replay at the next step with finish reason `abort` and no more ids.
 */

import { optionError } from '../base/options'
import { knownOptions } from './options'
import { checkGenerateRequest } from './request'
import {
  ALL_SAMPLING_FIELDS,
  type Engine,
  type EngineFinishReason,
  type EngineStep,
  type GenerateRequest,
  type SamplingField,
} from './types'

export interface ReplayGenerateRequest extends GenerateRequest {
  /** Replay this completion (an index into `completions`) instead of the one `pick` or the turn gives. */
  replayIndex?: number
}

export interface ReplayEngineOptions {
  /** Completions (the tokens after `<|start|>assistant`), served round-robin unless picked. */
  completions: readonly (readonly number[] | Uint32Array)[]
  /** Tokens per step. Default 1. */
  interval?: number
  /**
   * Chooses the completion for a request without `replayIndex`, e.g. from its prompt; `turn` counts such
   * requests, from 0 (the round-robin default is `turn % completions.length`). Must return an index into
   * `completions`.
   */
  pick?: (request: ReplayGenerateRequest, turn: number) => number
}

const OPTIONS = ['completions', 'interval', 'pick']

export class ReplayEngine implements Engine {
  readonly name = 'replay'
  /**
   * Every sampling field is taken and has no effect (a recording is replayed as it is); log probabilities are
   * refused, as a recording has none to give.
   */
  readonly sampling: readonly SamplingField[] = ALL_SAMPLING_FIELDS.filter((field) => field !== 'logprobs')
  private readonly completions: Uint32Array[]
  private readonly interval: number
  private readonly pick: ((request: ReplayGenerateRequest, turn: number) => number) | undefined
  private turn = 0

  constructor(options: ReplayEngineOptions) {
    knownOptions(options, 'ReplayEngine', OPTIONS)
    const { completions, interval = 1, pick } = options
    if (!Array.isArray(completions) || completions.length === 0)
      throw optionError(TypeError, "ReplayEngine: option 'completions' must be a non-empty array of token arrays")
    if (!Number.isSafeInteger(interval) || interval < 1)
      throw optionError(TypeError, `ReplayEngine: option 'interval' must be a positive integer, not ${String(interval)}`)
    if (pick !== undefined && typeof pick !== 'function') throw optionError(TypeError, "ReplayEngine: option 'pick' must be a function")
    this.completions = completions.map((tokens, i) => {
      if (!Array.isArray(tokens) && !(tokens instanceof Uint32Array))
        throw optionError(TypeError, `ReplayEngine: completions[${i}] must be an array of token ids`)
      checkGenerateRequest({ tokens }, `ReplayEngine: completions[${i}]`)
      return Uint32Array.from(tokens)
    })
    this.interval = interval
    this.pick = pick
  }

  /** How many completions it replays (valid `replayIndex` values are 0 to size - 1). */
  get size(): number {
    return this.completions.length
  }

  generate(request: ReplayGenerateRequest): AsyncIterable<EngineStep> {
    checkGenerateRequest(request, 'ReplayEngine.generate', this)
    let index = request.replayIndex
    let field = 'replayIndex'
    if (index === undefined) {
      const turn = this.turn++
      index = this.pick === undefined ? turn % this.completions.length : this.pick(request, turn)
      field = 'pick'
    }
    if (!Number.isSafeInteger(index) || index < 0 || index >= this.completions.length) {
      throw new RangeError(`ReplayEngine.generate: ${field} gave ${String(index)}, not an index from 0 to ${this.completions.length - 1}`)
    }
    return replay(this.completions[index], this.interval, request)
  }
}

/** The completion, cut at `maxTokens` as an engine's limit would cut it. */
async function* replay(completion: Uint32Array, interval: number, request: GenerateRequest): AsyncGenerator<EngineStep> {
  // A recording ends where its engine ended it: `stop`; only `maxTokens` cutting it short is `length` (the
  // adapters tell an unterminated last message from the tokens themselves).
  const end = Math.min(completion.length, request.maxTokens ?? completion.length)
  const finishReason: EngineFinishReason = end === completion.length ? 'stop' : 'length'
  const usage = { promptTokens: request.tokens.length, completionTokens: end }
  let at = 0
  do {
    // One step per event-loop turn, as from a socket: other requests interleave, and an abort lands between.
    await new Promise((resolve) => setImmediate(resolve))
    if (request.signal?.aborted) {
      yield { tokens: new Uint32Array(0), finishReason: 'abort' }
      return
    }
    // A copy: the caller owns the step (it may keep or change it), the recording stays as it was.
    const tokens = completion.slice(at, Math.min(at + interval, end))
    at += interval
    yield at >= end ? { tokens, finishReason, usage } : { tokens }
  } while (at < end)
}
