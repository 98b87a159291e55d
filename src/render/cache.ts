/**
 * A bounded LRU of rendered messages: key = the message's rendered fields, value = its tokens. BPE never
 * crosses a special token and every message starts with one, so a message's tokens do not depend on its
 * neighbours: a multi-turn request re-encodes only the messages it has not seen before.
 *
 * It also remembers, for long texts, the longest run of one kind of character the request bounds found in them
 * (limits.ts, `maxRunLength`): that check reads every character of every request, and in a multi-turn request
 * all but the last turn were read before. Looking a text up costs a hash and a compare, done natively, where
 * reading it again costs a loop over its characters in JavaScript.
 */
import { optionError } from '../base/options'

export interface RenderCacheOptions {
  /** Upper bound on what the cache holds: 4 bytes per token plus 2 per key character. Default 64 MiB. */
  maxBytes?: number
}

export interface RenderCacheStats {
  entries: number
  /** What the entries hold, counted as `maxBytes` counts it. */
  bytes: number
  maxBytes: number
  hits: number
  misses: number
}

export const DEFAULT_RENDER_CACHE_BYTES = 64 * 1024 * 1024

export class RenderCache {
  readonly maxBytes: number
  // A Map iterates in insertion order: re-inserting on a hit keeps the least recently used first.
  #entries = new Map<string, Uint32Array>()
  #bytes = 0
  #hits = 0
  #misses = 0
  #runs = new Map<string, number>()
  #runBytes = 0

  constructor(options: RenderCacheOptions = {}) {
    if (options === null || typeof options !== 'object') throw optionError(TypeError, 'RenderCache: options must be an object')
    const maxBytes = options.maxBytes ?? DEFAULT_RENDER_CACHE_BYTES
    if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) {
      throw new TypeError(`RenderCache maxBytes must be a non-negative integer, not ${String(maxBytes)}`)
    }
    this.maxBytes = maxBytes
  }

  get(key: string): Uint32Array | undefined {
    const tokens = this.#entries.get(key)
    if (tokens === undefined) {
      this.#misses++
      return undefined
    }
    this.#hits++
    this.#entries.delete(key)
    this.#entries.set(key, tokens)
    return tokens
  }

  /** Keeps `tokens` (which the caller must not modify) unless the entry alone exceeds the bound. */
  set(key: string, tokens: Uint32Array): void {
    const size = entrySize(key, tokens)
    if (size > this.maxBytes) return
    const old = this.#entries.get(key)
    if (old !== undefined) {
      this.#entries.delete(key)
      this.#bytes -= entrySize(key, old)
    }
    this.#entries.set(key, tokens)
    this.#bytes += size
    for (const [oldest, value] of this.#entries) {
      if (this.#bytes <= this.maxBytes) break
      this.#entries.delete(oldest)
      this.#bytes -= entrySize(oldest, value)
    }
  }

  clear(): void {
    this.#entries.clear()
    this.#bytes = 0
    this.#runs.clear()
    this.#runBytes = 0
  }

  /**
   * The longest run `text` was found to have, if it was read before. For the bounds of limits.ts.
   * @internal
   */
  runOf(text: string): number | undefined {
    const run = this.#runs.get(text)
    if (run !== undefined) {
      this.#runs.delete(text)
      this.#runs.set(text, run)
    }
    return run
  }

  /**
   * Remembers the longest run of `text`, within a quarter of `maxBytes` (2 bytes per character), the least
   * recently used first out.
   * @internal
   */
  rememberRun(text: string, run: number): void {
    const size = text.length * 2
    if (size > this.maxBytes / 4 || this.#runs.has(text)) return
    this.#runs.set(text, run)
    this.#runBytes += size
    for (const oldest of this.#runs.keys()) {
      if (this.#runBytes <= this.maxBytes / 4) break
      this.#runs.delete(oldest)
      this.#runBytes -= oldest.length * 2
    }
  }

  get stats(): RenderCacheStats {
    return { entries: this.#entries.size, bytes: this.#bytes, maxBytes: this.maxBytes, hits: this.#hits, misses: this.#misses }
  }
}

function entrySize(key: string, tokens: Uint32Array): number {
  return key.length * 2 + tokens.byteLength
}
