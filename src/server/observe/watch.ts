/**
 * What watches a generation's steps go by (metrics, tracing, a key's charge, the ids kept, the request's log
 * line, which engine generated which ids): each a few synchronous calls a step, all told from the one loop that times the steps (`limitedSteps`),
 * so that watching adds no generator layer to the hot path.
 */
import type { StepWatcher } from '../../engines/time-limits'

export type { StepWatcher } from '../../engines/time-limits'

/** One watcher that tells each of `watchers` in turn (null: none to tell). */
export function allOf(watchers: readonly StepWatcher[]): StepWatcher | undefined {
  if (watchers.length === 0) return undefined
  if (watchers.length === 1) return watchers[0]
  return {
    start: () => {
      for (const watcher of watchers) watcher.start?.()
    },
    step: (step) => {
      for (const watcher of watchers) watcher.step(step)
    },
    end: (failure) => {
      for (const watcher of watchers) watcher.end(failure)
    },
  }
}
