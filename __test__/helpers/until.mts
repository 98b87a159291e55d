/** Waiting in a test for something that happens on its own time: bounded, never a timed assertion. */

/** Resolves with whether `condition` held within `ms` (it is asked every 10 ms). */
export async function until(condition: () => boolean, ms = 2000): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((resolve) => setTimeout(resolve, 10))) if (condition()) return true
  return condition()
}
