/**
 * The SSE frames of a background response that streams (`background: true, stream: true`), kept while it runs
 * so that clients can follow it from any point: the one that created it, and any that comes back with `GET
 * /v1/responses/{id}?stream=true&starting_after=N` (OpenAI's way to resume a background stream). The run does
 * not depend on any of them: a client that leaves only stops following.
 *
 * Bounded: past `maxBytes` of frames the oldest are dropped, and a client asking to resume from before the
 * oldest kept frame is refused (a 400), never given a stream with a hole in it. Frames a follower has not read
 * yet are not dropped below four times `maxBytes`: the end of a long answer comes as a burst (its last events
 * repeat the whole text, up to four times), which a follower that keeps up must get whole; one that does not
 * read at all is dropped at that bound.
 */
import type { ServerResponse } from 'node:http'
import { HarmonyStateError } from '../../base/errors'
import { checkOptions, is, type OptionSpec } from '../../base/options'
import { HttpError } from '../../http/errors'
import { DEFAULT_WRITE_TIMEOUT_MS, drained, endWithin, SSE_HEADERS, type WriteBound } from '../../http/sse'

export interface StreamLogOptions {
  /** Frames kept at most, in UTF-16 code units of their text. Default 4 MiB. */
  maxBytes?: number
}

const OPTIONS: OptionSpec = { maxBytes: is.integer(1) }

export class StreamLog {
  private readonly maxBytes: number
  /** The frames appended; those before `head` were dropped (the array is compacted now and then). */
  private entries: { sequence: number; frame: string }[] = []
  private head = 0
  /** How many entries compaction removed from the array's front: entry i is frame number `offset + i`. */
  private offset = 0
  private bytes = 0
  /** The sequence number of the last frame dropped to stay within the bound (-1: none was). */
  private lastDropped = -1
  private done = false
  private readonly waiting = new Set<() => void>()
  /** The followers' places: the number of the next frame each reads. */
  private readonly readers = new Set<{ next: number }>()

  constructor(options: StreamLogOptions = {}) {
    checkOptions(options, OPTIONS, 'StreamLog')
    this.maxBytes = options.maxBytes ?? 4 * 1024 * 1024
  }

  /** A frame of the event with this `sequence_number` (in increasing order). */
  append(sequence: number, frame: string): void {
    if (this.done) throw new HarmonyStateError('stream-log-ended', 'StreamLog.append() after end()')
    this.entries.push({ sequence, frame })
    this.bytes += frame.length
    // The first frame a follower has not read: the ones before it go at `maxBytes`, it and later at four times.
    let unread = Number.POSITIVE_INFINITY
    for (const reader of this.readers) unread = Math.min(unread, reader.next)
    while (
      this.bytes > this.maxBytes &&
      this.head < this.entries.length - 1 &&
      (this.offset + this.head < unread || this.bytes > 4 * this.maxBytes)
    ) {
      const oldest = this.entries[this.head++]!
      this.bytes -= oldest.frame.length
      this.lastDropped = oldest.sequence
    }
    // Dropped entries are let go once they are half the array (amortized: each is copied at most once).
    if (this.head > 64 && this.head * 2 > this.entries.length) {
      this.offset += this.head
      this.entries = this.entries.slice(this.head)
      this.head = 0
    }
    this.wake()
  }

  /** The response ended: its last frame is in. */
  end(): void {
    this.done = true
    this.wake()
  }

  get ended(): boolean {
    return this.done
  }

  /**
   * The frames after sequence number `after` (-1: from the first), then each new one as it comes, until the
   * end. A 400 (`param: 'starting_after'`) when frames after `after` were dropped, also while following (a
   * follower that read too slowly to keep up with the bound).
   */
  async *follow(after: number, signal?: AbortSignal): AsyncGenerator<string> {
    if (after < this.lastDropped) throw notKept(this.lastDropped)
    // The first kept frame after `after` (frames are in increasing sequence order).
    let low = this.head
    let high = this.entries.length
    while (low < high) {
      const middle = (low + high) >>> 1
      if (this.entries[middle]!.sequence > after) high = middle
      else low = middle + 1
    }
    const reader = { next: this.offset + low }
    this.readers.add(reader)
    try {
      yield* this.read(reader, signal)
    } finally {
      this.readers.delete(reader)
    }
  }

