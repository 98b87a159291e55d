/**
 * A gateway's Prometheus metrics (`GET /metrics`, prom-client's text format): what operators of vLLM, SGLang,
 * llama.cpp's server and LiteLLM's proxy watch (requests, time to first token, inter-token latency, tokens,
 * running streams), and what only this gateway knows (the parser's diagnostics: malformed model output it
 * recovered from; cached prompt tokens of its continuations). Names follow Prometheus's conventions (a unit
 * suffix, `_total` for counters). Labels are bounded: routes from the gateway's own table, statuses, the
 * configured engines' names, the package's own error and diagnostic codes; never an id or a client's text.
 * Each gateway has a registry of its own, so two in one process do not collide. In a worker of `serve --workers`
 * (`metrics: 'cluster'`) a scrape answers for every worker (cluster-metrics.ts): each metric is summed over the
 * processes (prom-client's default `aggregator`), which is right for all of these, the gauges included (streams
 * running, requests waiting, runs going on: the cluster's are the sum of its processes'). A metric that a sum
 * would get wrong (an info or `up` gauge: every process says 1) sets its `aggregator` ('first', 'max').
 */
import { Counter, Gauge, Histogram, Registry } from '../gateway-packages'

import { clusterScrape } from './cluster-metrics'
import { NO_ENGINE } from './engine-trail'
import type { StepWatcher } from './watch'

/** One engine's metrics, bound to its label. */
interface EngineMeters {
  firstToken: { observe(value: number): void }
  tokenGap: { observe(value: number): void }
  promptTokens: { inc(value?: number): void }
  cachedPromptTokens: { inc(value?: number): void }
  generatedTokens: { inc(value?: number): void }
  activeStreams: { inc(): void; dec(): void }
}

/** Seconds buckets of time to first token and request duration (vLLM's, to 2 minutes). */
const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160]
/** Seconds buckets between tokens (vLLM's inter-token latency buckets). */
const TOKEN_GAP_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80]

/** What the gauges read when `/metrics` is scraped. */
export interface MetricSources {
  renderQueue: () => number
  backgroundRuns: () => number
}

