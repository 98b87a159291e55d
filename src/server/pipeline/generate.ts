/** Step three: the engine's steps for a prepared request. */
import type { IncomingMessage } from 'node:http'

import { ReplayEngine } from '../../engines/replay'
import { limitedSteps, OwnWork } from '../../engines/time-limits'
import type { EngineStep, GenerateRequest } from '../../engines/types'
import { HttpError } from '../../http/errors'
import { generateRequestOf } from '../../http/generate-request'
import { type Grant, UNLIMITED } from '../keys/key-limits'
import { EngineTrail } from '../observe/engine-trail'
import { noteEngines, recordOf, recordWatcher } from '../observe/request-log'
import { generationSpan, spanWatcher } from '../observe/tracing'
import { allOf, type StepWatcher } from '../observe/watch'
import { type ToolCaller, toolLoopSteps } from '../tools/loop'
import type { Gateway } from './context'
import type { Prepared } from './prepared'
import { requiredCallSteps } from './required-call'

/** Lets the request's caller start a generation (a 429 when its key is over a limit; always, without keys). */
export async function admit(gateway: Gateway): Promise<Grant> {
  return gateway.caller === null ? UNLIMITED : await gateway.limiter.admit(gateway.caller)
}

/** One generation: its steps, and which engine generated which of their ids (whose output its diagnostics are about). */
export interface Generation {
  steps: AsyncIterable<EngineStep>
  served: EngineTrail
}

/**
 * The steps of one generation, held to the gateway's time limits and its caller's limits (`grant`: what
 * `admit` gave); with `generated`, each step's ids are added to it (what a kept response
 * and the Chat id cache record). `tools`: the response's built-in tools (`toolsOfResponse`), whose calls the
 * gateway runs. The replay engine's completion can be picked per request (`x-harmony-replay`).
 * An engine that fails before its first step throws from the iterator (pipeSse and collectSteps: a 502/503).
 */
export function generate(
  gateway: Gateway,
  request: IncomingMessage,
  prepared: Prepared,
  signal: AbortSignal,
  generated: number[] | null,
  grant: Grant,
  tools: ToolCaller | null,
): Generation {
  const { engine } = gateway
  // Aborted by the caller (a client that left), or at a time limit.
  const timedOut = new AbortController()
  // The generation's span; the engine request carries the trace on (tracing.ts).
  const span = generationSpan(engine.name, prepared.prompt.promptTokens, request.headers)
  const meters = gateway.meters === null ? null : gateway.meters.watcher(engine.name, prepared.prompt.promptTokens)
  const served = new EngineTrail(engine.name)
  const record = recordOf(request)
  const engineRequest = {
    ...generateRequestOf(prepared.prompt, prepared.parameters, AbortSignal.any([signal, timedOut.signal])),
    ...span.headers,
    // Several engines: the metrics count the one that serves it, the diagnostics go to the one whose ids they
    // point at, the request's line names it (as it changes: the line may be written before the steps end).
    onEngine: (name: string, failure?: unknown) => {
      served.onEngine(name, failure)
      meters?.servedBy(name, failure)
      if (record !== undefined) noteEngines(record, served)
    },
  }
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
  // What watches the steps go by, told from inside the loop that times them (no generator layer of its own,
  // which would cost about 150 ns a step more: docs/API.md "Metrics").
  const watchers: StepWatcher[] = [served]
  if (span.span.isRecording()) watchers.push(spanWatcher(span.span))
  else span.span.end()
  if (meters !== null) watchers.push(meters)
  if (grant !== UNLIMITED) watchers.push(chargeWatcher(grant, prepared.prompt.promptTokens, signal))
  if (generated !== null) watchers.push({ step: (step) => pushIds(generated, step.tokens), end: () => {} })
  if (record !== undefined) watchers.push(recordWatcher(record, served, prepared.prompt.promptTokens))
  const { requiredCall } = prepared.prompt
  let steps: AsyncIterable<EngineStep>
  // A built-in tool's call runs between engine steps: the gateway's work, not the engine's silence.
  const own = tools === null ? null : new OwnWork()
  if (requiredCall !== undefined) steps = requiredCallSteps(generateOne, engineRequest, requiredCall)
  else if (tools !== null && own !== null) {
    const options = { maxCalls: gateway.toolCalls, implementation: gateway.implementation, own }
    steps = toolLoopSteps(generateOne, engineRequest, tools, options)
  } else steps = generateOne(engineRequest)
  return { steps: limitedSteps(engine.name, steps, gateway.engineTimeLimits, () => timedOut.abort(), allOf(watchers), own), served }
}

function pushIds(generated: number[], ids: ArrayLike<number>): void {
  for (let i = 0; i < ids.length; i++) generated.push(ids[i]!)
}

/**
 * Charges the generation's tokens (prompt and generated) to its grant when it ends, however it ends (an abort
 * ends it too, should the steps never be read).
 */
function chargeWatcher(grant: Grant, promptTokens: number, signal: AbortSignal): StepWatcher {
  let tokens = promptTokens
  const end = () => grant.end(tokens)
  signal.addEventListener('abort', end, { once: true })
  return {
    step: (step) => {
      tokens += step.tokens.length
    },
    end: () => {
      signal.removeEventListener('abort', end)
      end()
    },
  }
}
