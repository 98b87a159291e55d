/**
 * What watches a generation's steps go by (metrics, tracing, a key's charge, the ids kept): synchronous calls
 * a step, all in one loop, so that adding a watcher adds no generator layer to the hot path.
 */
import type { EngineStep } from '../serving/engines/types'

/** Something told of each step of a generation as it passes, and of how the generation ended. */
export interface StepWatcher {
  /** When the steps are first asked for (a generation never read is never started). */
  start?(): void
  step(step: EngineStep): void
  /** `failure`: what the engine threw, or null. Called once, however the steps end (done, left, failed). */
  end(failure: unknown): void
}

/** The steps as they come, each shown to every watcher first. */
export async function* watched(steps: AsyncIterable<EngineStep>, watchers: readonly StepWatcher[]): AsyncIterable<EngineStep> {
  let failure: unknown = null
  for (const watcher of watchers) watcher.start?.()
  try {
    for await (const step of steps) {
      for (const watcher of watchers) watcher.step(step)
      yield step
    }
  } catch (error) {
    failure = error
    throw error
  } finally {
    for (const watcher of watchers) watcher.end(failure)
  }
}
