/**
 * Time limits on a generation, whatever the engine: the first token, the silence between tokens, and the whole
 * request. They count tokens, not bytes: an engine (or a proxy before it) that keeps its connection alive with
 * heartbeats, or sends steps with no ids, makes no progress, while the HTTP client's read timeout (http.ts)
 * resets on every byte. On a limit the engine request is aborted (its connection closed, so the engine frees
 * the sequence) and the steps end with an `EngineError` naming the limit: before the first step a gateway
 * answers it as a 504; after, as the stream's error.
 */
import { checkOptions, is, type OptionSpec } from '../base/options'
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
 * Told of each step of a generation as it passes and of how the generation ended (metrics, spans, a key's
 * charge, the ids kept: server/watch.ts), from inside the one loop that times the steps, so that watching a
 * generation adds no generator layer to the hot path.
 */
export interface StepWatcher {
  /** When the steps are first asked for (a generation never read is never started). */
  start?(): void
  step(step: EngineStep): void
  /** `failure`: what the engine threw (a time limit included), or null. Called once, however the steps end. */
  end(failure: unknown): void
}

const NOBODY: StepWatcher = { step: () => {}, end: () => {} }

/**
 * The caller's own work between engine steps (a gateway running a built-in tool's call): the engine is not
 * silent then, it was not asked for anything. While it runs the silence limits (first token, idle) do not count;
 * the deadline does, since it bounds the whole request. `limitedSteps` counts the silence again from its end.
 */
export class OwnWork {
  #running = 0
  #ended: (() => void) | null = null
  get running(): boolean {
    return this.#running > 0
  }
  /** Runs `work` as the caller's own: not the engine's silence. */
  async during<T>(work: () => Promise<T>): Promise<T> {
    this.#running++
    try {
      return await work()
    } finally {
      if (--this.#running === 0) this.#ended?.()
    }
  }
  /** @internal `limitedSteps`: told when the work ends. */
  onEnd(ended: () => void): void {
    this.#ended = ended
  }
}

/**
 * `steps` held to `limits` (`engineTimeLimits`); `abort` ends the engine request (the signal its request was given), which an
 * engine client answers by closing its connection. A step that arrives after a limit passed is not taken.
 * `stop`, when given, ends the generation from outside (a gateway shutting down): once it is aborted no step is
 * taken and the steps end with its `reason` thrown, whatever the engine's request did meanwhile; give the engine
 * request the same signal, so that the engine stops at once (the wait for the next step is cut short too where
 * a limit is set).
 */
export async function* limitedSteps(
  engine: string,
  steps: AsyncIterable<EngineStep>,
  limits: Readonly<Required<EngineTimeLimits>>,
  abort: () => void,
  watcher: StepWatcher = NOBODY,
  own: OwnWork | null = null,
  stop: AbortSignal | null = null,
): AsyncIterable<EngineStep> {
  const { firstTokenMs, idleMs, deadlineMs } = limits
  watcher.start?.()
  let failure: unknown = null
  if (firstTokenMs === null && idleMs === null && deadlineMs === null) {
    // No timer to race: the engine request, aborted by `stop` too, ends the wait.
    try {
      for await (const step of steps) {
        if (stop?.aborted) throw stop.reason
        watcher.step(step)
        yield step
      }
      if (stop?.aborted) throw stop.reason
    } catch (error) {
      // Once stopped, whatever the aborted engine request threw is the stop's.
      failure = stop?.aborted ? stop.reason : error
      throw failure
    } finally {
      watcher.end(failure)
    }
    return
  }
  const started = performance.now()
  let sawTokens = false
  let lastTokens = started
  /** The nearest limit: which, and when it passes (`performance.now()` time). */
  const nearest = (): [Limit, number] => {
    let limit: [Limit, number] = ['engine-deadline-exceeded', deadlineMs === null ? Number.POSITIVE_INFINITY : started + deadlineMs]
    const silence: [Limit, number] | null = own?.running
      ? null
      : sawTokens
        ? idleMs === null
          ? null
          : ['engine-idle-timeout', lastTokens + idleMs]
        : firstTokenMs === null
          ? null
          : ['engine-first-token-timeout', started + firstTokenMs]
    if (silence !== null && silence[1] < limit[1]) limit = silence
    return limit
  }
  // One timer, not one per step (steps come a token at a time): when it fires early (tokens came meanwhile,
  // moving the silence's limit later) it is set again for what is left; the first tokens set it again at once.
  let passed: Limit | null = null
  let timer: NodeJS.Timeout | undefined
  // Wakes the read that waits when the limit passes (or `stop` is aborted): a promise of its own per read, since
  // reactions to one long-lived promise would pile up, one per step, for the whole generation.
  let wake: ((value: null) => void) | null = null
  const onStop = () => wake?.(null)
  stop?.addEventListener('abort', onStop, { once: true })
  const arm = () => {
    const at = nearest()[1]
    if (at === Number.POSITIVE_INFINITY) return
    timer = setTimeout(
      () => {
        const [limit, due] = nearest()
        // A timer may fire a hair early by the other clock: a millisecond of slack.
        if (performance.now() + 1 < due) arm()
        else {
          passed = limit
          wake?.(null)
        }
      },
      Math.max(0, at - performance.now()),
    ).unref()
  }
  arm()
  // The caller's own work ended: the silence counts from now.
  own?.onEnd(() => {
    lastTokens = performance.now()
    clearTimeout(timer)
    if (passed === null) arm()
  })
  const iterator = steps[Symbol.asyncIterator]()
  // Whether the engine's iterator needs no closing here: a read of it is pending (which ends, fails, or is
  // aborted at a limit) or it ended. At a yield it does: a reader that stops early closes it.
  let over = false
  try {
    for (;;) {
      const next = iterator.next()
      over = true
      const result = passed !== null || stop?.aborted ? null : await Promise.race([next, new Promise<null>((resolve) => (wake = resolve))])
      wake = null
      if (result === null) {
        // The engine's pending read ends with the abort: its rejection is this limit's, already told.
        next.catch(() => {})
        abort()
        if (stop?.aborted) throw stop.reason
        const code = passed ?? 'engine-deadline-exceeded'
        throw new EngineError(code, `${engine}: ${describe(code, { firstTokenMs, idleMs, deadlineMs })}`, { engine })
      }
      if (result.done) {
        if (stop?.aborted) throw stop.reason
        return
      }
      over = false
      if (stop?.aborted) throw stop.reason
      if (result.value.tokens.length > 0) {
        lastTokens = performance.now()
        if (!sawTokens) {
          // The first tokens: the silence's limit is now idleMs from here, which can pass before the first
          // token's limit the timer was set for (or be the only limit): set it again.
          sawTokens = true
          clearTimeout(timer)
          arm()
        }
      }
      watcher.step(result.value)
      yield result.value
    }
  } catch (error) {
    failure = stop?.aborted ? stop.reason : error
    throw failure
  } finally {
    stop?.removeEventListener('abort', onStop)
    clearTimeout(timer)
    watcher.end(failure)
    if (!over) await iterator.return?.()
  }
}

function describe(code: Limit, limits: Required<EngineTimeLimits>): string {
  if (code === 'engine-first-token-timeout') return `no token within ${limits.firstTokenMs} ms of the request (firstTokenMs)`
  if (code === 'engine-idle-timeout') return `no token for ${limits.idleMs} ms (idleMs)`
  return `the generation passed ${limits.deadlineMs} ms (deadlineMs)`
}
