/**
 * Where a gateway keeps the Responses it answered, so that a client can come back to one
 * (`previous_response_id`, `GET /v1/responses/{id}`): the `ResponseStore` interface, what it keeps
 * (`StoredResponse`), the bounds every store holds to, and the store in memory. The SQLite and Redis stores
 * (sqlite-store.ts, redis-store.ts) keep the same records under the same bounds; a test suite holds all three
 * to one contract.
 *
 * Every store is bounded: records expire after `ttlSeconds`, a record larger than `maxRecordBytes` is refused
 * (`HarmonyLimitError`), and the memory and SQLite stores evict the least recently used records beyond
 * `maxEntries` or `maxBytes` (Redis bounds itself: its `maxmemory` and the records' expiry).
 */
import { HarmonyError, HarmonyLimitError, HarmonyStateError, type OpenAIAnswer, wireCode } from '../../base/errors'
import { checkOptions, is, type OptionSpec } from '../../base/options'

/** One response as a store keeps it. */
export interface StoredResponse {
  /** The response's id (`resp_…`), the store's key. */
  id: string
  /** Unix seconds. */
  createdAt: number
  /** The `response` object as the client got it. */
  response: Record<string, unknown>
  /** The input items of its request, each with an id (what `GET /v1/responses/{id}/input_items` lists). */
  input: Record<string, unknown>[]
  /** The prompt's token ids and the ids the engine generated, for a continuation that starts from them. */
  promptTokens?: number[]
  outputTokens?: number[]
  /**
   * Where the prompt was itself a continuation made of earlier ids: the prompt a re-render of its items gives,
   * which a later continuation is checked against (`exactContinuation`). Absent: `promptTokens` is that render.
   */
  renderedPromptTokens?: number[]
  /** The API key's name that made it (a gateway with keys): no other key sees it (server/caller.ts). */
  owner?: string
}

export interface ResponseStore {
  /** The record of `id`, or null: never stored, deleted, expired or evicted. */
  get(id: string): Promise<StoredResponse | null>
  /** Keeps `record` under its id (replacing one of that id). A record over `maxRecordBytes` is a `HarmonyLimitError`. */
  put(record: StoredResponse): Promise<void>
  /** Whether a record of `id` was there to delete. */
  delete(id: string): Promise<boolean>
  /** Releases the store (a file, a connection); using it afterwards is a `HarmonyStateError`. */
  close(): Promise<void>
}

export interface ResponseStoreBounds {
  /** A record expires this long after it was stored. Default 30 days, as OpenAI keeps responses. */
  ttlSeconds?: number
  /** The largest record (its JSON, in UTF-16 code units) a store takes. Default 16 MiB. */
  maxRecordBytes?: number
}

export interface EvictingStoreBounds extends ResponseStoreBounds {
  /** Records kept at most; the least recently used go first. Default 10,000. */
  maxEntries?: number
  /**
   * The bytes kept at most. The memory store counts what it holds: each record's JSON as UTF-8 (kept as a
   * buffer, not a string, so that the count is the memory) plus `RECORD_OVERHEAD`. Default 256 MiB.
   */
  maxBytes?: number
}

export const DEFAULT_STORE_BOUNDS: Required<EvictingStoreBounds> = Object.freeze({
  ttlSeconds: 30 * 24 * 3600,
  maxRecordBytes: 16 * 1024 * 1024,
  maxEntries: 10_000,
  maxBytes: 256 * 1024 * 1024,
})

export const BOUND_OPTIONS: OptionSpec = { ttlSeconds: is.integer(1), maxRecordBytes: is.integer(1) }
export const EVICTING_BOUND_OPTIONS: OptionSpec = { ...BOUND_OPTIONS, maxEntries: is.integer(1), maxBytes: is.integer(1) }

/** A record as the stores keep it: its JSON, checked against the largest record. */
export function recordText(record: StoredResponse, maxRecordBytes: number, where: string): string {
  checkRecord(record, where)
  const text = JSON.stringify(record)
  if (text.length > maxRecordBytes)
    throw new HarmonyLimitError(
      `${where}: response ${record.id} takes ${text.length} bytes, more than the store's maxRecordBytes (${maxRecordBytes})`,
    )
  return text
}

function checkRecord(record: StoredResponse, where: string): void {
  if (record === null || typeof record !== 'object') throw new TypeError(`${where}: the record must be an object`)
  if (typeof record.id !== 'string' || record.id === '') throw new TypeError(`${where}: the record's id must be a non-empty string`)
  if (!Number.isSafeInteger(record.createdAt)) throw new TypeError(`${where}: the record's createdAt must be Unix seconds`)
  if (record.response === null || typeof record.response !== 'object')
    throw new TypeError(`${where}: the record's response must be an object`)
  if (!Array.isArray(record.input)) throw new TypeError(`${where}: the record's input must be an array of items`)
}

