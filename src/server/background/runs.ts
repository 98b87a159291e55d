/**
 * Background responses (`background: true`), as OpenAI defines them: the response is kept as `queued` and
 * answered at once (or, with `stream`, its events stream to the client), while its generation runs detached
 * from the client's connection: kept as `in_progress` when it starts and as it ends (`completed`,
 * `incomplete`, `failed`, `cancelled`), polled with `GET /v1/responses/{id}`, resumed with `GET
 * /v1/responses/{id}?stream=true&starting_after=N` in the process that runs it (a `StreamLog` keeps its frames
 * while it runs and a while after), and cancelled from any process sharing the store (a cancel request left
 * beside the record: cancel-requests.ts); a gateway shutting down stops its runs kept as failed, saying why
 * (`close(failure)`). Bounded: at most `maxRunning` run at once (a 429 beyond), and the
 * logs of ended runs are let go after `streamRetainMs`.
 *
 * A run whose process is gone (killed, restarted) would stay `queued` or `in_progress` forever, and clients
 * polling it never stop. So a run holds a lease in the store (a record of its own beside the response's,
 * renewed every third of `leaseMs` while it runs), and any process sharing the store that is asked for an
 * unfinished response whose lease has lapsed (`reapOrphan`, on `GET`) keeps it as `failed`, saying why. A response
 * younger than `leaseMs` is left alone: its run may not have taken its lease yet.
 */
import { checkOptions, is, type OptionSpec } from '../../base/options'
import type { EngineStep } from '../../engines/types'
import { failureEvent, HttpError } from '../../http/errors'
import { responsesFrames } from '../../http/sse'
import type { AdapterDiagnostic } from '../../wire/adapter'
import type { ResponseObject, ResponsesStream } from '../../wire/responses'
import { forgetResponse, responseNotFound, responseRecord } from '../responses/conversation'
import { RUN_LEASE_PREFIX as LEASE } from '../stores/side-records'
import type { ResponseStore, StoredResponse } from '../stores/store'
import { requestCancel, watchCancelRequest, withdrawCancel } from './cancel-requests'
import { StreamLog } from './stream-log'

/** One background response, as the gateway hands it over (its `queued` record already kept). */
export interface BackgroundRun {
  /** The adapter of the response (created with `background: true`): its events, and the response as it stands. */
  adapter: ResponsesStream
  /** The engine's steps for it; `signal` is aborted by a cancel. */
  steps(signal: AbortSignal): AsyncIterable<EngineStep>
  /** Keeps the response as it stands (`in_progress`, then as it ended); its own failures are its to report. */
  keep(response: ResponseObject): Promise<unknown>
  /** `stream: true`: its events are kept in a `StreamLog` for clients to follow. */
  stream: boolean
  /**
   * The run's diagnostics (the adapter's, once it ended), each with the engine whose output it is about
   * (`engine`), as `onDiagnostic` is then told them. Absent: as the adapter gives them.
   */
  withEngines?(diagnostics: readonly AdapterDiagnostic[]): readonly (AdapterDiagnostic & { engine: string })[]
}

export interface BackgroundResponsesOptions {
  /** Where the responses are kept (and where cancels from other processes are left). */
  store: ResponseStore
  /** Runs at once, at most. Default 64. */
  maxRunning?: number
  /** How long the events of an ended run stay to be resumed, in ms. Default 60 s. */
  streamRetainMs?: number
  /** The events kept per run that streams, in UTF-16 code units (`StreamLog`'s `maxBytes`). Default 2 MiB. */
  streamLogBytes?: number
  /** How long a cancel waits for another process to stop the run, in ms. Default 5 s. */
  cancelWaitMs?: number
  /**
   * How long a run's lease lasts without renewal, in ms: a run whose process is gone is found (and kept as
   * failed) at most this long after it stopped. Default 30 s.
   */
  leaseMs?: number
  /** An engine failure during a run (the response is kept as failed). */
  onError?: (error: unknown) => void
  /** What the parser recovered from, at the end of each run (with `engine` where the run's `withEngines` says). */
  onDiagnostic?: (diagnostic: { code: string; message: string; engine?: string }) => void
}

