/**
 * The TypeScript implementation behind one `HarmonyStreamParser`: a stream of its own (no pool, so the
 * garbage collector frees it with the parser), answering in the single form of the compact format.
 */
import { NAME_NOT_INTERNED, NameTable, compactCapacity } from '../compact'
import type { Engine, RawDiagnostic, RawHeader, RawParseError, ResultVisitor } from '../engine'
import { type Stream, callStream, failGuarded, runStream } from './pool'
import { StreamParser } from './stream-parser'
import { sharedVocabulary } from './vocabulary'

// Shared by all TypeScript parsers of this thread: calls are synchronous, so one at a time writes `out`.
const names = new NameTable()
let out = new Uint32Array(compactCapacity(64))

export class JsEngine implements Engine {
  private readonly stream: Stream

  constructor(role: string | null, strict: boolean, maxHeaderTokens: number, toolNames: string[]) {
    this.stream = { parser: new StreamParser(sharedVocabulary(), { role, strict, maxHeaderTokens, toolNames }), error: null, badIndex: 0, broken: false }
  }

  get out(): Uint32Array {
    return out
  }

  push(tokens: Uint32Array): string {
    const needed = compactCapacity(tokens.length)
    if (out.length < needed) out = new Uint32Array(Math.max(needed, out.length * 2))
    return callStream(this.stream, tokens, out, names)
  }

  finish(): string {
    return callStream(this.stream, null, out, names)
  }

  /** Reads the parser's events directly: encoding them as records to decode them again would be wasted work. */
  read(tokens: Uint32Array | null, visitor: ResultVisitor): void {
    if (runStream(this.stream, tokens, out)) this.stream.parser.output.visit(visitor)
  }

  takeDiagnostics(): RawDiagnostic[] {
    return this.stream.parser.output.diagnostics.splice(0)
  }

  takeHeaders(): RawHeader[] {
    return this.stream.parser.output.headers.splice(0)
  }

  takeError(): RawParseError | null {
    const error = this.stream.error
    this.stream.error = null
    return error
  }

  get state(): number {
    return this.stream.parser.state
  }

  nameOf(id: number): string | null {
    if (id !== NAME_NOT_INTERNED && id > names.names.length) throw new RangeError(`no name has id ${id}`)
    return id === NAME_NOT_INTERNED ? null : names.nameOf(id)
  }

  /** Nothing to release early: the garbage collector frees a TypeScript stream with its parser. */
  close(): void {}

  debugPanic(): number {
    return failGuarded(this.stream)
  }
}
