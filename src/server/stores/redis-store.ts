/**
 * Responses kept in Redis, so that several gateway processes (or hosts) continue each other's responses. One
 * key per response (`keyPrefix` + id), its JSON as the value, written with an expiry (`SET … EX ttlSeconds`):
 * Redis bounds itself, by the records' expiry and its own `maxmemory` policy (set `maxmemory-policy
 * allkeys-lru` on a Redis kept for this), so this store has no `maxEntries`. The client is the official
 * `@redis/client`, connected on first use.
 *
 *   const store = new RedisResponseStore({ url: 'redis://127.0.0.1:6379' })
 */
import { checkOptions, is } from '../../base/options'
import { RedisConnection } from './redis-connection'
import { BOUND_OPTIONS, DEFAULT_STORE_BOUNDS, type ResponseStore, type ResponseStoreBounds, recordText, type StoredResponse } from './store'

export interface RedisResponseStoreOptions extends ResponseStoreBounds {
  /** `redis://[user:password@]host:port[/db]`. */
  url: string
  /** Of every key this store writes. Default `'harmony-stream:response:'`. */
  keyPrefix?: string
  /** How long a command may wait for Redis (connecting included) before it fails. Default 5,000 ms. */
  timeoutMs?: number
}

const OPTIONS = { ...BOUND_OPTIONS, url: is.nonEmptyString, keyPrefix: is.string, timeoutMs: is.integer(1) }

export class RedisResponseStore implements ResponseStore {
  private readonly bounds: Required<ResponseStoreBounds>
  private readonly keyPrefix: string
  private readonly redis: RedisConnection

  constructor(options: RedisResponseStoreOptions) {
    const checked = checkOptions<RedisResponseStoreOptions>(options, OPTIONS, 'RedisResponseStore', ['url'])
    const { url, keyPrefix, timeoutMs, ...bounds } = checked
    this.bounds = { ttlSeconds: DEFAULT_STORE_BOUNDS.ttlSeconds, maxRecordBytes: DEFAULT_STORE_BOUNDS.maxRecordBytes, ...bounds }
    this.keyPrefix = keyPrefix ?? 'harmony-stream:response:'
    this.redis = new RedisConnection(url, timeoutMs ?? 5000, 'RedisResponseStore')
  }

  async get(id: string): Promise<StoredResponse | null> {
    const text = await this.redis.command('get', (client) => client.get(this.keyPrefix + id))
    return text === null ? null : (JSON.parse(text) as StoredResponse)
  }

  async put(record: StoredResponse): Promise<void> {
    const text = recordText(record, this.bounds.maxRecordBytes, 'RedisResponseStore.put')
    await this.redis.command('put', (client) => client.set(this.keyPrefix + record.id, text, { EX: this.bounds.ttlSeconds }))
  }

  async delete(id: string): Promise<boolean> {
    return (await this.redis.command('delete', (client) => client.del(this.keyPrefix + id))) > 0
  }

  close(): Promise<void> {
    return this.redis.close()
  }
}
