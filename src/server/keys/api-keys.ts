/**
 * API keys: who may use a gateway, and under what limits. A request carries its key as OpenAI's clients send it
 * (`Authorization: Bearer KEY`; `x-api-key` too, the header other APIs' clients send); a gateway with keys answers
 * one without a valid key with OpenAI's 401. The key's `name` is the caller: what it keeps (stored responses,
 * background runs, compactions, sealed reasoning) belongs to that name, and no other caller can read, continue,
 * cancel or delete it (server/caller.ts).
 *
 * Keys are compared by their SHA-256, so a key file may hold digests instead of keys (`sha256`), and a key is
 * never kept, logged or echoed in a message. Names are what logs and metrics may show.
 */
import { createHash } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'

import { checkOptions, describe, is, type OptionSpec, optionError } from '../../base/options'
import { isRecord } from '../../base/records'
import { HttpError } from '../../http/errors'

/** What one key may do at most (each absent: no limit). */
export interface ApiKeyLimits {
  /** Generations running at once (streamed or not, background runs included). */
  concurrentStreams?: number
  /** Requests that generate, per minute. */
  requestsPerMinute?: number
  /** Prompt and generated tokens per minute (counted when a generation ends). */
  tokensPerMinute?: number
  /** Responses WebSocket connections held at once. Default 64. */
  webSockets?: number
}

/** One key: the key itself or its SHA-256 (64 hex digits), a name (the caller), and its limits. */
export interface ApiKey {
  key?: string
  sha256?: string
  name: string
  limits?: ApiKeyLimits
}

/** A key holder as a request is served for it. */
export interface Caller {
  name: string
  limits: Readonly<ApiKeyLimits>
}

const LIMIT_OPTIONS: OptionSpec = {
  concurrentStreams: is.integer(1),
  requestsPerMinute: is.integer(1),
  tokensPerMinute: is.integer(1),
  webSockets: is.integer(1),
}

const KEY_OPTIONS: OptionSpec = { key: is.nonEmptyString, sha256: is.string, name: is.nonEmptyString, limits: is.object }

const digest = (key: string) => createHash('sha256').update(key, 'utf8').digest('hex')

/** A gateway's keys, by digest. */
export class ApiKeys {
  private readonly byDigest = new Map<string, Caller>()

  /** `keys`: key strings (named `key1`, `key2`… in order) or `ApiKey` entries; `where` names the option in errors. */
  constructor(keys: readonly (string | ApiKey)[], where: string) {
    if (!Array.isArray(keys) || keys.length === 0)
      throw optionError(TypeError, `${where} must be a non-empty array of keys (strings or { key | sha256, name, limits })`)
    const names = new Set<string>()
    keys.forEach((entry, i) => {
      const at = `${where}[${i}]`
      const { key, sha256, name, limits } =
        typeof entry === 'string' ? { key: entry, sha256: undefined, name: `key${i + 1}`, limits: {} } : checkEntry(entry, at)
      if (key === '') throw optionError(TypeError, `${at} must not be empty`)
      const hash = sha256 === undefined ? digest(key!) : sha256.toLowerCase()
      if (this.byDigest.has(hash)) throw optionError(TypeError, `${at}: the same key is listed twice (its value is not shown)`)
      if (names.has(name)) throw optionError(TypeError, `${at}: the name ${describe(name)} is taken by another key; names must differ`)
      names.add(name)
      this.byDigest.set(hash, { name, limits: Object.freeze({ ...limits }) })
    })
  }

  /** The caller a request's key names; a 401 in OpenAI's shape without a key, or with one this gateway does not know. */
  caller(headers: IncomingHttpHeaders): Caller {
    const presented = presentedKey(headers)
    if (presented === null)
      throw new HttpError(
        401,
        "You didn't provide an API key. Provide it in an Authorization header using Bearer auth (Authorization: Bearer YOUR_KEY).",
        { code: 'missing-api-key' },
      )
    const caller = this.byDigest.get(digest(presented))
    if (caller === undefined) throw new HttpError(401, 'Incorrect API key provided.', { code: 'invalid-api-key' })
    return caller
  }
}

function checkEntry(entry: unknown, at: string): { key?: string; sha256?: string; name: string; limits: ApiKeyLimits } {
  if (!isRecord(entry)) throw optionError(TypeError, `${at} must be a key string or { key | sha256, name, limits }, not ${describe(entry)}`)
  // The key's value is never shown: a wrong one is named by its place only.
  if (entry.key !== undefined && (typeof entry.key !== 'string' || entry.key === ''))
    throw optionError(TypeError, `${at}.key must be a non-empty string (its value is not shown)`)
  const { key: _key, ...shown } = entry
  const checked = checkOptions<ApiKey>({ ...shown, ...(entry.key === undefined ? {} : { key: 'x' }) }, KEY_OPTIONS, at, ['name'])
  if ((entry.key === undefined) === (checked.sha256 === undefined)) throw optionError(TypeError, `${at} must have one of key and sha256`)
  if (checked.sha256 !== undefined && !/^[0-9a-fA-F]{64}$/.test(checked.sha256))
    throw optionError(TypeError, `${at}.sha256 must be 64 hex digits (a key's SHA-256)`)
  const limits = checkOptions<ApiKeyLimits>(checked.limits ?? {}, LIMIT_OPTIONS, `${at}.limits`)
  return { key: entry.key as string | undefined, sha256: checked.sha256, name: checked.name, limits }
}

/** The key a request presents: `Authorization: Bearer KEY`, or `x-api-key: KEY`; null when none. */
function presentedKey(headers: IncomingHttpHeaders): string | null {
  const authorization = headers.authorization
  if (typeof authorization === 'string') {
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(authorization)
    if (bearer !== null) return bearer[1]!
  }
  const apiKey = headers['x-api-key']
  return typeof apiKey === 'string' && apiKey !== '' ? apiKey : null
}