  private async *read(reader: { next: number }, signal: AbortSignal | undefined): AsyncGenerator<string> {
    for (;;) {
      if (signal?.aborted) return
      if (reader.next < this.offset + this.head) throw notKept(this.lastDropped)
      const end = this.offset + this.entries.length
      if (reader.next < end) {
        const batch = this.entries.slice(reader.next - this.offset)
        // Read once handed over: the follower's writer holds them now.
        reader.next = end
        yield batch.map((entry) => entry.frame).join('')
        continue
      }
      if (this.done) return
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.waiting.delete(wake)
          signal?.removeEventListener('abort', wake)
          resolve()
        }
        this.waiting.add(wake)
        signal?.addEventListener('abort', wake, { once: true })
      })
    }
  }

  private wake(): void {
    for (const wake of [...this.waiting]) wake()
  }
}

function notKept(dropped: number): HttpError {
  return new HttpError(400, `the events up to sequence number ${dropped} of this response are no longer kept; resume from a later one`, {
    param: 'starting_after',
    code: 'events-not-kept',
  })
}

/** `pipeStreamLog`'s bound on its writes: `writeTimeoutMs` (default 30 s; null: none) and who is told of a drop. */
export interface StreamLogWriteBound {
  writeTimeoutMs?: number | null
  onWriteTimeout?: () => void
}

/**
 * Streams `log` from after `after` to `response` as SSE (status 200 and the SSE headers first), waiting for
 * `drain` when the socket is full, until the log ends or the client leaves. A resume point no longer kept is
 * answered with its 400 before the status line; a client that read so slowly that the frames it was to get next
 * were dropped gets an `error` event saying so (`events_not_kept`) as its stream's end. A client whose socket
 * takes nothing for `writeTimeoutMs` (default 30 s), while the follower waits to write more or after its last
 * bytes once the log has ended, is let go: its connection is closed, so it holds neither the log's frames nor a
 * socket (the outcome `client-closed`, or `completed` when only its last bytes were left). `bound` may be the
 * timeout alone, as a number.
 */
export async function pipeStreamLog(
  response: ServerResponse,
  log: StreamLog,
  after = -1,
  bound: number | StreamLogWriteBound = {},
): Promise<'completed' | 'client-closed'> {
  const writes: WriteBound =
    typeof bound === 'number'
      ? { writeTimeoutMs: bound }
      : {
          writeTimeoutMs: bound.writeTimeoutMs === undefined ? DEFAULT_WRITE_TIMEOUT_MS : bound.writeTimeoutMs,
          onWriteTimeout: bound.onWriteTimeout,
        }
  const left = new AbortController()
  const onClose = () => {
    if (!response.writableFinished) left.abort()
  }
  response.once('close', onClose)
  try {
    const frames = log.follow(after, left.signal)
    // The first batch before the status line: a refused resume point is still a 400.
    let first = await frames.next()
    response.writeHead(200, SSE_HEADERS)
    for (; !first.done && !left.signal.aborted; first = await frames.next()) {
      if (!response.write(first.value)) await drained(response, writes, left.signal)
    }
    if (left.signal.aborted) return 'client-closed'
    endWithin(response, '', writes)
    return 'completed'
  } catch (error) {
    if (!response.headersSent || !(error instanceof HttpError)) throw error
    const { message, code, param } = error.toOpenAIError().error
    endWithin(response, `event: error\ndata: ${JSON.stringify({ type: 'error', code, message, param })}\n\n`, writes)
    return 'completed'
  } finally {
    response.off('close', onClose)
  }
}
