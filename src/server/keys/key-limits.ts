/**
 * Each API key's limits (`ApiKeyLimits`): generations running at once, requests per minute, tokens per minute.
 * Over one, a request is answered as OpenAI answers: 429, code `rate_limit_exceeded`, type `requests` or
 * `tokens`, with `retry-after` (seconds) and the `x-ratelimit-*` headers of the limit it hit.
 *
 * Per minute is a bucket that refills continuously (a limit of 60 a minute: one a second, at most 60 at once),
 * so a client that paces itself is never refused and one that bursts waits only as long as it must. Tokens are
 * known only when a generation ends: each is charged then (prompt and generated), and a key that went over
 * waits until its bucket is back above empty. `MemoryKeyLimiter` counts in this process (a gateway of several
 * processes gives each key its limits in each); `RedisKeyLimiter` (redis-key-limits.ts) counts in Redis, for all
 * the processes and hosts that share it.
 */
import { HttpError } from '../../http/errors'
import type { ApiKeyLimits, Caller } from './api-keys'

/**
 * A generation a key was let start: `end` gives back its stream and charges the tokens it used (once; a
 * limiter that counts elsewhere resolves when that is done, and never rejects).
 */
export interface Grant {
  end(tokens: number): void | Promise<void>
}

/** Counts each key's use against its limits: `admit` lets a generation start, or throws the 429 of a limit. */
export interface KeyLimiter {
  admit(caller: Caller): Grant | Promise<Grant>
  /** Releases what it holds (a connection). */
  close?(): Promise<void>
}

/** A bucket of `limit` per minute: its level when last seen, and when. */
interface Bucket {
  level: number
  at: number
}

interface KeyUse {
  streams: number
  requests: Bucket | null
  tokens: Bucket | null
}

export const MINUTE = 60_000

export class MemoryKeyLimiter implements KeyLimiter {
  private readonly uses = new Map<string, KeyUse>()

  /** `now`: the clock, in milliseconds (tests move one of their own). */
  constructor(private readonly now: () => number = Date.now) {}

  /** Lets `caller` start a generation, or throws the 429 of the limit it is over. */
  admit(caller: Caller): Grant {
    const { limits } = caller
    if (limits.concurrentStreams === undefined && limits.requestsPerMinute === undefined && limits.tokensPerMinute === undefined)
      return UNLIMITED
    const use = this.useOf(caller.name, limits)
    const now = this.now()
    if (limits.concurrentStreams !== undefined && use.streams >= limits.concurrentStreams)
      throw rateLimited('requests', `${limits.concurrentStreams} generations at once`, 1, {
        'x-ratelimit-limit-streams': String(limits.concurrentStreams),
      })
    if (use.tokens !== null) {
      const level = refilled(use.tokens, limits.tokensPerMinute!, now)
      if (level <= 0)
        throw rateLimited(
          'tokens',
          `${limits.tokensPerMinute} tokens per minute`,
          waitFor(-level + 1, limits.tokensPerMinute!),
          ratelimitHeaders('tokens', limits.tokensPerMinute!, level),
        )
    }
    if (use.requests !== null) {
      const level = refilled(use.requests, limits.requestsPerMinute!, now)
      if (level < 1)
        throw rateLimited(
          'requests',
          `${limits.requestsPerMinute} requests per minute`,
          waitFor(1 - level, limits.requestsPerMinute!),
          ratelimitHeaders('requests', limits.requestsPerMinute!, level),
        )
      use.requests.level = level - 1
      use.requests.at = now
    }
    use.streams++
    let ended = false
    return {
      end: (tokens) => {
        if (ended) return
        ended = true
        use.streams--
        if (use.tokens !== null) {
          const at = this.now()
          use.tokens.level = refilled(use.tokens, limits.tokensPerMinute!, at) - tokens
          use.tokens.at = at
        }
      },
    }
  }

  private useOf(name: string, limits: Readonly<ApiKeyLimits>): KeyUse {
    let use = this.uses.get(name)
    if (use === undefined) {
      const full = (limit: number | undefined) => (limit === undefined ? null : { level: limit, at: this.now() })
      use = { streams: 0, requests: full(limits.requestsPerMinute), tokens: full(limits.tokensPerMinute) }
      this.uses.set(name, use)
    }
    return use
  }
}

export const UNLIMITED: Grant = { end: () => {} }

/** A bucket's level now: what it held, plus what a minute's `limit` refills since, up to `limit`. */
function refilled(bucket: Bucket, limit: number, now: number): number {
  return Math.min(limit, bucket.level + ((now - bucket.at) * limit) / MINUTE)
}

/** Whole seconds until a bucket refilling `limit` a minute gains `missing`. */
export function waitFor(missing: number, limit: number): number {
  return Math.max(1, Math.ceil((missing * MINUTE) / limit / 1000))
}

export function ratelimitHeaders(kind: 'requests' | 'tokens', limit: number, level: number): Record<string, string> {
  return { [`x-ratelimit-limit-${kind}`]: String(limit), [`x-ratelimit-remaining-${kind}`]: String(Math.max(0, Math.floor(level))) }
}

export function rateLimited(type: 'requests' | 'tokens', what: string, retryAfter: number, headers: Record<string, string>): HttpError {
  return new HttpError(429, `Rate limit reached for this key: ${what}. Retry after ${retryAfter} s.`, {
    type,
    code: 'rate-limit-exceeded',
    headers: { 'retry-after': String(retryAfter), ...headers },
  })
}