const OPTIONS: OptionSpec = {
  store: is.object,
  maxRunning: is.integer(1),
  streamRetainMs: is.integer(0),
  streamLogBytes: is.integer(1),
  cancelWaitMs: is.integer(0),
  leaseMs: is.integer(1),
  onError: is.function,
  onDiagnostic: is.function,
}

/** One run of this process, as `BackgroundResponses` holds it. */
interface RunEntry {
  abort: AbortController
  deleted: boolean
  failure: unknown
  done: Promise<void>
}

const unfinished = (record: StoredResponse | null) =>
  record !== null && (record.response.status === 'queued' || record.response.status === 'in_progress')

export class BackgroundResponses {
  private readonly store: ResponseStore
  private readonly maxRunning: number
  private readonly streamRetainMs: number
  private readonly streamLogBytes: number
  /** Runs a gateway reserved room for (`reserve`) and has not started yet. */
  private reserved = 0
  private readonly cancelWaitMs: number
  private readonly leaseMs: number
  private readonly onError: (error: unknown) => void
  private readonly onDiagnostic: (diagnostic: { code: string; message: string; engine?: string }) => void
  /**
   * Runs of this process: id → how to stop one, whether it was deleted (not cancelled), what it failed with when
   * stopped by `close(failure)` (null: a cancel), and its end.
   */
  private readonly running = new Map<string, RunEntry>()
  /** The logs of runs that stream, while they run and `streamRetainMs` after (at most twice `maxRunning`). */
  private readonly logs = new Map<string, StreamLog>()

  constructor(options: BackgroundResponsesOptions) {
    checkOptions(options, OPTIONS, 'BackgroundResponses', ['store'])
    this.store = options.store
    this.maxRunning = options.maxRunning ?? 64
    this.streamRetainMs = options.streamRetainMs ?? 60_000
    this.streamLogBytes = options.streamLogBytes ?? 2 * 1024 * 1024
    this.cancelWaitMs = options.cancelWaitMs ?? 5_000
    this.leaseMs = options.leaseMs ?? 30_000
    this.onError = options.onError ?? (() => {})
    this.onDiagnostic = options.onDiagnostic ?? (() => {})
  }

  /** Runs of this process going now (a gauge for metrics). */
  get runs(): number {
    return this.running.size
  }

  /**
   * Room for one more run, taken before its response is kept as queued: a 429 when `maxRunning` runs are going
   * or reserved. Returns what gives the room back if the run is not started after all (`start` takes it).
   */
  reserve(): () => void {
    if (this.running.size + this.reserved >= this.maxRunning)
      throw new HttpError(429, `${this.maxRunning} background responses are running; retry later`, { code: 'background-limit' })
    this.reserved++
    let held = true
    return () => {
      if (held) this.reserved--
      held = false
    }
  }

