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
 * Lets the request's caller start `n` generations, one per choice (Chat's `n`): each is admitted, counted and
 * charged as a generation of its own, as the key limits count generations (docs/API.md "API keys"). A key
 * whose limits could never take `n` at once is a 400 naming `n` (a 429 would be retried for ever); one over a
 * limit now gets its 429, the generations already admitted given back uncharged.
 */
export async function admitChoices(gateway: Gateway, n: number): Promise<Grant[]> {
  const limits = gateway.caller?.limits
  for (const [limit, what] of [
    [limits?.concurrentStreams, 'generations at once'],
    [limits?.requestsPerMinute, 'generations a minute'],
  ] as const) {
    if (limit !== undefined && limit < n)
      throw new HttpError(400, `n ${n} is more than this key's ${limit} ${what}: each choice is a generation`, {
        param: 'n',
        code: 'invalid-parameter',
      })
  }
  const grants: Grant[] = []
  try {
    for (let i = 0; i < n; i++) grants.push(await admit(gateway))
  } catch (error) {
    await Promise.all(grants.map((grant) => grant.end(0)))
    throw error
  }
  return grants
}

/**
 * The seed of choice `choice` of a request seeded `seed`: `seed + choice`, so that the choices differ and the
 * request gives the same choices again (choice 0 is sampled as a request with `n: 1` is); near the top of the
 * safe integers, `seed - choice`.
 */
function choiceSeed(seed: number | undefined, choice: number): number | undefined {
  if (seed === undefined || choice === 0) return seed
  return seed + choice <= Number.MAX_SAFE_INTEGER ? seed + choice : seed - choice
}

/**
 * The steps of one generation, held to the gateway's time limits and its caller's limits (`grant`: what
 * `admit` gave); with `generated`, each step's ids are added to it (what a kept response
 * and the Chat id cache record). `tools`: the response's built-in tools (`toolsOfResponse`), whose calls the
 * gateway runs. The replay engine's completion can be picked per request (`x-harmony-replay`). `choice`: which
 * of the request's choices (Chat's `n`) this generation is, which gives its seed (`choiceSeed`).
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
  choice = 0,
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
    ...generateRequestOf(
      prepared.prompt,
      { ...prepared.parameters, seed: choiceSeed(prepared.parameters.seed, choice) },
      // The gateway's shutdown ends it too (its reason thrown from the steps: limitedSteps' `stop`).
      AbortSignal.any([signal, timedOut.signal, gateway.stopping]),
    ),
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
  return {
    steps: limitedSteps(engine.name, steps, gateway.engineTimeLimits, () => timedOut.abort(), allOf(watchers), own, gateway.stopping),
    served,
  }
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
