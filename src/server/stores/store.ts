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
  /**
   * Whose items `input` holds, so that a deleted response's leave the responses that continued it
   * (responses/conversation.ts `withoutDeleted`): `runs` cut `input` in order, each run the items of one response
   * (its own input, or its output) or, without `response`, items of no response (a conversation's). `root`: the
   * first response of the chain, under which deletions in it are noted. Absent: kept before responses had one.
   */
  lineage?: Lineage
}

/** Whose items a stored response's input holds (`StoredResponse.lineage`). */
export interface Lineage {
  root: string
  runs: { items: number; response?: string }[]
}

/** Whose items a request's history holds: a lineage whose chain is none (`root` null) for a conversation's items. */
export type HistoryLineage = Omit<Lineage, 'root'> & { root: string | null }

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
   * The bytes kept at most. The memory store counts what it holds: each record's JSON as UTF-8, in whole blocks of
   * 512 bytes of an arena that never holds more than this, plus `RECORD_OVERHEAD` for its entry. Default 256 MiB.
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
 * What the memory store counts for each record beside its blocks: the map's entry, its key and the entry's object
 * (measured: about 160 bytes a record with 30,000 small records; rounded up). It was 512 when each record was a
 * buffer of its own, whose objects took more.
 */
const RECORD_OVERHEAD = 256

/**
 * The memory store's unit of space: a record's UTF-8 JSON takes whole blocks (the last one in part), counted whole.
 * Smaller blocks waste less of a small record's last block; larger ones cost fewer copies for a large record
 * (runs of consecutive blocks are copied at once). 512 bytes: a small record (a cancel request, a short answer's
 * ids) wastes at most what its map entry costs.
 */
const BLOCK_BYTES = 512
/** Blocks per slab, the arena's unit of allocation (1 MiB slabs); a power of two, so a block's slab is a shift. */
const SLAB_SHIFT = 11
const SLAB_BLOCKS = 1 << SLAB_SHIFT
/** The end of a chain of blocks. */
const NONE = -1
const ENCODER = new TextEncoder()

/**
 * The memory store's bytes: one arena of slabs (1 MiB buffers) cut into blocks, allocated as the store fills and
 * never more than its bound's worth, each record a chain of blocks (`next` links them; free blocks are a chain too).
 *
 * Why not a buffer per record: a record evicted or replaced is memory the process holds until V8's next
 * collection finds its buffer (V8 starts one for external memory about 64 MiB past what it saw at its last) and,
 * once freed, memory the C allocator keeps in the holes that records of every size leave. Filling and churning a
 * store of buffers bounded at 64 MiB peaked at 2.3 times the bound in RSS, most of it dead buffers and holes
 * (benchmark/store-churn.mts, docs/PERFORMANCE.md). Blocks of the arena are reused as soon as a record
 * goes, so the store holds its bound's worth of memory, whatever the sizes of what comes and goes.
 */
class BlockArena {
  private readonly slabs: Buffer[] = []
  private readonly links: Int32Array[] = []
  private free = NONE
  private freeBlocks = 0
  private allocated = 0

  /** At most `capacity` blocks. */
  constructor(private readonly capacity: number) {}

  /** A chain of `count` blocks holding `text` (`length` bytes in UTF-8); its first block. The caller made room (`count <= room`). */
  store(text: string, length: number, count: number): number {
    while (this.freeBlocks < count) this.grow()
    const first = this.free
    let last = first
    for (let i = 1; i < count; i++) last = this.next(last)
    this.free = this.next(last)
    this.setNext(last, NONE)
    this.freeBlocks -= count
    if (this.contiguous(first, length)) {
      // Consecutive blocks of one slab: the text is written in place, with no copy.
      this.slabs[first >>> SLAB_SHIFT]!.write(text, offsetOf(first), length, 'utf8')
      return first
    }
    // Scattered blocks: the text is encoded run by run, straight into them (no copy of the whole record); a
    // character that a run's end cuts is finished at the start of the next run.
    let read = 0
    let carry: Uint8Array | null = null
    this.runs(first, length, (slab, start, end) => {
      let at = start
      if (carry !== null) {
        const taken = Math.min(carry.length, end - at)
        slab.set(carry.subarray(0, taken), at)
        at += taken
        carry = taken < carry.length ? carry.subarray(taken) : null
      }
      if (at === end) return
      const done = ENCODER.encodeInto(read === 0 ? text : text.slice(read), slab.subarray(at, end))
      read += done.read
      at += done.written
      if (at < end && read < text.length) {
        // The next character takes more bytes than the run has left (JSON.stringify leaves no lone surrogate).
        const units = text.codePointAt(read)! > 0xffff ? 2 : 1
        const bytes = ENCODER.encode(text.slice(read, read + units))
        read += units
        slab.set(bytes.subarray(0, end - at), at)
        carry = bytes.subarray(end - at)
      }
    })
    return first
  }

