/**
 * One structured line per request (`requestLog`, a pino logger or anything with pino's `info(object, message)`):
 * its id (the client's `x-request-id` when it sends a sane one, else a new one, answered in the same header), the
 * route's pattern, the status, how long it took, the key's name, and for a generation its engine (a group's
 * member that served it, and every engine whose ids it holds when it moved), its tokens (prompt, cached,
 * generated), its time to first token and the codes of what the parser and the adapters noted.
 * Never the prompt's text, the answer's, nor a key: a line says what happened, not what was said.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'

import type { EngineTrail } from './engine-trail'
import type { StepWatcher } from './watch'

/** What the gateway writes its lines to: pino's `info(object, message)` (a pino logger is one). */
export interface RequestLogger {
  info(fields: object, message?: string): void
}

/** A request's line, filled in as the request goes. */
export interface RequestRecord {
  id: string
  method: string
  route: string
  key?: string
  /** The engine that served the generation (after a failover, the one that ended it), as the metrics name it. */
  engine?: string
  /** Only when the output is more than one engine's (a failover, a tool loop routed apart): each, in order. */
  engines?: string[]
  promptTokens?: number
  cachedPromptTokens?: number
  generatedTokens?: number
  firstTokenMs?: number
  /** Diagnostic codes, each with how many times it came. */
  diagnostics?: Record<string, number>
}

const records = new WeakMap<IncomingMessage, RequestRecord>()

/** A client's own request id is taken when it is short and plain (it goes into logs and a header). */
const SANE_ID = /^[A-Za-z0-9._:-]{1,128}$/

/** Starts the line of `request` (answered with its `x-request-id`); written to `logger` when the answer ends. */
export function startRecord(logger: RequestLogger, request: IncomingMessage, response: ServerResponse, route: string): RequestRecord {
  const given = request.headers['x-request-id']
  const id = typeof given === 'string' && SANE_ID.test(given) ? given : `req_${randomUUID().replaceAll('-', '')}`
  const record: RequestRecord = { id, method: request.method ?? 'GET', route }
  records.set(request, record)
  response.setHeader('x-request-id', id)
  const started = performance.now()
  response.once('close', () => {
    const ms = Math.round(performance.now() - started)
    logger.info({ ...record, status: response.statusCode, ms, ...(response.writableFinished ? {} : { clientClosed: true }) }, 'request')
  })
  return record
}

/** The line `request` is being recorded in, if the gateway logs requests. */
export function recordOf(request: IncomingMessage): RequestRecord | undefined {
  return records.get(request)
}

/** Counts `diagnostics` (their codes) in the line of `request`. */
export function noteDiagnostics(request: IncomingMessage | null, diagnostics: readonly { code: string }[]): void {
  const record = request === null ? undefined : records.get(request)
  if (record === undefined || diagnostics.length === 0) return
  record.diagnostics ??= {}
  for (const { code } of diagnostics) record.diagnostics[code] = (record.diagnostics[code] ?? 0) + 1
}

/** Names in `record` the engines of its generation (`served`) as they stand. */
export function noteEngines(record: RequestRecord, served: EngineTrail): void {
  record.engine = served.current
  const { engines } = served
  if (engines.length > 1) record.engines = engines
}

/**
 * Fills a request's line with its generation as the steps pass: engine, tokens, time to first token. A request of
 * several choices (Chat's `n`) has one per choice: the generated tokens are summed over them, the prompt counted
 * once, the first token the first of any.
 */
export function recordWatcher(record: RequestRecord, served: EngineTrail, promptTokens: number): StepWatcher {
  let started = 0
  return {
    start: () => {
      started = performance.now()
      noteEngines(record, served)
      record.promptTokens = promptTokens
      record.generatedTokens ??= 0
    },
    step: (step) => {
      if (step.tokens.length > 0 && record.firstTokenMs === undefined) record.firstTokenMs = Math.round(performance.now() - started)
      record.generatedTokens! += step.tokens.length
      const cached = step.usage?.cachedPromptTokens
      if (cached !== undefined) record.cachedPromptTokens = cached
    },
    end: () => {},
  }
}
