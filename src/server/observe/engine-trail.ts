/**
 * Which engine generated which ids of one generation, so that what the parser and the adapters say about the
 * output (their diagnostics) is counted and told under the engine that wrote it. With one engine that is all of
 * them. With an `EngineGroup` it is the member the group chose (`GenerateRequest.onEngine`, the label the other
 * engine metrics use: `vllm/0`); after a failover mid-stream, or in a tool loop whose generations the group
 * routes apart, the output is several engines' in turn, each from the id where it took over. A diagnostic points
 * at the id it is about (`tokenOffset`, counted over the ids the adapter read, which are the ids passed here),
 * so it goes to the engine that generated that id, not to whichever finished the generation. What a step says
 * itself (`engine-failover`, `engine-failover-refused`, `engine-ids-lost`, `tool-failed`) goes to the engine
 * whose step it came on; a failover's to the engine that failed (its `from`), as `harmony_engine_failovers_total`
 * counts it.
 */
import type { EngineDiagnostic, EngineStep } from '../../engines/types'
import type { StepWatcher } from './watch'

/**
 * The engine of what is said about the request rather than an engine's output (`not-applied`,
 * `prompt-re-rendered`): kept apart from every engine, so that an engine's series count only its own output.
 */
export const NO_ENGINE = 'none'

export class EngineTrail implements StepWatcher {
  /** The engines in the order they took over, each with the offset of its first id (`starts`, ascending). */
  private readonly names: string[]
  private readonly starts: number[] = [0]
  /** Ids passed on so far. */
  private ids = 0
  /** The engine of each diagnostic a step carried, in the order the steps came. */
  private readonly told: { code: string; engine: string }[] = []

  /** `engine`: the gateway's engine (a group's own name until it names the member it chose). */
  constructor(engine: string) {
    this.names = [engine]
  }

  /** `GenerateRequest.onEngine`: `name` serves from here on; with `failure`, that one failed (the next is told next). */
  readonly onEngine = (name: string, failure?: unknown): void => {
    if (failure !== undefined) return
    // One that generated no id (it failed before its first, or a group named the member it chose) leaves no trace.
    if (this.starts.at(-1) === this.ids) {
      this.names.pop()
      this.starts.pop()
    }
    // The one before it again (a tool loop's next generation routed back): its stretch goes on.
    if (this.names.at(-1) === name) return
    this.names.push(name)
    this.starts.push(this.ids)
  }

  step(step: EngineStep): void {
    this.ids += step.tokens.length
    if (step.diagnostics !== undefined)
      for (const diagnostic of step.diagnostics) this.told.push({ code: diagnostic.code, engine: toldBy(diagnostic) ?? this.current })
  }

  end(): void {}

  /** The engine serving now (the last to take over). */
  get current(): string {
    return this.names.at(-1)!
  }

  /** Every engine that generated some of the output, in the order they first did (one, unless the output moved). */
  get engines(): string[] {
    return [...new Set(this.names)]
  }

  /** The engine that generated the id at `offset` (at or past the end: the last one, which ended the output). */
  engineAt(offset: number): string {
    let i = this.starts.length - 1
    while (i > 0 && this.starts[i]! > offset) i--
    return this.names[i]!
  }

  /**
   * An adapter's `diagnostics`, each with the engine it is about (`engine`). A step's own diagnostics are found
   * by their codes, which no parser or adapter diagnostic shares, in the order the steps came (the adapter keeps
   * them so); not by their offset, which a whole answer, read as one step, gives as 0.
   */
  withEngines<D extends { code: string; tokenOffset: number }>(diagnostics: readonly D[]): (D & { engine: string })[] {
    const told = new Map<string, string[]>()
    for (const { code, engine } of this.told) {
      const engines = told.get(code)
      if (engines === undefined) told.set(code, [engine])
      else engines.push(engine)
    }
    return diagnostics.map((diagnostic) => ({
      ...diagnostic,
      engine: told.get(diagnostic.code)?.shift() ?? this.engineAt(diagnostic.tokenOffset),
    }))
  }
}

/** The engine a step's diagnostic names as the one it is about: a failover's is the engine that failed. */
function toldBy(diagnostic: EngineDiagnostic): string | undefined {
  return 'from' in diagnostic ? diagnostic.from : undefined
}
