/**
 * Time limits on a generation, whatever the engine: the first token, the silence between tokens, and the whole
 * request. They count tokens, not bytes: an engine (or a proxy before it) that keeps its connection alive with
 * heartbeats, or sends steps with no ids, makes no progress, while the HTTP client's read timeout (http.ts)
 * resets on every byte. On a limit the engine request is aborted (its connection closed, so the engine frees
 * the sequence) and the steps end with an `EngineError` naming the limit: before the first step a gateway
 * answers it as a 504; after, as the stream's error.
 */
import { checkOptions, is, type OptionSpec } from '../../base/options'
import { EngineError } from './errors'
import type { EngineStep } from './types'

export interface EngineTimeLimits {
  /** From the request to the first step with ids (the prefill, and a queue before it). null: none. */
  firstTokenMs?: number | null
  /** From one step with ids to the next. null: none. */
  idleMs?: number | null
  /** From the request to the last step. null: none. */
  deadlineMs?: number | null
}

export const DEFAULT_ENGINE_TIME_LIMITS: Readonly<Required<EngineTimeLimits>> = Object.freeze({
  firstTokenMs: 120_000,
  idleMs: 60_000,
  deadlineMs: null,
})

const ENGINE_TIME_LIMIT_OPTIONS: OptionSpec = {
  firstTokenMs: is.nullable(is.integer(1)),
  idleMs: is.nullable(is.integer(1)),
  deadlineMs: is.nullable(is.integer(1)),
}

/** `limits` checked (a TypeError naming a bad one, under `where`), with the defaults for those not given. */
export function engineTimeLimits(limits: unknown, where: string): Readonly<Required<EngineTimeLimits>> {
  return Object.freeze({ ...DEFAULT_ENGINE_TIME_LIMITS, ...checkOptions<EngineTimeLimits>(limits, ENGINE_TIME_LIMIT_OPTIONS, where) })
}

/** Which limit ended a generation, as its `EngineError` code says. */
type Limit = 'engine-first-token-timeout' | 'engine-idle-timeout' | 'engine-deadline-exceeded'

/**
 * `steps` held to `limits` (`engineTimeLimits`); `abort` ends the engine request (the signal its request was given), which an
 * engine client answers by closing its connection. A step that arrives after a limit passed is not taken.
 */
export async function* limitedSteps(
  engine: string,
  steps: AsyncIterable<EngineStep>,
  limits: Readonly<Required<EngineTimeLimits>>,
  abort: () => void,
): AsyncIterable<EngineStep> {
  const { firstTokenMs, idleMs, deadlineMs } = limits
  const started = performance.now()
  let sawTokens = false
  let lastTokens = started
  const iterator = steps[Symbol.asyncIterator]()
  // Whether the engine's iterator needs no closing here: a read of it is pending (which ends, fails, or is
  // aborted at a limit) or it ended. At a yield it does: a reader that stops early closes it.
  let over = false
  try {
    for (;;) {
      // The nearest limit from now: the deadline, or the first token's, or the silence's.
      const now = performance.now()
      const candidates: [Limit, number][] = []
      if (deadlineMs !== null) candidates.push(['engine-deadline-exceeded', started + deadlineMs - now])
      if (!sawTokens && firstTokenMs !== null) candidates.push(['engine-first-token-timeout', started + firstTokenMs - now])
      if (sawTokens && idleMs !== null) candidates.push(['engine-idle-timeout', lastTokens + idleMs - now])
      const nearest = candidates.reduce<[Limit, number] | null>((a, b) => (a === null || b[1] < a[1] ? b : a), null)
      const next = iterator.next()
      over = true
      const result = nearest === null ? await next : await within(next, Math.max(0, nearest[1]))
      if (result === null) {
        // The engine's pending read ends with the abort: its rejection is this limit's, already told.
        next.catch(() => {})
        abort()
        const [code] = nearest!
        throw new EngineError(code, `${engine}: ${describe(code, { firstTokenMs, idleMs, deadlineMs })}`, { engine })
      }
      if (result.done) return
      over = false
      if (result.value.tokens.length > 0) {
        sawTokens = true
        lastTokens = performance.now()
      }
      yield result.value
    }
  } finally {
    if (!over) await iterator.return?.()
  }
}

/** `next`'s result, or null when `ms` pass first. */
function within<T>(next: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), ms)
  })
  return Promise.race([next, late]).finally(() => clearTimeout(timer))
}

function describe(code: Limit, limits: Required<EngineTimeLimits>): string {
  if (code === 'engine-first-token-timeout') return `no token within ${limits.firstTokenMs} ms of the request (firstTokenMs)`
  if (code === 'engine-idle-timeout') return `no token for ${limits.idleMs} ms (idleMs)`
  return `the generation passed ${limits.deadlineMs} ms (deadlineMs)`
}
