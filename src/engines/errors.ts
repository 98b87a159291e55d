import { HarmonyError, type OpenAIAnswer, wireCode } from '../base/errors'

/**
 * What a client is told of an engine failure, by code: enough to decide whether to retry, nothing of the
 * engine's address or its own error text, which go to the server's log (`onError`).
 */
const TOLD: Record<string, string> = {
  'engine-http-error': 'the inference engine answered with an error',
  'engine-connect-timeout': 'the inference engine could not be reached in time',
  'engine-read-timeout': 'the inference engine stopped sending',
  'engine-connection-error': 'the connection to the inference engine failed',
  'engine-protocol-error': 'the inference engine sent something this gateway cannot read',
  'engine-stream-error': 'the inference engine reported an error while generating',
  'engine-aborted': 'the inference engine aborted the request',
  'engine-overloaded': 'the inference engine is overloaded; retry later',
  'engine-first-token-timeout': 'the inference engine gave no token in time',
  'engine-idle-timeout': 'the inference engine stopped giving tokens',
  'engine-deadline-exceeded': 'the generation ran past its time limit',
}

/** The time limits of time-limits.ts: the gateway timed the engine out (504), rather than the engine failing (502). */
const TIMED_OUT: ReadonlySet<string> = new Set(['engine-first-token-timeout', 'engine-idle-timeout', 'engine-deadline-exceeded'])

/**
 * An inference engine failed: it answered with an HTTP error, the connection broke or timed out, or its stream
 * was not what its wire format promises. `status` is the engine's HTTP status when it sent one (else null);
 * `engineMessage` is the engine's own error text when it sent one.
 *
 * Codes: `engine-http-error` (a non-2xx answer), `engine-connect-timeout` (no connection in time),
 * `engine-read-timeout` (silence longer than the read timeout, before the response head or mid-stream),
 * `engine-connection-error` (refused, reset, or closed before the stream's end), `engine-protocol-error` (not
 * the engine's wire format, or an event over the size limit), `engine-stream-error` (an error reported inside
 * a running stream), `engine-aborted` (the request's `signal` was aborted), `engine-overloaded` (the engine
 * answered 429 or 503: busy, rate limited or still loading; `retryAfter` is its `Retry-After` when it sent a
 * valid one), and a gateway's time limits (time-limits.ts): `engine-first-token-timeout`, `engine-idle-timeout`
 * (no ids in time; heartbeats do not count), `engine-deadline-exceeded`.
 */
export class EngineError extends HarmonyError {
  readonly engine: string
  readonly status: number | null
  readonly engineMessage: string | null
  /** The engine's `Retry-After` (seconds or an HTTP date) on `engine-overloaded`, else null. */
  readonly retryAfter: string | null

  constructor(
    code: string,
    message: string,
    details: { engine: string; status?: number | null; engineMessage?: string | null; retryAfter?: string | null; cause?: unknown },
  ) {
    super(code, message, { cause: details.cause })
    this.engine = details.engine
    this.status = details.status ?? null
    this.engineMessage = details.engineMessage ?? null
    this.retryAfter = details.retryAfter ?? null
  }

  /**
   * A gateway's answer: 502 with the code and a generic message (the engine's URL and error text stay in the
   * log); an overloaded engine is the gateway's 503, with the engine's Retry-After, so clients back off as it asks.
   */
  openAIAnswer(): OpenAIAnswer {
    const body = {
      error: { message: TOLD[this.code] ?? 'the inference engine failed', type: 'server_error', param: null, code: wireCode(this.code) },
    }
    if (TIMED_OUT.has(this.code)) return { status: 504, body }
    if (this.code !== 'engine-overloaded') return { status: 502, body }
    return { status: 503, body, ...(this.retryAfter !== null ? { headers: { 'retry-after': this.retryAfter } } : {}) }
  }
}
