/** Waiting in a test for something that happens on its own time: bounded, never a timed assertion. */

/**
 * Resolves with whether `condition` held within `ms` (it is asked every 10 ms). The default bound is one a loaded
 * machine stays within (a busy event loop can hold a close or an abort back for seconds); a test
 * that passes never waits it out.
 */
export async function until(condition: () => boolean, ms = 10_000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((resolve) => setTimeout(resolve, 10))) if (condition()) return true
  return condition()
}
