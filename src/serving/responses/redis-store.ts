/**
 * Responses kept in Redis, so that several gateway processes (or hosts) continue each other's responses. One
 * key per response (`keyPrefix` + id), its JSON as the value, written with an expiry (`SET … EX ttlSeconds`):
 * Redis bounds itself, by the records' expiry and its own `maxmemory` policy (set `maxmemory-policy
 * allkeys-lru` on a Redis kept for this), so this store has no `maxEntries`. The client is the official
 * `@redis/client`, connected on first use.
 *
 *   const store = new RedisResponseStore({ url: 'redis://127.0.0.1:6379' })
 */
import type { createClient } from '@redis/client'

import { requireOptional } from '../../base/optional-package'
import { checkOptions, is } from '../../base/options'
import {
  BOUND_OPTIONS,
  closedError,
  DEFAULT_STORE_BOUNDS,
  type ResponseStore,
  type ResponseStoreBounds,
  recordText,
  type StoredResponse,
  StoreError,
} from './store'

export interface RedisResponseStoreOptions extends ResponseStoreBounds {
  /** `redis://[user:password@]host:port[/db]`. */
  url: string
  /** Of every key this store writes. Default `'harmony-stream:response:'`. */
  keyPrefix?: string
  /** How long a command may wait for Redis (connecting included) before it fails. Default 5,000 ms. */
  timeoutMs?: number
}

const OPTIONS = { ...BOUND_OPTIONS, url: is.nonEmptyString, keyPrefix: is.string, timeoutMs: is.integer(1) }

type Client = ReturnType<typeof createClient>

export class RedisResponseStore implements ResponseStore {
  private readonly bounds: Required<ResponseStoreBounds>
  private readonly keyPrefix: string
  private client: Client | null
  private connecting: Promise<unknown> | null = null

  constructor(options: RedisResponseStoreOptions) {
    const checked = checkOptions<RedisResponseStoreOptions>(options, OPTIONS, 'RedisResponseStore', ['url'])
    const { url, keyPrefix, timeoutMs, ...bounds } = checked
    this.bounds = { ttlSeconds: DEFAULT_STORE_BOUNDS.ttlSeconds, maxRecordBytes: DEFAULT_STORE_BOUNDS.maxRecordBytes, ...bounds }
    this.keyPrefix = keyPrefix ?? 'harmony-stream:response:'
    // Loaded here, not when the package loads: a gateway without Redis never pays for the client.
    const { createClient } = requireOptional<typeof import('@redis/client')>('@redis/client', 'RedisResponseStore')
    const timeout = timeoutMs ?? 5000
    // No offline queue: a command while Redis is unreachable fails now instead of waiting without bound.
    this.client = createClient({ url, disableOfflineQueue: true, socket: { connectTimeout: timeout, reconnectStrategy: false } })
    // A connection that breaks later is reported by the command that meets it; without a listener the
    // client's 'error' event would end the process.
    this.client.on('error', () => {})
  }

  async get(id: string): Promise<StoredResponse | null> {
    const text = await this.command('get', (client) => client.get(this.keyPrefix + id))
    return text === null ? null : (JSON.parse(text) as StoredResponse)
  }

  async put(record: StoredResponse): Promise<void> {
    const text = recordText(record, this.bounds.maxRecordBytes, 'RedisResponseStore.put')
    await this.command('put', (client) => client.set(this.keyPrefix + record.id, text, { EX: this.bounds.ttlSeconds }))
  }

  async delete(id: string): Promise<boolean> {
    return (await this.command('delete', (client) => client.del(this.keyPrefix + id))) > 0
  }

  /** One Redis command; a failure of Redis or of the connection is a `StoreError`. */
  private async command<T>(method: string, run: (client: Client) => Promise<T>): Promise<T> {
    const client = await this.connected(method)
    try {
      return await run(client)
    } catch (error) {
      throw new StoreError(`RedisResponseStore.${method}`, error)
    }
  }

  async close(): Promise<void> {
    const client = this.client
    this.client = null
    if (client?.isOpen) await client.close()
  }

  private async connected(method: string): Promise<Client> {
    const client = this.client
    if (client === null) throw closedError(`RedisResponseStore.${method}`)
    if (!client.isReady) {
      this.connecting ??= client.connect().finally(() => {
        this.connecting = null
      })
      try {
        await this.connecting
      } catch (error) {
        throw new StoreError(`RedisResponseStore.${method}`, error)
      }
    }
    return client
  }
}