  /** The text of the chain at `first`, `length` bytes. */
  read(first: number, length: number): string {
    if (this.contiguous(first, length)) return this.slabs[first >>> SLAB_SHIFT]!.toString('utf8', offsetOf(first), offsetOf(first) + length)
    const bytes = Buffer.allocUnsafe(length)
    let offset = 0
    this.runs(first, length, (slab, start, end) => {
      offset += slab.copy(bytes, offset, start, end)
    })
    return bytes.toString('utf8')
  }

  /** Gives the chain at `first` back: its blocks are the next ones taken, in their order (so runs stay runs). */
  release(first: number, count: number): void {
    let last = first
    for (let i = 1; i < count; i++) last = this.next(last)
    this.setNext(last, this.free)
    this.free = first
    this.freeBlocks += count
  }

  /** Blocks the store may still take: free ones, and those of slabs not yet allocated. */
  get room(): number {
    return this.freeBlocks + this.capacity - this.allocated
  }

  /** Bytes of the slabs allocated (what the arena holds, whatever is in use). */
  get heldBytes(): number {
    return this.allocated * BLOCK_BYTES
  }

  private grow(): void {
    const count = Math.min(SLAB_BLOCKS, this.capacity - this.allocated)
    if (count <= 0) throw new Error('BlockArena: no room (the store evicts before it stores)')
    // Not `Buffer.alloc`: unpooled, and left unfilled (each block is written before it is read).
    this.slabs.push(Buffer.allocUnsafeSlow(count * BLOCK_BYTES))
    const links = new Int32Array(count)
    const base = this.links.length * SLAB_BLOCKS
    // The new blocks in order, ahead of the free chain.
    for (let i = 0; i < count - 1; i++) links[i] = base + i + 1
    links[count - 1] = this.free
    this.links.push(links)
    this.free = base
    this.freeBlocks += count
    this.allocated += count
  }

  private next(block: number): number {
    return this.links[block >>> SLAB_SHIFT]![block & (SLAB_BLOCKS - 1)]!
  }

  private setNext(block: number, next: number): void {
    this.links[block >>> SLAB_SHIFT]![block & (SLAB_BLOCKS - 1)] = next
  }

  /** Whether the chain's blocks are consecutive in one slab (its bytes one range of it, from `offsetOf(first)`). */
  private contiguous(first: number, length: number): boolean {
    const count = blocksOf(length)
    let block = first
    for (let i = 1; i < count; i++) {
      const next = this.next(block)
      if (next !== block + 1 || next >>> SLAB_SHIFT !== first >>> SLAB_SHIFT) return false
      block = next
    }
    return true
  }

  /** Calls `each` with each run of consecutive blocks of the chain at `first`: its slab and byte range. */
  private runs(first: number, length: number, each: (slab: Buffer, start: number, end: number) => void): void {
    let block = first
    let left = length
    while (left > 0) {
      const slab = block >>> SLAB_SHIFT
      const start = offsetOf(block)
      let end = start + Math.min(BLOCK_BYTES, left)
      left -= end - start
      let next = this.next(block)
      while (left > 0 && next === block + 1 && next >>> SLAB_SHIFT === slab) {
        block = next
        end += Math.min(BLOCK_BYTES, left)
        left -= Math.min(BLOCK_BYTES, left)
        next = this.next(block)
      }
      each(this.slabs[slab]!, start, end)
      block = next
    }
  }
}

/** Where `block` starts in its slab. */
function offsetOf(block: number): number {
  return (block & (SLAB_BLOCKS - 1)) * BLOCK_BYTES
}

/** A record in the memory store: where its JSON is in the arena, and when it expires. */
interface MemoryEntry {
  first: number
  /** Its JSON's length in UTF-8 bytes. */
  length: number
  blocks: number
  expiresAt: number
}

