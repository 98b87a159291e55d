import { PerformanceObserver } from 'node:perf_hooks'

/** CPU, GC and heap of this process, for benchmarks (`GET /stats`, GATEWAY_STATS=1). */
export function processStats(): () => Record<string, unknown> {
  let gcMs = 0
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcMs += entry.duration
  }).observe({ entryTypes: ['gc'] })
  return () => {
    const cpu = process.cpuUsage()
    const memory = process.memoryUsage()
    return { pid: process.pid, cpuMs: (cpu.user + cpu.system) / 1000, gcMs, heapUsed: memory.heapUsed, rss: memory.rss }
  }
}