export class GatewayMetrics {
  readonly registry = new Registry()
  private readonly requests = new Counter({
    name: 'harmony_requests_total',
    help: 'HTTP requests answered, by route and status',
    labelNames: ['route', 'status'] as const,
    registers: [this.registry],
  })
  private readonly duration = new Histogram({
    name: 'harmony_request_duration_seconds',
    help: 'Time from a request to the end of its answer, by route',
    labelNames: ['route'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  })
  private readonly firstToken = new Histogram({
    name: 'harmony_time_to_first_token_seconds',
    help: 'Time from the engine request to its first generated token, by engine',
    labelNames: ['engine'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  })
  private readonly tokenGap = new Histogram({
    name: 'harmony_inter_token_latency_seconds',
    help: 'Time between generated tokens (an engine step of several tokens counts its gap shared among them), by engine',
    labelNames: ['engine'] as const,
    buckets: TOKEN_GAP_BUCKETS,
    registers: [this.registry],
  })
  private readonly promptTokens = new Counter({
    name: 'harmony_prompt_tokens_total',
    help: 'Prompt tokens sent to engines',
    labelNames: ['engine'] as const,
    registers: [this.registry],
  })
  private readonly cachedPromptTokens = new Counter({
    name: 'harmony_cached_prompt_tokens_total',
    help: 'Prompt tokens an engine served from its prefix cache (as it reports them)',
    labelNames: ['engine'] as const,
    registers: [this.registry],
  })
  private readonly generatedTokens = new Counter({
    name: 'harmony_generated_tokens_total',
    help: 'Tokens engines generated',
    labelNames: ['engine'] as const,
    registers: [this.registry],
  })
  private readonly activeStreams = new Gauge({
    name: 'harmony_active_streams',
    help: 'Generations running now',
    labelNames: ['engine'] as const,
    registers: [this.registry],
  })
  private readonly engineErrors = new Counter({
    name: 'harmony_engine_errors_total',
    help: 'Engine requests that failed, by engine and error code',
    labelNames: ['engine', 'code'] as const,
    registers: [this.registry],
  })
  private readonly failovers = new Counter({
    name: 'harmony_engine_failovers_total',
    help: 'Generations another engine of a group went on with after this engine failed mid-stream (engines/failover.ts)',
    labelNames: ['engine'] as const,
    registers: [this.registry],
  })
  private readonly diagnostics = new Counter({
    name: 'harmony_parser_diagnostics_total',
    help: 'What the parser and the adapters recovered from or noted, by the engine whose output it is about (none: the request itself) and code',
    labelNames: ['engine', 'code'] as const,
    registers: [this.registry],
  })
  private readonly exactPrompts = new Counter({
    name: 'harmony_exact_prompts_total',
    help: 'Requests answering tool calls the gateway returned, by face and outcome (exact: prompted with the ids the engine generated; not-found, changed: re-rendered)',
    labelNames: ['face', 'outcome'] as const,
    registers: [this.registry],
  })
  private readonly writeTimeouts = new Counter({
    name: 'harmony_write_timeouts_total',
    help: 'Clients dropped because their socket took nothing within the write timeout, by transport (sse, websocket)',
    labelNames: ['transport'] as const,
    registers: [this.registry],
  })
  private readonly socketEvictions = new Counter({
    name: 'harmony_websocket_evictions_total',
    help: 'Idle Responses WebSocket connections closed to make room for a new one at the cap (responses.maxSockets)',
    registers: [this.registry],
  })
  private readonly storeOperations = new Counter({
    name: 'harmony_store_operations_total',
    help: 'Response store operations, by operation and outcome',
    labelNames: ['op', 'outcome'] as const,
    registers: [this.registry],
  })

  private readonly scraping: { scrape: () => Promise<string>; forget: () => void } | null

  /** `cluster`: in a node:cluster worker, scrapes answer for every worker of the cluster (cluster-metrics.ts). */
  constructor(sources: MetricSources, cluster = false) {
    this.scraping = cluster ? clusterScrape(this.registry) : null
    new Gauge({
      name: 'harmony_render_queue_depth',
      help: 'Requests waiting for a render worker',
      registers: [this.registry],
      collect() {
        this.set(sources.renderQueue())
      },
    })
    new Gauge({
      name: 'harmony_background_runs',
      help: 'Background responses running in this process',
      registers: [this.registry],
      collect() {
        this.set(sources.backgroundRuns())
      },
    })
  }

  /** The text of a scrape: this gateway's metrics, or with `cluster`, every worker's. */
  scrape(): Promise<string> {
    return this.scraping?.scrape() ?? this.registry.metrics()
  }

  /** The gateway closed: its registry no longer counts for its cluster. */
  close(): void {
    this.scraping?.forget()
  }

  /** An answered request (`route`: a pattern of the gateway's routes, never the path as sent). */
  answered(route: string, status: number, seconds: number): void {
    this.requests.inc({ route, status: String(status) })
    this.duration.observe({ route }, seconds)
  }

  /** A request answering tool calls: whether it was prompted with the ids behind them (pipeline/answering-calls.ts). */
  exactPrompt(face: string, outcome: string): void {
    this.exactPrompts.inc({ face, outcome })
  }

  /** A diagnostic, under the engine whose output it is about (`engine`, engine-trail.ts); without one, the request's. */
  diagnostic(diagnostic: { code: string; engine?: string }): void {
    this.diagnostics.inc({ engine: diagnostic.engine ?? NO_ENGINE, code: diagnostic.code })
  }

  /**
   * Measures one generation as its steps pass: its prompt tokens, the time to its first token and between
   * tokens, the tokens generated and cached, the streams running, and how it failed. The engine's metrics are
   * bound to its label once (`EngineMeters`): a step costs a clock read and one histogram observation.
   */
  watcher(engine: string, promptTokens: number): StepWatcher & { servedBy: (name: string, failure?: unknown) => void } {
    let label = engine
    let meters = this.engineMeters(engine)
    let started = false
    let last = 0
    let generated = 0
    let cached = 0
    return {
      // An engine of a group was chosen (again, after a failure): the generation counts as that engine's.
      servedBy: (name, failure) => {
        // A member that failed before its first step, hidden from the client by the group's failover.
        if (failure !== undefined) {
          this.engineErrors.inc({ engine: name, code: errorCode(failure) })
          return
        }
        if (name === label) return
        if (started) meters.activeStreams.dec()
        label = name
        meters = this.engineMeters(name)
        if (started) meters.activeStreams.inc()
      },
      start: () => {
        started = true
        meters.activeStreams.inc()
        last = performance.now()
      },
      step: (step) => {
        const count = step.tokens.length
        if (count > 0) {
          const now = performance.now()
          if (generated === 0) meters.firstToken.observe((now - last) / 1000)
          else meters.tokenGap.observe((now - last) / 1000 / count)
          last = now
          generated += count
        }
        // An engine may report its usage more than once: the last report counts.
        cached = step.usage?.cachedPromptTokens ?? cached
        // A group's failover is told on a step of its own (engines/failover.ts).
        if (step.diagnostics !== undefined)
          for (const diagnostic of step.diagnostics)
            if (diagnostic.code === 'engine-failover') this.failovers.inc({ engine: diagnostic.from })
      },
      end: (failure) => {
        meters.activeStreams.dec()
        // Counted at the end, under the engine that served: a group chooses it after the generation starts.
        meters.promptTokens.inc(promptTokens)
        meters.generatedTokens.inc(generated)
        meters.cachedPromptTokens.inc(cached)
        if (failure !== null) this.engineErrors.inc({ engine: label, code: errorCode(failure) })
      },
    }
  }

  private readonly engines = new Map<string, EngineMeters>()

  private engineMeters(engine: string): EngineMeters {
    let meters = this.engines.get(engine)
    if (meters === undefined) {
      const labels = { engine }
      meters = {
        firstToken: this.firstToken.labels(labels),
        tokenGap: this.tokenGap.labels(labels),
        promptTokens: this.promptTokens.labels(labels),
        cachedPromptTokens: this.cachedPromptTokens.labels(labels),
        generatedTokens: this.generatedTokens.labels(labels),
        activeStreams: this.activeStreams.labels(labels),
      }
      this.engines.set(engine, meters)
    }
    return meters
  }

  /** A client dropped at the write timeout (`transport`: `sse`, `websocket`). */
  writeTimedOut(transport: string): void {
    this.writeTimeouts.inc({ transport })
  }

  /** An idle WebSocket connection closed for a new one, at the cap. */
  socketEvicted(): void {
    this.socketEvictions.inc()
  }

  /** Runs store operation `op` (`get`, `put`, `delete`), counting it by its outcome (`ok`, `error`). */
  async storeOperation<T>(op: string, work: () => Promise<T>): Promise<T> {
    try {
      const result = await work()
      this.storeOperations.inc({ op, outcome: 'ok' })
      return result
    } catch (error) {
      this.storeOperations.inc({ op, outcome: 'error' })
      throw error
    }
  }
}

/** An error's code as a label: the package's own codes are short kebab-case words; anything else is `other`. */
function errorCode(failure: unknown): string {
  const code = (failure as { code?: unknown } | null)?.code
  return typeof code === 'string' && /^[a-z][a-z-]{0,63}$/.test(code) ? code : 'other'
}
