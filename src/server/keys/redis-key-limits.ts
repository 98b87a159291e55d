/**
 * Each API key's limits counted in Redis, so that every gateway process and host sharing it gives a key its
 * limits once, not once each: the same rules as `MemoryKeyLimiter` (key-limits.ts), each admission and each end
 * one Lua script, atomic in Redis. A key's running generations are a sorted set of grants, each with a lease
 * (`leaseMs`): a process that dies holding some gives them back when their leases lapse. Its per-minute buckets
 * are hashes (`level`, `at`) that expire once they would be full again. Times are the gateways' clocks (`now`),
 * which share a key's buckets and should agree to well under a second.
 *
 *   createGateway({ apiKeys, keyLimiter: new RedisKeyLimiter({ url: 'redis://127.0.0.1:6379' }) })
 */
import { randomUUID } from 'node:crypto'

import { checkOptions, is, type OptionSpec } from '../../base/options'
import { RedisConnection } from '../stores/redis-connection'
import type { Caller } from './api-keys'
import { type Grant, type KeyLimiter, MINUTE, rateLimited, ratelimitHeaders, UNLIMITED, waitFor } from './key-limits'

export interface RedisKeyLimiterOptions {
  /** `redis://[user:password@]host:port[/db]`. */
  url: string
  /** Of every key it writes. Default `'harmony-stream:limits:'`. */
  keyPrefix?: string
  /** How long a grant counts as running without ending (a process that died holding it). Default 15 minutes. */
  leaseMs?: number
  /** How long a command may wait for Redis (connecting included). Default 5,000 ms. */
  timeoutMs?: number
  /** The clock, in ms. Default `Date.now`. */
  now?: () => number
}

const OPTIONS: OptionSpec = {
  url: is.nonEmptyString,
  keyPrefix: is.string,
  leaseMs: is.integer(1),
  timeoutMs: is.integer(1),
  now: is.function,
}

/** A bucket's level now (KEYS[i], its limit a minute), refilled since it was last written. */
const LEVEL = `
local function level(key, limit, now)
  local v = redis.call('HMGET', key, 'level', 'at')
  local l = tonumber(v[1]) or limit
  local at = tonumber(v[2]) or now
  return math.min(limit, l + (now - at) * limit / ${MINUTE})
end
local function keep(key, value, limit, now)
  redis.call('HSET', key, 'level', tostring(value), 'at', tostring(now))
  -- Until it would be full again: then an absent bucket reads as full.
  redis.call('PEXPIRE', key, math.ceil((limit - value) * ${MINUTE} / limit) + 1000)
end
`

/**
 * KEYS: streams (a sorted set), requests, tokens (hashes). ARGV: now, grant id, lease, the three limits (0:
 * none). Returns { 'ok' } or { the limit hit, the bucket's level }.
 */
const ADMIT = `${LEVEL}
local now = tonumber(ARGV[1])
local streams, rpm, tpm = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
if streams > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  if redis.call('ZCARD', KEYS[1]) >= streams then return { 'streams', '0' } end
end
if tpm > 0 then
  local t = level(KEYS[3], tpm, now)
  if t <= 0 then return { 'tokens', tostring(t) } end
end
if rpm > 0 then
  local r = level(KEYS[2], rpm, now)
  if r < 1 then return { 'requests', tostring(r) } end
  keep(KEYS[2], r - 1, rpm, now)
end
if streams > 0 then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
end
return { 'ok', '0' }
`

/** KEYS: streams, tokens. ARGV: now, grant id, tokens used, the tokens limit (0: none). */
const END = `${LEVEL}
local now = tonumber(ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[2])
local tpm = tonumber(ARGV[4])
if tpm > 0 then keep(KEYS[2], level(KEYS[2], tpm, now) - tonumber(ARGV[3]), tpm, now) end
return 'ok'
`

export class RedisKeyLimiter implements KeyLimiter {
  private readonly redis: RedisConnection
  private readonly keyPrefix: string
  private readonly leaseMs: number
  private readonly now: () => number

  constructor(options: RedisKeyLimiterOptions) {
    const checked = checkOptions<RedisKeyLimiterOptions>(options, OPTIONS, 'RedisKeyLimiter', ['url'])
    this.redis = new RedisConnection(checked.url, checked.timeoutMs ?? 5000, 'RedisKeyLimiter')
    this.keyPrefix = checked.keyPrefix ?? 'harmony-stream:limits:'
    this.leaseMs = checked.leaseMs ?? 15 * MINUTE
    this.now = checked.now ?? Date.now
  }

  async admit(caller: Caller): Promise<Grant> {
    const { concurrentStreams, requestsPerMinute, tokensPerMinute } = caller.limits
    if (concurrentStreams === undefined && requestsPerMinute === undefined && tokensPerMinute === undefined) return UNLIMITED
    const keys = this.keysOf(caller.name)
    const id = randomUUID()
    const [hit, level] = (await this.redis.command('admit', (client) =>
      client.eval(ADMIT, {
        keys: [keys.streams, keys.requests, keys.tokens],
        arguments: [this.now(), id, this.leaseMs, concurrentStreams ?? 0, requestsPerMinute ?? 0, tokensPerMinute ?? 0].map(String),
      }),
    )) as [string, string]
    if (hit === 'streams')
      throw rateLimited('requests', `${concurrentStreams} generations at once`, 1, {
        'x-ratelimit-limit-streams': String(concurrentStreams),
      })
    if (hit === 'tokens')
      throw rateLimited(
        'tokens',
        `${tokensPerMinute} tokens per minute`,
        waitFor(-Number(level) + 1, tokensPerMinute!),
        ratelimitHeaders('tokens', tokensPerMinute!, Number(level)),
      )
    if (hit === 'requests')
      throw rateLimited(
        'requests',
        `${requestsPerMinute} requests per minute`,
        waitFor(1 - Number(level), requestsPerMinute!),
        ratelimitHeaders('requests', requestsPerMinute!, Number(level)),
      )
    let ended: Promise<void> | null = null
    return {
      // A Redis that fails here leaves the grant to its lease: nothing for the generation to wait for.
      end: (tokens) =>
        (ended ??= this.redis
          .command('end', (client) =>
            client.eval(END, { keys: [keys.streams, keys.tokens], arguments: [this.now(), id, tokens, tokensPerMinute ?? 0].map(String) }),
          )
          .then(
            () => {},
            () => {},
          )),
    }
  }

  close(): Promise<void> {
    return this.redis.close()
  }

  private keysOf(name: string) {
    const base = `${this.keyPrefix}${name}:`
    return { streams: `${base}streams`, requests: `${base}requests`, tokens: `${base}tokens` }
  }
}
