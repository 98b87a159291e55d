/**
 * Memory growth of a script's rounds, measured in a child process run with `--expose-gc`, for the tests that
 * check that parsers leave nothing behind. `setup` (JavaScript, run from the repository's root) defines
 * `round(n)`, which makes n parsers (and may be async). Parsers are released by finalizers that run on a later turn
 * of the event loop, and the native heap reaches its first plateau after about 3 rounds (allocator pools), so 4
 * rounds of 10^4 warm up; then two windows of 5 rounds each. A leak grows memory in both windows; the allocators'
 * one-time steps (a new plateau when more parsers happen to be alive before their finalizers run, more so on a
 * loaded machine) show in one, so callers bound the smaller of the two.
 */
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'

const root = join(import.meta.dirname, '..', '..')

export interface GrowthWindow {
  rss: number
  heap: number
}

export function growthWindows(setup: string): GrowthWindow[] {
  const script = `${setup}
    const settle = async () => { for (let i = 0; i < 6; i++) { global.gc(); await new Promise((r) => setImmediate(r)) } }
    ;(async () => {
      for (let i = 0; i < 4; i++) { await round(10000); await settle() }
      const windows = []
      for (let w = 0; w < 2; w++) {
        const before = process.memoryUsage()
        for (let i = 0; i < 5; i++) { await round(10000); await settle() }
        const after = process.memoryUsage()
        windows.push({ rss: after.rss - before.rss, heap: after.heapUsed - before.heapUsed })
      }
      console.log(JSON.stringify(windows))
    })()`
  return JSON.parse(execFileSync(process.execPath, ['--expose-gc', '-e', script], { cwd: root, encoding: 'utf8' })) as GrowthWindow[]
}

/** The windows for a test's log. */
export function describeGrowth(windows: readonly GrowthWindow[]): string {
  return `growth over two windows of 5 × 10^4 parsers: ${windows.map((w) => `rss ${(w.rss / 1e6).toFixed(1)} MB, heap ${(w.heap / 1e6).toFixed(1)} MB`).join('; ')}`
}