  /**
   * Starts `run` detached, in the room `release` (from `reserve`) holds; its `StreamLog` when it streams (follow
   * it with `pipeStreamLog`), else null.
   */
  start(run: BackgroundRun, release: () => void): StreamLog | null {
    release()
    const { adapter } = run
    const id = adapter.id
    const abort = new AbortController()
    const log = run.stream ? this.newLog(id) : null
    const logged = (events: ReturnType<ResponsesStream['push']>) => {
      if (log !== null) for (const event of events) log.append(event.sequence_number, responsesFrames([event]))
    }
    const entry: RunEntry = { abort, deleted: false, failure: null, done: Promise.resolve() }
    const endLease = this.holdLease(id)
    // A cancel, or a delete, that reached another process sharing the store.
    const unwatch = watchCancelRequest(this.store, id, (deleted) => {
      entry.deleted ||= deleted
      abort.abort()
    })
    entry.done = (async () => {
      try {
        await run.keep(adapter.response('in_progress'))
        try {
          for await (const step of run.steps(abort.signal)) logged(adapter.push(step))
          // Steps that end quietly when aborted (the replay engine's) end a run stopped with a failure all the same.
          if (entry.failure !== null) throw entry.failure
          logged(adapter.finish())
        } catch (error) {
          // A cancel ends the run without a terminal event; a failure (the gateway shutting down too) says why.
          const failure = entry.failure ?? (abort.signal.aborted ? null : error)
          if (failure !== null) {
            this.onError(failure)
            logged(adapter.error(...failureEvent(failure)))
          }
        }
        const { diagnostics } = adapter
        for (const diagnostic of run.withEngines?.(diagnostics) ?? diagnostics) this.onDiagnostic(diagnostic)
        // A deleted response stays deleted: how it ended is not kept.
        if (entry.deleted) await forgetResponse(this.store, id)
        else await run.keep(adapter.response(abort.signal.aborted && entry.failure === null ? 'cancelled' : undefined))
      } finally {
        // Whatever failed above (a `keep` that threw), the run ends: followers see the end (a cancelled or
        // broken run's stream ends without a terminal event: GET it for its status), the watch stops.
        unwatch()
        await endLease()
        if (log !== null) {
          log.end()
          setTimeout(() => this.logs.get(id) === log && this.logs.delete(id), this.streamRetainMs).unref()
        }
        this.running.delete(id)
      }
    })().catch(this.onError)
    this.running.set(id, entry)
    return log
  }

