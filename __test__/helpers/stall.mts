/**
 * How long a paused client's socket buffers take to fill depends on the machine's load, so backpressure
 * tests wait for it instead of sleeping a fixed time: until steps are pulled at all, then until half a second
 * passes with at most `slack` more (20 s at most in all). Returns the count from before that half second. A pipe without
 * backpressure never gets there, and the caller's check on the returned count fails.
 */
export async function untilStalled(pulled: () => number, slack = 1): Promise<number> {
  let waited = 0
  // First the stream gets going (a check before the first step would prove nothing).
  for (; waited < 20_000 && pulled() === 0; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50))
  let before = -slack - 1
  for (; waited < 20_000 && pulled() - before > slack; waited += 500) {
    before = pulled()
    await new Promise((resolve) => setTimeout(resolve, 500))
  }
  return before
}
