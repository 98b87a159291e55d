/**
 * The native implementation behind single parsers: the `parser*` functions of crate/node, which keep
 * every native parser of this thread in one Rust pool. Tokens go in and results come out through two
 * arrays bound once (and again when a batch needs more room), so a call passes only two integers.
 */
import { compactCapacity } from './compact'
import type { ParserBackend, RawDiagnostic, RawHeader, RawParseError } from './engine'

export interface NativeBinding {
  loadVocabulary(path: string): void
  NativePool: new () => import('./engine').PoolBackend
  parserBind(input: Uint32Array, output: Uint32Array): void
  parserOpen(role: string | null, strict: boolean, maxHeaderTokens: number, toolNames: string[]): number
  parserClose(id: number): boolean
  parserPush(id: number, count: number): string
  parserFinish(id: number): string
  parserTakeDiagnostics(id: number): RawDiagnostic[]
  parserTakeHeaders(id: number): RawHeader[]
  parserTakeError(id: number): RawParseError | null
  parserState(id: number): number
  parserNames(from: number): string[]
  parserDebugPanic(id: number): number
}

export class NativeParserBackend implements ParserBackend {
  private input = new Uint32Array(64)
  out = new Uint32Array(compactCapacity(64))

  constructor(private readonly binding: NativeBinding) {
    binding.parserBind(this.input, this.out)
  }

  open(role: string | null, strict: boolean, maxHeaderTokens: number, toolNames: string[]): number {
    return this.binding.parserOpen(role, strict, maxHeaderTokens, toolNames)
  }

  close(id: number): boolean {
    return this.binding.parserClose(id)
  }

  push(id: number, tokens: Uint32Array): string {
    const count = tokens.length
    if (count > this.input.length) this.grow(count)
    const input = this.input
    // A loop beats TypedArray#set for the short batches that dominate streaming.
    if (count <= 16) for (let i = 0; i < count; i++) input[i] = tokens[i]
    else input.set(tokens)
    return this.binding.parserPush(id, count)
  }

  finish(id: number): string {
    return this.binding.parserFinish(id)
  }

  private grow(count: number): void {
    const size = Math.max(count, this.input.length * 2)
    this.input = new Uint32Array(size)
    this.out = new Uint32Array(compactCapacity(size))
    this.binding.parserBind(this.input, this.out)
  }

  takeDiagnostics(id: number): RawDiagnostic[] {
    return this.binding.parserTakeDiagnostics(id)
  }

  takeHeaders(id: number): RawHeader[] {
    return this.binding.parserTakeHeaders(id)
  }

  takeError(id: number): RawParseError | null {
    return this.binding.parserTakeError(id)
  }

  state(id: number): number {
    return this.binding.parserState(id)
  }

  names(from: number): string[] {
    return this.binding.parserNames(from)
  }

  debugPanic(id: number): number {
    return this.binding.parserDebugPanic(id)
  }
}
