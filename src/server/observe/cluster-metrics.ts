/**
 * One scrape of `GET /metrics` for every process of a node:cluster (`harmony-stream serve --workers N`): the
 * workers share one port, and the primary hands each connection to one of them, so a scrape reaches whichever
 * worker takes it, and a worker's registry counts only its own requests. With `metrics: 'cluster'`, the worker
 * that takes the scrape asks the primary, the primary asks every worker that listens for its metrics (prom-client's
 * `getMetricsAsJSON`), merges them with prom-client's cluster aggregation (`AggregatorRegistry.aggregate`: counters
 * and histograms summed bucket by bucket, each metric by its `aggregator`, a sum unless it says otherwise), and the
 * worker answers the text.
 *
 * Why not prom-client's own `AggregatorRegistry.clusterMetrics()`: it answers in the primary, which listens on no
 * port here, and it asks every connected worker, so a scrape while a worker starts (connected, its gateway not yet
 * made) waits out its 5 s and fails; the primary here asks only the workers that listen (cluster's `listening`).
 * Its messages are its own, so that a prom-client `AggregatorRegistry` of the application's own does not answer
 * them twice.
 *
 * What a sum over processes means: a worker that exits takes its counts with it, and a counter summed over the
 * workers goes down; Prometheus's `rate()` and `increase()` read that as a counter reset, as they read a restart.
 */
import cluster, { type Worker } from 'node:cluster'

// The type from prom-client itself: this module's typings are public (serveClusterMetrics), and gateway-packages'
// own typings import those of every gateway package, ws's included, which a user's program may not have.
import type { Registry } from 'prom-client'

import { AggregatorRegistry } from '../gateway-packages'

/** A registry's metrics as prom-client gives them for aggregation. */
type MetricsJson = Awaited<ReturnType<Registry['getMetricsAsJSON']>>

/** Worker → primary: a scrape wants every worker's metrics. */
const SCRAPE = 'harmony-stream:metrics-scrape'
/** Primary → worker: its metrics, please. */
const COLLECT = 'harmony-stream:metrics-collect'
/** Worker → primary: its registries' metrics. */
const COLLECTED = 'harmony-stream:metrics-collected'
/** Primary → worker: the scrape's text (or why there is none). */
const SCRAPED = 'harmony-stream:metrics-scraped'

/** How long the primary waits for the workers, and a worker for the primary (as prom-client's `clusterMetrics` waits). */
const WAIT_MS = 5_000

interface Message {
  type: string
  id: number
  metrics?: MetricsJson[]
  text?: string
  error?: string
}

function isMessage(value: unknown, type: string): value is Message {
  return typeof value === 'object' && value !== null && (value as Message).type === type && typeof (value as Message).id === 'number'
}

/** This worker's registries that count for the cluster (one per gateway with `metrics: 'cluster'`). */
const registries = new Set<Registry>()
/** This worker's scrapes waiting for the primary's text. */
const scrapes = new Map<number, { resolve: (text: string) => void; reject: (error: Error) => void }>()
let scrapeIds = 0
let answering = false

/** In a worker: the primary's questions answered (its metrics), and its answers to this worker's scrapes taken. */
function answerPrimary(): void {
  if (answering) return
  answering = true
  process.on('message', (message: unknown) => {
    if (isMessage(message, COLLECT)) {
      Promise.all([...registries].map((registry) => registry.getMetricsAsJSON())).then(
        (metrics) => process.send?.({ type: COLLECTED, id: message.id, metrics }),
        (error: unknown) => process.send?.({ type: COLLECTED, id: message.id, error: String(error) }),
      )
      return
    }
    if (isMessage(message, SCRAPED)) {
      const waiting = scrapes.get(message.id)
      scrapes.delete(message.id)
      if (message.text !== undefined) waiting?.resolve(message.text)
      else waiting?.reject(new Error(message.error ?? 'no metrics'))
    }
  })
}

/**
 * `registry`'s metrics as counted over every worker of the cluster; outside a cluster's worker, its own. The
 * registry counts for the cluster until `forget` (a gateway that closes).
 */
export function clusterScrape(registry: Registry): { scrape: () => Promise<string>; forget: () => void } {
  if (!cluster.isWorker) return { scrape: () => registry.metrics(), forget: () => {} }
  registries.add(registry)
  answerPrimary()
  return {
    scrape: () =>
      new Promise<string>((resolve, reject) => {
        const id = scrapeIds++
        const timer = setTimeout(() => {
          scrapes.delete(id)
          reject(new Error(`the cluster's primary did not answer within ${WAIT_MS} ms`))
        }, WAIT_MS * 2)
        timer.unref()
        scrapes.set(id, {
          resolve: (text) => {
            clearTimeout(timer)
            resolve(text)
          },
          reject: (error) => {
            clearTimeout(timer)
            reject(error)
          },
        })
        process.send?.({ type: SCRAPE, id })
      }),
    forget: () => registries.delete(registry),
  }
}

/**
 * In the primary of a node:cluster whose workers serve gateways with `metrics: 'cluster'`: answers their scrapes
 * with the metrics of every worker that listens, aggregated. Returns what stops it.
 */
export function serveClusterMetrics(): () => void {
  const listening = new Set<Worker>()
  /** Collections under way: the workers still to answer, what they answered, and how it ends. */
  const collections = new Map<number, { waiting: Set<Worker>; parts: MetricsJson[]; end: (error: string | null) => void }>()
  let collectionIds = 0

  const onListening = (worker: Worker) => listening.add(worker)
  const onExit = (worker: Worker) => {
    listening.delete(worker)
    // A worker that exits mid-scrape answers nothing: the scrape is what the others counted.
    for (const collection of collections.values()) if (collection.waiting.delete(worker)) finish(collection)
  }
  const finish = (collection: { waiting: Set<Worker>; end: (error: string | null) => void }) => {
    if (collection.waiting.size === 0) collection.end(null)
  }
  const onMessage = (worker: Worker, message: unknown) => {
    if (isMessage(message, COLLECTED)) {
      const collection = collections.get(message.id)
      if (collection === undefined || !collection.waiting.delete(worker)) return
      if (message.error !== undefined) collection.end(`worker ${worker.process.pid}: ${message.error}`)
      else {
        collection.parts.push(...(message.metrics ?? []))
        finish(collection)
      }
      return
    }
    if (!isMessage(message, SCRAPE)) return
    const scrapeId = message.id
    const id = collectionIds++
    const answer = (reply: { text: string } | { error: string }) => {
      if (worker.isConnected()) worker.send({ type: SCRAPED, id: scrapeId, ...reply })
    }
    const waiting = new Set([...listening].filter((one) => one.isConnected()))
    const timer = setTimeout(() => end(`${waiting.size} worker(s) did not answer within ${WAIT_MS} ms`), WAIT_MS)
    timer.unref()
    const parts: MetricsJson[] = []
    let ended = false
    const end = (error: string | null) => {
      if (ended) return
      ended = true
      clearTimeout(timer)
      collections.delete(id)
      if (error !== null) answer({ error })
      else
        AggregatorRegistry.aggregate(parts)
          .metrics()
          .then(
            (text) => answer({ text }),
            (failure: unknown) => answer({ error: String(failure) }),
          )
    }
    collections.set(id, { waiting, parts, end })
    for (const one of waiting) one.send({ type: COLLECT, id })
    finish(collections.get(id)!)
  }

  cluster.on('listening', onListening)
  cluster.on('exit', onExit)
  cluster.on('message', onMessage)
  return () => {
    cluster.off('listening', onListening)
    cluster.off('exit', onExit)
    cluster.off('message', onMessage)
  }
}
