/**
 * The one error hierarchy: everything the package throws on purpose is a `HarmonyError` with a stable `code`
 * to branch on (messages are for people), except bad arguments, which are JavaScript's own `TypeError` and
 * `RangeError` (options: code `invalid-option`, see options.ts). Other layers add their subclasses:
 * `EngineError` (serving/engines/errors.ts), `HttpError` (serving/http/errors.ts). The catalogue of codes is
 * in docs/API.md ("Errors").
 */
import type { HarmonyBatch } from './types'

/** OpenAI's error body: `{ error: { message, type, param, code } }`, as OpenAI clients raise it. */
export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string | null }
}

/** How a gateway answers an error: its HTTP status, OpenAI's error body, and any extra headers. */
export interface OpenAIAnswer {
  status: number
  body: OpenAIErrorBody
  headers?: Record<string, string>
}

/**
 * An error code as it goes on the wire (HTTP bodies, SSE error frames, WebSocket error frames): OpenAI's style,
 * snake_case. In JavaScript the same code is kebab-case (`error.code`): `engine-overloaded` is
 * `engine_overloaded` on the wire, one word either way.
 */
export function wireCode(code: string): string {
  return code.replaceAll('-', '_')
}

export class HarmonyError extends Error {
  readonly code: string

  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = new.target.name
    this.code = code
  }
}

/**
 * Strict mode: the stream is not valid Harmony. `message` is the reference parser's error text
 * (e.g. `Unknown role: final`), so it can be searched for.
 */
export class HarmonyParseError extends HarmonyError {
  /** Offset of the offending token in the parser's token stream (or the stream length, at the end). */
  readonly tokenOffset: number
  /** The header text, for errors about a header; otherwise null. */
  readonly header: string | null
  /**
   * Results of the tokens before the failing one in the same batch, which were consumed. The parser is left
   * as the reference parser would be (usually waiting for `<|start|>`); the batch's tokens after
   * `tokenOffset` were not consumed. Null from the compact fast path and pools, whose partial results are in `out`.
   */
  readonly partial: HarmonyBatch | null

  constructor(code: string, message: string, tokenOffset: number, header: string | null, partial: HarmonyBatch | null) {
    super(code, message)
    this.tokenOffset = tokenOffset
    this.header = header
    this.partial = partial
  }
}

/** The parser cannot do this now, e.g. `push()` after `finish()` (code `parser-finished`). */
export class HarmonyStateError extends HarmonyError {}

/**
 * A request cannot be rendered into a prompt: a bad field, a part gpt-oss cannot read (images, audio), a tool
 * result with no matching call, server-side state this package does not keep. `param` is the JSON path of
 * the field (`messages[3].tool_call_id`); `toOpenAIError()` is the body of the HTTP 400 to answer with.
 */
export class HarmonyRequestError extends HarmonyError {
  readonly param: string | null
  readonly status = 400
  readonly type = 'invalid_request_error'

  constructor(message: string, param: string | null) {
    super('invalid-request', message)
    this.param = param
  }

  /** `{ error: { message, type: 'invalid_request_error', param, code: 'invalid_request' } }`, OpenAI's error shape. */
  toOpenAIError(): { error: { message: string; type: string; param: string | null; code: string } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: wireCode(this.code) } }
  }

  /** A 400 with that body. */
  openAIAnswer(): OpenAIAnswer {
    return { status: 400, body: this.toOpenAIError() }
  }
}

/** A bound of the package was reached, e.g. a pool already holding 2^24 streams (code `limit-exceeded`). */
export class HarmonyLimitError extends HarmonyError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('limit-exceeded', message, options)
  }
}

/**
 * The package cannot run as installed or configured: `native-unavailable` (the native addon is missing or
 * does not load, and native was asked for), `invalid-environment` (HARMONY_STREAM_IMPL is not `native` or
 * `js`), `vocabulary-malformed` (the vocabulary file shipped by gpt-tokenizer is damaged).
 */
export class HarmonySetupError extends HarmonyError {}