/**
 * The default store: records in this process, least recently used first out. Each record is kept as its JSON in
 * UTF-8, in blocks of an arena that never holds more than `maxBytes` (`BlockArena`): a string's size in memory
 * depends on its characters (one or two bytes each, as V8 stores it), so counting string lengths let a store
 * bounded at 256 MiB hold twice that, and a buffer per record left the memory of evicted records to the garbage
 * collector and the C allocator. What it counts for a record (`recordBytes`) is its blocks and its entry.
 */
export class MemoryResponseStore implements ResponseStore {
  private readonly bounds: Required<EvictingStoreBounds>
  /** Least recently used first (a Map keeps insertion order; a read moves a record to the end). */
  private readonly records = new Map<string, MemoryEntry>()
  private arena: BlockArena
  private bytes = 0
  private closed = false

  constructor(options: EvictingStoreBounds = {}) {
    this.bounds = { ...DEFAULT_STORE_BOUNDS, ...checkOptions<EvictingStoreBounds>(options, EVICTING_BOUND_OPTIONS, 'MemoryResponseStore') }
    this.arena = new BlockArena(Math.floor(this.bounds.maxBytes / BLOCK_BYTES))
  }

  /**
   * Records and bytes kept now (`bytes`: what counts against `maxBytes`), and the bytes of the arena's slabs
   * allocated so far (`held`: at most `maxBytes`; allocated as the store fills, kept until it is closed).
   */
  get stats(): { entries: number; bytes: number; held: number } {
    return { entries: this.records.size, bytes: this.bytes, held: this.arena.heldBytes }
  }

  async get(id: string): Promise<StoredResponse | null> {
    this.checkOpen('get')
    const entry = this.records.get(id)
    if (entry === undefined) return null
    if (entry.expiresAt <= clock.now()) {
      this.remove(id)
      return null
    }
    this.records.delete(id)
    this.records.set(id, entry)
    return JSON.parse(this.arena.read(entry.first, entry.length)) as StoredResponse
  }

  async put(record: StoredResponse): Promise<void> {
    this.checkOpen('put')
    // A record larger than the whole store would evict itself: refused as too large instead.
    const text = recordText(record, Math.min(this.bounds.maxRecordBytes, this.bounds.maxBytes), 'MemoryResponseStore.put')
    const length = Buffer.byteLength(text, 'utf8')
    const size = recordBytes(length)
    if (size > this.bounds.maxBytes)
      throw new HarmonyLimitError(
        `MemoryResponseStore.put: response ${record.id} takes ${size} bytes, more than the store's maxBytes (${this.bounds.maxBytes})`,
      )
    this.remove(record.id)
    // Room first (the least recently used out, and anything expired before them), so that the blocks are free.
    const blocks = blocksOf(length)
    for (const [id, entry] of this.records) {
      const fits = this.records.size < this.bounds.maxEntries && this.bytes + size <= this.bounds.maxBytes && blocks <= this.arena.room
      if (fits && entry.expiresAt > clock.now()) break
      this.remove(id)
    }
    const first = this.arena.store(text, length, blocks)
    this.records.set(record.id, { first, length, blocks, expiresAt: clock.now() + this.bounds.ttlSeconds })
    this.bytes += size
  }

  async delete(id: string): Promise<boolean> {
    this.checkOpen('delete')
    return this.remove(id)
  }

  async close(): Promise<void> {
    this.closed = true
    this.records.clear()
    this.bytes = 0
    // The slabs are freed with the arena, whose one reference is this.
    this.arena = new BlockArena(0)
  }

  private remove(id: string): boolean {
    const entry = this.records.get(id)
    if (entry === undefined) return false
    this.records.delete(id)
    this.arena.release(entry.first, entry.blocks)
    this.bytes -= recordBytes(entry.length)
    return true
  }

  private checkOpen(method: string): void {
    if (this.closed) throw closedError(`MemoryResponseStore.${method}`)
  }
}

/** Blocks a record of `length` bytes of JSON takes (at least one). */
function blocksOf(length: number): number {
  return Math.max(1, Math.ceil(length / BLOCK_BYTES))
}

/** What the memory store counts for a record whose JSON is `length` bytes of UTF-8: its blocks, whole, and its entry. */
function recordBytes(length: number): number {
  return blocksOf(length) * BLOCK_BYTES + RECORD_OVERHEAD
}