/**
 * A store that cannot answer (Redis unreachable, a SQLite file that cannot be written): code `store-unavailable`,
 * the driver's error as `cause`. The HTTP helpers answer it with a 503.
 */
export class StoreError extends HarmonyError {
  constructor(where: string, cause: unknown) {
    super('store-unavailable', `${where}: the response store failed: ${cause instanceof Error ? cause.message : String(cause)}`, { cause })
  }

  /** A gateway's answer: 503, the gateway is unavailable for what needs the store (the cause goes to the log). */
  openAIAnswer(): OpenAIAnswer {
    return {
      status: 503,
      body: { error: { message: 'the response store is unavailable', type: 'server_error', param: null, code: wireCode(this.code) } },
    }
  }
}

/** Seconds since the epoch, the stores' clock (a field, so that tests can move it). */
export const clock = { now: (): number => Date.now() / 1000 }

/** The stores' refusal of use after `close()`. */
export function closedError(where: string): HarmonyStateError {
  return new HarmonyStateError('store-closed', `${where}: the store is closed`)
}

/**
 * What the memory store counts for each record beside its JSON: the buffer's own object, the map's entry and
 * its key (measured: about 300 bytes a record with 2,000 small records; rounded up).
 */
const RECORD_OVERHEAD = 512

/**
 * The default store: records in this process, least recently used first out. Each record is kept as its JSON
 * in UTF-8, in a buffer: a string's size in memory depends on its characters (one or two bytes each, as V8
 * stores it), so counting string lengths let a store bounded at 256 MiB hold twice that; a buffer's length is
 * what it holds.
 */
export class MemoryResponseStore implements ResponseStore {
  private readonly bounds: Required<EvictingStoreBounds>
  /** Least recently used first (a Map keeps insertion order; a read moves a record to the end). */
  private readonly records = new Map<string, { json: Buffer; expiresAt: number }>()
  private bytes = 0
  private closed = false

  constructor(options: EvictingStoreBounds = {}) {
    this.bounds = { ...DEFAULT_STORE_BOUNDS, ...checkOptions<EvictingStoreBounds>(options, EVICTING_BOUND_OPTIONS, 'MemoryResponseStore') }
  }

  /** Records and bytes kept now. */
  get stats(): { entries: number; bytes: number } {
    return { entries: this.records.size, bytes: this.bytes }
  }

  async get(id: string): Promise<StoredResponse | null> {
    this.checkOpen('get')
    const entry = this.records.get(id)
    if (entry === undefined) return null
    this.remove(id)
    if (entry.expiresAt <= clock.now()) return null
    this.records.set(id, entry)
    this.bytes += sizeOf(entry.json)
    return JSON.parse(entry.json.toString('utf8')) as StoredResponse
  }

  async put(record: StoredResponse): Promise<void> {
    this.checkOpen('put')
    // A record larger than the whole store would evict itself: refused as too large instead.
    const text = recordText(record, Math.min(this.bounds.maxRecordBytes, this.bounds.maxBytes), 'MemoryResponseStore.put')
    // Not `Buffer.from`: a small buffer is a slice of a shared 8 KiB pool, which one kept record keeps whole.
    const json = Buffer.allocUnsafeSlow(Buffer.byteLength(text, 'utf8'))
    json.write(text, 'utf8')
    if (sizeOf(json) > this.bounds.maxBytes)
      throw new HarmonyLimitError(
        `MemoryResponseStore.put: response ${record.id} takes ${sizeOf(json)} bytes, more than the store's maxBytes (${this.bounds.maxBytes})`,
      )
    this.remove(record.id)
    this.records.set(record.id, { json, expiresAt: clock.now() + this.bounds.ttlSeconds })
    this.bytes += sizeOf(json)
    for (const [id, entry] of this.records) {
      if (this.records.size <= this.bounds.maxEntries && this.bytes <= this.bounds.maxBytes && entry.expiresAt > clock.now()) break
      this.remove(id)
    }
  }

  async delete(id: string): Promise<boolean> {
    this.checkOpen('delete')
    return this.remove(id)
  }

  async close(): Promise<void> {
    this.closed = true
    this.records.clear()
    this.bytes = 0
  }

  private remove(id: string): boolean {
    const entry = this.records.get(id)
    if (entry === undefined) return false
    this.records.delete(id)
    this.bytes -= sizeOf(entry.json)
    return true
  }

  private checkOpen(method: string): void {
    if (this.closed) throw closedError(`MemoryResponseStore.${method}`)
  }
}

/** What the memory store counts for a record kept as `json`. */
function sizeOf(json: Buffer): number {
  return json.length + RECORD_OVERHEAD
}
