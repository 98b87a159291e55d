/** Step three: the engine's steps for a prepared request. */
import type { IncomingMessage } from 'node:http'

import { ReplayEngine } from '../serving/engines/replay'
import { limitedSteps } from '../serving/engines/time-limits'
import type { EngineStep, GenerateRequest } from '../serving/engines/types'
import { generateRequestOf } from '../serving/generate-request'
import { HttpError } from '../serving/http/errors'
import type { Gateway } from './context'
import type { Grant } from './key-limits'
import type { Prepared } from './prepared'
import { requiredCallSteps } from './required-call'

/** Lets the request's caller start a generation (a 429 when its key is over a limit; always, without keys). */
export function admit(gateway: Gateway): Grant {
  return gateway.caller === null ? UNLIMITED : gateway.limiter.admit(gateway.caller)
}

const UNLIMITED: Grant = { end: () => {} }

/**
 * The steps of one generation, held to the gateway's time limits and its caller's limits (`grant`: taken here
 * unless the caller took it earlier); with `generated`, each step's ids are added to it (what a kept response
 * and the Chat id cache record). The replay engine's completion can be picked per request (`x-harmony-replay`).
 * An engine that fails before its first step throws from the iterator (pipeSse and collectSteps: a 502/503).
 */
export function generate(
  gateway: Gateway,
  request: IncomingMessage,
  prepared: Prepared,
  signal: AbortSignal,
  generated: number[] | null,
  grant: Grant = admit(gateway),
): AsyncIterable<EngineStep> {
  const { engine } = gateway
  // Aborted by the caller (a client that left), or at a time limit.
  const timedOut = new AbortController()
  const engineRequest = generateRequestOf(prepared.prompt, prepared.parameters, AbortSignal.any([signal, timedOut.signal]))
  const header = request.headers['x-harmony-replay']
  let generateOne = (request: GenerateRequest) => engine.generate(request)
  if (header !== undefined) {
    if (!(engine instanceof ReplayEngine))
      throw new HttpError(400, 'x-harmony-replay applies to the replay engine only', {
        param: 'x-harmony-replay',
        code: 'invalid-parameter',
      })
    const replayIndex = Number(header)
    if (!(typeof header === 'string' && /^\d+$/.test(header) && engine.size > replayIndex))
      throw new HttpError(400, `x-harmony-replay must be an index from 0 to ${engine.size - 1}`, {
        param: 'x-harmony-replay',
        code: 'invalid-parameter',
      })
    generateOne = (request) => engine.generate({ ...request, replayIndex })
  }
  const { requiredCall } = prepared.prompt
  const steps = limitedSteps(
    engine.name,
    requiredCall === undefined ? generateOne(engineRequest) : requiredCallSteps(generateOne, engineRequest, requiredCall),
    gateway.engineTimeLimits,
    () => timedOut.abort(),
  )
  const measured = gateway.meters === null ? steps : gateway.meters.metered(engine.name, prepared.prompt.promptTokens, steps)
  const charged = grant === UNLIMITED ? measured : chargedTo(grant, prepared.prompt.promptTokens, measured, signal)
  return generated === null ? charged : recordIds(charged, generated)
}

/**
 * The steps as they come, the generation's tokens (prompt and generated) charged to its grant when it ends,
 * however it ends (an abort ends it too, should the steps never be read).
 */
async function* chargedTo(grant: Grant, promptTokens: number, steps: AsyncIterable<EngineStep>, signal: AbortSignal) {
  let tokens = promptTokens
  const end = () => grant.end(tokens)
  signal.addEventListener('abort', end, { once: true })
  try {
    for await (const step of steps) {
      tokens += step.tokens.length
      yield step
    }
  } finally {
    signal.removeEventListener('abort', end)
    end()
  }
}

/** The steps as they come, each one's ids added to `generated`. */
async function* recordIds(steps: AsyncIterable<EngineStep>, generated: number[]): AsyncIterable<EngineStep> {
  for await (const step of steps) {
    for (const id of step.tokens) generated.push(id)
    yield step
  }
}
