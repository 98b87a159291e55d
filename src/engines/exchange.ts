/**
 * One request to an engine and its answer, as undici's client hands it over (the handler of its `dispatch`), read
 * only as fast as the reader asks. undici's parser (llhttp in WebAssembly) gives each HTTP chunk of the body as a
 * view of the socket's bytes, without the copy and the readable stream that `node:http` puts around every chunk:
 * an engine writes one chunk per token, and that was the largest cost of reading its stream (docs/PERFORMANCE.md,
 * "Reading the engine's stream").
 *
 * The chunks of one socket read are handed to the reader together (a microtask after the first, once the parser
 * is through the read), so that the reader makes one step of all the tokens they hold. When nobody reads, the
 * chunks gather up to `HIGH_WATER` bytes, then the parser stops in the middle of the read (its `onData` says so)
 * and the socket is not read: TCP holds the engine back, and nothing more is buffered.
 *
 * Except on an answer whose connection is not kept after it (`Connection: close`, or a body that is not chunked:
 * HTTP/1.0, or read to the connection's end): undici 6 fails an assertion, uncaught, when such a connection is
 * reset while its parser is stopped (lib/dispatcher/client-h1.js: the socket's `error` listener calls
 * `parser.finish()`, which asserts that the parser runs; fixed upstream only in undici 8). Such an answer is
 * gathered whole while nobody reads: one generation's stream at most, until its reader goes on or the generation
 * ends. The engines stream chunked, on kept-alive connections.
 */
import type { Dispatcher } from 'undici'

/** Bytes gathered for a reader that is not reading before the parser stops: about one socket read (64 KiB). */
const HIGH_WATER = 64 * 1024

/** A `Connection` header's value that holds the `close` option. */
const CLOSE = /(^|,)\s*close\s*(,|$)/i
/** A `Transfer-Encoding` header's value whose last coding is `chunked` (RFC 9112, 6.1). */
const CHUNKED = /(^|,)\s*chunked\s*$/i

export class Exchange implements Dispatcher.DispatchHandlers {
  /** The answer's status (0 until its head came). */
  statusCode = 0
  /** The answer's `retry-after` header, the one a caller needs of them (an overloaded engine's). */
  retryAfter: string | undefined
  /** Whether any byte of an answer came (undici's `onResponseStarted`: the status line began). */
  answered = false
  /** Whether the body was read to its end by the parser (what is gathered may still be unread). */
  complete = false
  /** How the exchange failed (a socket error, an abort, a destroyed connection), once it has. */
  failure: Error | null = null
  /** The answer said `Connection: close`: its connection ends with it. */
  closing = false
  /** The parser may be stopped in the middle of the body: a chunked answer on a connection kept after it. */
  private stoppable = false

  private chunks: Buffer[] = []
  private size = 0
  /** The parser's resume, once the head came; the parser is stopped while `stopped`. */
  private resume: (() => void) | null = null
  private stopped = false
  /** Who waits for something to happen (the head, a chunk, the end, a failure), and whether a wake-up is due. */
  private waiter: (() => void) | null = null
  private wakeDue = false

  onConnect(): void {}

  onResponseStarted(): void {
    this.answered = true
  }

  onHeaders(statusCode: number, headers: Buffer[], resume: () => void): boolean {
    // 1xx answers (100 Continue, 103 Early Hints) come before the real one and are not it.
    if (statusCode < 200) return true
    this.statusCode = statusCode
    this.resume = resume
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i]!.toString('latin1').toLowerCase()
      if (name === 'retry-after') this.retryAfter = headers[i + 1]!.toString('latin1')
      else if (name === 'connection' && CLOSE.test(headers[i + 1]!.toString('latin1'))) this.closing = true
      else if (name === 'transfer-encoding' && CHUNKED.test(headers[i + 1]!.toString('latin1'))) this.stoppable = true
    }
    if (this.closing) this.stoppable = false
    this.wake()
    return true
  }

  onData(chunk: Buffer): boolean {
    this.chunks.push(chunk)
    this.size += chunk.length
    if (this.waiter !== null && !this.wakeDue) {
      // After the parser is through this read: the reader gets all its chunks at once.
      this.wakeDue = true
      queueMicrotask(() => {
        this.wakeDue = false
        this.wake()
      })
    }
    if (this.size < HIGH_WATER || !this.stoppable) return true
    this.stopped = true
    return false
  }

  onComplete(): void {
    this.complete = true
    this.wake()
  }

  onError(error: Error): void {
    this.failure = error
    this.wake()
  }

  /**
   * The body's bytes gathered so far, at once, or null when there are none (yet, or any more: see `complete`).
   * A stopped parser goes on from where it stopped when nothing is gathered.
   */
  read(): Buffer | null {
    this.goOn()
    if (this.size === 0) return null
    const chunk = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size)
    this.chunks = []
    this.size = 0
    return chunk
  }

  /**
   * Calls `then` once, when something happens: the head, a chunk, the end, a failure (or at once, when one already
   * waits to be seen). One waiter at a time; `stopWaiting` takes it back.
   */
  wait(then: () => void): void {
    this.waiter = then
    this.goOn()
    if (this.size > 0 || this.complete || this.failure !== null) this.wake()
  }

  stopWaiting(): void {
    this.waiter = null
  }

  /** A stopped parser goes on (synchronously, through what the socket has) once all it gathered is taken. */
  private goOn(): void {
    if (this.size > 0 || !this.stopped) return
    this.stopped = false
    this.resume?.()
  }

  private wake(): void {
    const waiter = this.waiter
    this.waiter = null
    waiter?.()
  }
}
