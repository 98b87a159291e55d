/**
 * The one Redis connection kit: the official `@redis/client`, loaded when first used (a gateway without Redis
 * never loads it), connected on the first command, with no offline queue (a command while Redis is unreachable
 * fails now instead of waiting without bound), every failure a `StoreError` naming the caller. The response
 * store and the shared key limits each hold one.
 */
import type { createClient } from '@redis/client'

import { requireOptional } from '../../base/optional-package'
import { closedError, StoreError } from './store'

type Client = ReturnType<typeof createClient>

export class RedisConnection {
  private client: Client | null
  private connecting: Promise<unknown> | null = null

  /** `where` names the user in errors (`RedisResponseStore`); `timeoutMs` bounds connecting. */
  constructor(
    url: string,
    timeoutMs: number,
    private readonly where: string,
  ) {
    const { createClient } = requireOptional<typeof import('@redis/client')>('@redis/client', where)
    this.client = createClient({ url, disableOfflineQueue: true, socket: { connectTimeout: timeoutMs, reconnectStrategy: false } })
    // A connection that breaks later is reported by the command that meets it; without a listener the
    // client's 'error' event would end the process.
    this.client.on('error', () => {})
  }

  /** One Redis command; a failure of Redis or of the connection is a `StoreError`. */
  async command<T>(method: string, run: (client: Client) => Promise<T>): Promise<T> {
    const client = await this.connected(method)
    try {
      return await run(client)
    } catch (error) {
      throw new StoreError(`${this.where}.${method}`, error)
    }
  }

  async close(): Promise<void> {
    const client = this.client
    this.client = null
    if (client?.isOpen) await client.close()
  }

  private async connected(method: string): Promise<Client> {
    const client = this.client
    if (client === null) throw closedError(`${this.where}.${method}`)
    if (!client.isReady) {
      this.connecting ??= client.connect().finally(() => {
        this.connecting = null
      })
      try {
        await this.connecting
      } catch (error) {
        throw new StoreError(`${this.where}.${method}`, error)
      }
    }
    return client
  }
}
