/**
 * The TypeScript implementation behind one `HarmonyStreamParser`: a stream of its own (no pool, so the
 * garbage collector frees it with the parser), answering in the single form of the compact format.
 */
import { compactCapacity, NAME_NOT_INTERNED, NameTable } from '../compact'
import type { FrameTemplate, LaneProgress } from '../frames'
import type { BackendStream, LaneStepper, RawDiagnostic, RawHeader, RawParseError, ResultVisitor } from '../protocol'
import { LAST_TOKEN } from '../tokens'
import { failGuarded, newStream, type Stream } from './guarded-stream'
import { claimLane, releaseLane, setLane, stepFrames, takeLane } from './lane'
import { callStream, runStream } from './pool'
import { sharedVocabulary } from './vocabulary'

// Shared by all TypeScript parsers of this thread: calls are synchronous, so one at a time writes `out`.
const names = new NameTable()
let out = new Uint32Array(compactCapacity(64))

export class JsStream implements BackendStream {
  readonly stream: Stream

  constructor(role: string | null, strict: boolean, maxHeaderTokens: number, toolNames: string[]) {
    this.stream = newStream(sharedVocabulary(), { role, strict, maxHeaderTokens, toolNames })
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

  takeText(tokens: Uint32Array): string | null {
    return this.stream.broken ? null : this.stream.parser.takeText(tokens)
  }

  takeSilently(tokens: Uint32Array): boolean {
    const { parser } = this.stream
    for (let i = 0; i < tokens.length; i++) if (tokens[i] > LAST_TOKEN) return false
    if (this.stream.broken || !parser.takesSilently(tokens, 0, tokens.length)) return false
    // Nothing can come of these tokens (no text, event, diagnostic or error), so no batch is built either.
    parser.push(tokens)
    return true
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

  setLane(template: FrameTemplate | null, counter: number): boolean {
    return setLane(this.stream, template, counter)
  }

  takeLane(): LaneProgress | null {
    return takeLane(this.stream)
  }
}

/** Owner numbers of this thread's TypeScript lane steppers (a stepper serves only the streams it claimed). */
let lastOwner = 0

/** The TypeScript lanes: the streams of the backend streams added, known by their ids in this thread's lane table. */
export class JsLaneStepper implements LaneStepper {
  private readonly owner = ++lastOwner

  add(backend: BackendStream): number {
    if (!(backend instanceof JsStream)) throw new TypeError("this pool runs on the js implementation; the adapter's parser does not")
    const id = claimLane(backend.stream, this.owner)
    if (id === null) throw new TypeError("this adapter's parser is served by another pool")
    return id
  }

  remove(id: number): void {
    releaseLane(id, this.owner)
  }

  step(ids: Uint32Array, offsets: Uint32Array, tokens: Uint32Array, ends: Uint32Array): string[] {
    return stepFrames(this.owner, ids, offsets, tokens, ends)
  }
}
