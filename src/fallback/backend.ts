/** The TypeScript implementation behind single parsers: one `StreamPool` for all of them in this thread. */
import { compactCapacity } from '../compact'
import type { ParserBackend, RawDiagnostic, RawHeader, RawParseError } from '../engine'
import { StreamPool } from './pool'

export class JsParserBackend implements ParserBackend {
  private readonly pool = new StreamPool()
  out = new Uint32Array(compactCapacity(64))

  open(role: string | null, strict: boolean, maxHeaderTokens: number, toolNames: string[]): number {
    return this.pool.open(role, strict, maxHeaderTokens, toolNames)
  }

  close(id: number): boolean {
    return this.pool.close(id)
  }

  push(id: number, tokens: Uint32Array): string {
    const needed = compactCapacity(tokens.length)
    if (this.out.length < needed) this.out = new Uint32Array(Math.max(needed, this.out.length * 2))
    return this.pool.callOne(id, tokens, this.out)
  }

  finish(id: number): string {
    return this.pool.callOne(id, null, this.out)
  }

  takeDiagnostics(id: number): RawDiagnostic[] {
    return this.pool.takeDiagnostics(id)
  }

  takeHeaders(id: number): RawHeader[] {
    return this.pool.takeHeaders(id)
  }

  takeError(id: number): RawParseError | null {
    return this.pool.takeError(id)
  }

  state(id: number): number {
    return this.pool.state(id)
  }

  names(from: number): string[] {
    return this.pool.names(from)
  }

  debugPanic(id: number): number {
    return this.pool.debugPanic(id)
  }
}
