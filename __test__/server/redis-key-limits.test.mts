/**
 * Per-key limits shared through a real Redis (`RedisKeyLimiter`): two limiters on one Redis, as two gateway
 * processes would hold, give a key its limits once between them; with a clock of the test's own, a bucket lets
 * the key back in exactly when it has refilled; an ended generation gives its place back, and one whose process
 * died gives it back when its lease lapses. Through the gateway: a 429 from the limit another gateway filled.
 */
import { createRequire } from 'node:module'
import { join } from 'node:path'

import test, { type ExecutionContext } from 'ava'

import { startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { redisForFile } from '../helpers/redis-server.mjs'

type Grant = { end(tokens: number): Promise<void> }
type Limiter = { admit(caller: { name: string; limits: Record<string, number> }): Promise<Grant>; close(): Promise<void> }
const { RedisKeyLimiter } = createRequire(import.meta.url)(
  join(import.meta.dirname, '..', '..', 'src', 'server', 'keys', 'redis-key-limits.ts'),
) as {
  RedisKeyLimiter: new (options: Record<string, unknown>) => Limiter
}

const redis = redisForFile(test)
const real = redis.here ? test.serial : test.skip

/** Two limiters on one Redis with one clock the test moves; a key prefix of the test's own. */
function limiters(t: ExecutionContext, prefix: string, leaseMs = 60_000) {
  let now = 1_000_000
  const make = () => new RedisKeyLimiter({ url: redis.url(), keyPrefix: `${prefix}:`, leaseMs, now: () => now })
  const pair = [make(), make()] as const
  t.teardown(() => Promise.all(pair.map((limiter) => limiter.close())))
  return { pair, advance: (ms: number) => (now += ms) }
}

async function outcome(attempt: Promise<unknown>): Promise<string> {
  try {
    await attempt
    return 'admitted'
  } catch (error) {
    const { status, type, headers } = error as { status: number; type: string; headers: Record<string, string> }
    return `${status} ${type} retry-after ${headers['retry-after']}`
  }
}

real('requests per minute are counted once across two limiters, and refill exactly', async (t) => {
  const { pair, advance } = limiters(t, 'rpm')
  const caller = { name: 'shared', limits: { requestsPerMinute: 4 } }
  for (const limiter of [pair[0], pair[1], pair[0], pair[1]]) await (await limiter.admit(caller)).end(0)
  t.is(await outcome(pair[0].admit(caller)), '429 requests retry-after 15')
  t.is(await outcome(pair[1].admit(caller)), '429 requests retry-after 15')
  advance(15_000)
  t.is(await outcome(pair[1].admit(caller)), 'admitted')
})

real('concurrent streams across two limiters: an end gives the place back, a lapsed lease too', async (t) => {
  const { pair, advance } = limiters(t, 'streams', 10_000)
  const caller = { name: 'shared', limits: { concurrentStreams: 2 } }
  const first = await pair[0].admit(caller)
  await pair[1].admit(caller)
  t.is(await outcome(pair[0].admit(caller)), '429 requests retry-after 1')
  await first.end(0)
  t.is(await outcome(pair[1].admit(caller)), 'admitted')
  // Two held, never ended (their process died): their leases lapse.
  t.regex(await outcome(pair[0].admit(caller)), /^429/)
  advance(10_001)
  t.is(await outcome(pair[0].admit(caller)), 'admitted')
})

real('tokens per minute: charged at the end, shared, refilled', async (t) => {
  const { pair, advance } = limiters(t, 'tpm')
  const caller = { name: 'shared', limits: { tokensPerMinute: 600 } }
  await (await pair[0].admit(caller)).end(900)
  t.is(await outcome(pair[1].admit(caller)), '429 tokens retry-after 31')
  advance(31_000)
  t.is(await outcome(pair[1].admit(caller)), 'admitted')
})

real('two gateways on one Redis: a key over its limit through one is refused by the other', async (t) => {
  const ANSWER = harmony('<|channel|>final<|message|>Hello.<|return|>')
  const apiKeys = [{ key: 'sk-shared-limit', name: 'shared', limits: { requestsPerMinute: 1 } }]
  const limiter = (prefix: string) => new RedisKeyLimiter({ url: redis.url(), keyPrefix: prefix })
  const a = limiter('gw:')
  const b = limiter('gw:')
  t.teardown(() => Promise.all([a.close(), b.close()]))
  const one = await startGateway(t, { replay: [ANSWER], apiKeys, keyLimiter: a })
  const two = await startGateway(t, { replay: [ANSWER], apiKeys, keyLimiter: b })
  const ask = (port: number) =>
    fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: 'Bearer sk-shared-limit', 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'gpt-oss', messages: [{ role: 'user', content: 'Hi' }] }),
    })
  t.is((await ask(one.port)).status, 200)
  const refused = await ask(two.port)
  t.is(refused.status, 429)
  t.like(await refused.json(), { error: { code: 'rate_limit_exceeded', type: 'requests' } })
})