  /**
   * `DELETE /v1/responses/{id}` of a response that may still run: the run is stopped and its record deleted,
   * and it does not write it back as it ends. One running here is stopped and waited for; one in another
   * process is asked to stop through the store (with a request that says it was deleted), waited for up to
   * `cancelWaitMs`, and its record deleted. False when the response is not running (the store's own delete
   * answers then).
   */
  async delete(id: string): Promise<boolean> {
    const run = this.running.get(id)
    if (run !== undefined) {
      run.deleted = true
      run.abort.abort()
      await run.done
      return true
    }
    let record = await responseRecord(this.store, id)
    if (!unfinished(record)) return false
    await requestCancel(this.store, id, true)
    for (const deadline = Date.now() + this.cancelWaitMs; unfinished(record) && Date.now() < deadline; ) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      record = await this.store.get(id)
    }
    await forgetResponse(this.store, id)
    await withdrawCancel(this.store, id)
    return true
  }

  /**
   * `POST /v1/responses/{id}/cancel`: stops the run and answers the response as it ended (`cancelled`). One
   * running in another process is asked to stop through the store and waited for; one that no process stops
   * within `cancelWaitMs` (its process is gone, e.g. a restart) is kept as cancelled here. A response that had
   * already ended (and was not cancelled) is a 400; an unknown one a 404.
   */
  async cancel(id: string): Promise<Record<string, unknown>> {
    const run = this.running.get(id)
    if (run !== undefined) {
      run.abort.abort()
      await run.done
    }
    let record = await responseRecord(this.store, id)
    if (record === null) throw responseNotFound(id)
    if (run === undefined && unfinished(record)) {
      await requestCancel(this.store, id)
      const deadline = Date.now() + this.cancelWaitMs
      while (unfinished(record) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50))
        record = await this.store.get(id)
      }
      // Read again right before giving up on the run: one that ended meanwhile keeps what it wrote.
      if (unfinished(record)) record = await this.store.get(id)
      if (record !== null && unfinished(record)) {
        record = { ...record, response: { ...record.response, status: 'cancelled' } }
        await this.store.put(record)
      }
      // The run's process took the request, or is gone: the request is not left behind either way.
      await withdrawCancel(this.store, id)
      if (record === null) throw responseNotFound(id)
    }
    // A run of this process was running when the cancel came: answered as it ended, even if it ended first.
    if (run === undefined && record.response.status !== 'cancelled')
      throw new HttpError(400, `response ${id.slice(0, 100)} cannot be cancelled: it is ${String(record.response.status)}`, {
        code: 'not-cancellable',
      })
    return record.response
  }

  /**
   * `GET /v1/responses/{id}?stream=true&starting_after=N`: the log of a run that streams here. `startingAfter`
   * as the query gives it (null: from the first event). A 404 for an unknown response, a 400 naming `stream`
   * for one whose events are not kept here, naming `starting_after` for a bad one.
   */
  async stream(id: string, startingAfter: string | null): Promise<{ log: StreamLog; after: number }> {
    const after = startingAfter === null ? -1 : Number(startingAfter)
    if (startingAfter === '' || !Number.isInteger(after) || after < -1)
      throw new HttpError(400, 'starting_after must be a sequence number (an integer from 0)', {
        param: 'starting_after',
        code: 'invalid-parameter',
      })
    const log = this.logs.get(id)
    if (log !== undefined) return { log, after }
    if ((await responseRecord(this.store, id)) === null) throw responseNotFound(id)
    throw new HttpError(
      400,
      `the events of response ${id.slice(0, 100)} are not kept here (it did not stream in the background in this process, or ended a while ago): GET it without stream`,
      { param: 'stream', code: 'events-not-kept' },
    )
  }

  /**
   * Response `id` as a poll should see it (null: none kept), a response no process runs any more ended first:
   * one that is unfinished (`queued`, `in_progress`), older than `leaseMs`, not run here, and whose run's lease
   * has lapsed (its process is gone) is kept as `failed` with the reason, and returned so.
   */
  async reapOrphan(id: string): Promise<StoredResponse | null> {
    const record = await responseRecord(this.store, id)
    if (record === null || this.running.has(id) || !unfinished(record)) return record
    const now = Date.now()
    if (now - record.createdAt * 1000 < this.leaseMs) return record
    const lease = await this.store.get(LEASE + id)
    if (lease !== null && Number(lease.response.until) > now) return record
    const error = {
      code: 'run_lost',
      message: 'the process that ran this response stopped before it ended (the gateway restarted or was killed)',
    }
    const failed = { ...record, response: { ...record.response, status: 'failed', error } }
    await this.store.put(failed)
    if (lease !== null) await this.store.delete(LEASE + id)
    return failed
  }

  /** Takes and renews run `id`'s lease while it runs; the returned function gives it up. */
  private holdLease(id: string): () => Promise<void> {
    const renew = () =>
      this.store
        .put({ id: LEASE + id, createdAt: Math.floor(Date.now() / 1000), response: { until: Date.now() + this.leaseMs }, input: [] })
        .catch(this.onError)
    const taken = renew()
    const timer = setInterval(renew, Math.max(1, Math.floor(this.leaseMs / 3))).unref()
    return async () => {
      clearInterval(timer)
      await taken
      await this.store.delete(LEASE + id).catch(this.onError)
    }
  }

  /**
   * Stops every run of this process; resolves when they are kept. Without `failure` they are cancelled (kept as
   * `cancelled`, their streams ending without a terminal event); with it (a gateway shutting down), each ends as
   * a run whose engine failed with it: kept as `failed` with its code and message, its followers sent the `error`
   * event and `response.failed`.
   */
  async close(failure?: unknown): Promise<void> {
    const ends = [...this.running.values()].map((run) => {
      if (failure !== undefined) run.failure ??= failure
      run.abort.abort()
      return run.done
    })
    await Promise.all(ends)
  }

  /** Resolves once no run of this process is going (those started meanwhile too). */
  async idle(): Promise<void> {
    while (this.running.size > 0) await Promise.all([...this.running.values()].map((run) => run.done))
  }

  private newLog(id: string): StreamLog {
    const log = new StreamLog({ maxBytes: this.streamLogBytes })
    this.logs.set(id, log)
    for (const [kept, other] of this.logs) {
      if (this.logs.size <= 2 * this.maxRunning) break
      if (other.ended) this.logs.delete(kept)
    }
    return log
  }
}
