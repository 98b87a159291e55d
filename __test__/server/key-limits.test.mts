/**
 * `MemoryKeyLimiter` with a clock of the test's own: each limit refuses with OpenAI's 429 when it is reached and lets
 * the key back in exactly when its bucket has refilled (per minute, continuously), and tokens are charged when a
 * generation ends.
 */
import { createRequire } from 'node:module'
import { join } from 'node:path'

import test from 'ava'

const { MemoryKeyLimiter } = createRequire(import.meta.url)(
  join(import.meta.dirname, '..', '..', 'src', 'server', 'keys', 'key-limits.ts'),
) as {
  MemoryKeyLimiter: new (
    now: () => number,
  ) => { admit(caller: { name: string; limits: Record<string, number> }): { end(tokens: number): void } }
}

function limiter() {
  let now = 1_000_000
  return { limits: new MemoryKeyLimiter(() => now), advance: (ms: number) => (now += ms) }
}

/** The 429's status, type, retry-after, or 'admitted'. */
function admitted(attempt: () => unknown): string {
  try {
    attempt()
    return 'admitted'
  } catch (error) {
    const { status, type, headers } = error as { status: number; type: string; headers: Record<string, string> }
    return `${status} ${type} retry-after ${headers['retry-after']}`
  }
}

test('requests per minute: a burst up to the limit, then one more each time the bucket refills a request', (t) => {
  const { limits, advance } = limiter()
  const caller = { name: 'a', limits: { requestsPerMinute: 6 } }
  for (let i = 0; i < 6; i++) limits.admit(caller).end(0)
  t.is(
    admitted(() => limits.admit(caller)),
    '429 requests retry-after 10',
  )
  advance(9_999)
  t.is(
    admitted(() => limits.admit(caller)),
    '429 requests retry-after 1',
  )
  advance(1)
  t.is(
    admitted(() => limits.admit(caller)),
    'admitted',
  )
  t.regex(
    admitted(() => limits.admit(caller)),
    /^429 requests/,
  )
})

test('tokens per minute: charged when a generation ends; a key over waits until its bucket is above empty again', (t) => {
  const { limits, advance } = limiter()
  const caller = { name: 'a', limits: { tokensPerMinute: 600 } }
  const grant = limits.admit(caller)
  // Admitted while the first runs: its tokens are not known yet.
  limits.admit(caller).end(0)
  grant.end(900)
  // 600 - 900 = -300: 301 tokens to refill at 10 a second.
  t.is(
    admitted(() => limits.admit(caller)),
    '429 tokens retry-after 31',
  )
  advance(30_000)
  t.regex(
    admitted(() => limits.admit(caller)),
    /^429 tokens/,
  )
  advance(1_000)
  t.is(
    admitted(() => limits.admit(caller).end(0)),
    'admitted',
  )
  // Ending twice charges once.
  const twice = limits.admit(caller)
  twice.end(0)
  twice.end(10_000)
  t.is(
    admitted(() => limits.admit(caller).end(0)),
    'admitted',
  )
})

test('concurrent streams: refused while the limit runs, let in as soon as one ends; keys are counted apart', (t) => {
  const { limits } = limiter()
  const a = { name: 'a', limits: { concurrentStreams: 2 } }
  const b = { name: 'b', limits: { concurrentStreams: 2 } }
  const first = limits.admit(a)
  limits.admit(a)
  t.is(
    admitted(() => limits.admit(a)),
    '429 requests retry-after 1',
  )
  t.is(
    admitted(() => limits.admit(b)),
    'admitted',
  )
  first.end(0)
  t.is(
    admitted(() => limits.admit(a)),
    'admitted',
  )
})
