/**
 * The TypeScript engine: the `StreamParser` behind the engine protocol (`../engine.ts`). This is the
 * counterpart of the N-API binding in crate/node/src/lib.rs and fills `out` the same way.
 */
import {
  type Engine,
  OUT_BAD_INDEX,
  OUT_DIAGNOSTICS,
  OUT_EVENTS,
  OUT_FIRST_EVENT,
  OUT_HEADERS,
  OUT_STATE,
  OUT_STATUS,
  type RawDiagnostic,
  type RawHeader,
  type RawParseError,
  STATUS_FINISHED,
  STATUS_INVALID_TOKEN,
  STATUS_OK,
  STATUS_PARSE_ERROR,
} from '../engine'
import { type ParserOptions, type PushError, StreamParser } from './stream-parser'
import { sharedVocabulary } from './vocabulary'

export class JsEngine implements Engine {
  private readonly parser: StreamParser
  private error: RawParseError | null = null

  constructor(options: ParserOptions) {
    this.parser = new StreamParser(sharedVocabulary(), options)
  }

  push(tokens: Uint32Array, out: Uint32Array): string {
    return this.report(this.parser.push(tokens), out)
  }

  finish(out: Uint32Array): string {
    return this.report(this.parser.finish(), out)
  }

  takeHeaders(): RawHeader[] {
    return this.parser.output.headers.splice(0)
  }

  takeDiagnostics(): RawDiagnostic[] {
    return this.parser.output.diagnostics.splice(0)
  }

  takeError(): RawParseError | null {
    const error = this.error
    this.error = null
    return error
  }

  get state(): number {
    return this.parser.state
  }

  private report(result: PushError | null, out: Uint32Array): string {
    out[OUT_BAD_INDEX] = 0
    if (result === null) out[OUT_STATUS] = STATUS_OK
    else if (result.kind === 'parse') {
      this.error = result.error
      out[OUT_STATUS] = STATUS_PARSE_ERROR
    } else if (result.kind === 'invalid-token') {
      out[OUT_BAD_INDEX] = result.index
      out[OUT_STATUS] = STATUS_INVALID_TOKEN
    } else out[OUT_STATUS] = STATUS_FINISHED
    const output = this.parser.output
    const events = output.events
    if (out.length < OUT_FIRST_EVENT + events.length) throw new Error('output array too small')
    out[OUT_EVENTS] = events.length / 3
    out[OUT_HEADERS] = output.headers.length
    out[OUT_DIAGNOSTICS] = output.diagnostics.length
    out[OUT_STATE] = this.parser.state
    for (let i = 0; i < events.length; i++) out[OUT_FIRST_EVENT + i] = events[i]
    return output.text
  }
}
