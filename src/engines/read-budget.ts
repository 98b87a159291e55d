/**
 * A read budget for the engines' streams, a turn of the event loop at a time. One thread reads every engine
 * stream, and an engine that runs ahead of the gateway (every fast one, under load) leaves a full socket read
 * of hundreds of events per stream. Read as they came, every turn of the loop handled one such read for every
 * stream, so a turn grew with the number of streams (about 100 ms at 64), and a new request waited a turn for
 * its request to be read and another for its first token (docs/PERFORMANCE.md, "The first token under load").
 *
 * So a turn handles at most `budget` engine events, and reads past it wait, in order, for later turns; a stream
 * that waits is not read from (postEvents reads only when asked), so the engine is held back by TCP, not
 * buffered: a waiting stream holds the one read it has, nothing more. A stream's first read never waits: a new
 * request's first token goes out in the turn its engine's answer arrives. Below the budget nothing waits at all,
 * and nothing is held back (no timer, no added latency). An aborted stream that waits loses nothing by it: the
 * abort closes its connection at once (postEvents).
 */

/** Runs a callback on a later turn of the event loop, after its I/O (`setImmediate`); tests pass their own. */
export type Schedule = (callback: () => void) => void

/**
 * Events a turn handles before later reads wait: 1–2 ms of a gateway's work (5–8 µs an event from the engine's
 * socket to the client's, under `bench:peers`), a few full socket reads. 256 against 512 and 1024 measured the
 * lowest first-token times with no CPU per token above the noise (docs/PERFORMANCE.md).
 */
const BUDGET_EVENTS = 256

export class ReadBudget {
  private spent = 0
  private scheduled = false
  private readonly waiting: Array<{ cost: number; go: () => void }> = []

  constructor(
    /** Events a turn handles before later reads wait. */
    readonly budget = BUDGET_EVENTS,
    private readonly schedule: Schedule = setImmediate,
  ) {
    if (!Number.isInteger(budget) || budget < 1) throw new RangeError(`ReadBudget: budget must be a positive integer, got ${budget}`)
  }

  /**
   * Asks to handle `cost` events now. null: go on at once. A promise: wait for it (a later turn). `first`: the
   * stream's first read, which goes on at once whatever was spent.
   */
  take(cost: number, first: boolean): Promise<void> | null {
    if (first || (this.waiting.length === 0 && this.spent < this.budget)) {
      this.spend(cost)
      return null
    }
    return new Promise((go) => {
      this.waiting.push({ cost, go })
      this.next()
    })
  }

  /** Streams waiting for a turn. */
  get queued(): number {
    return this.waiting.length
  }

  private spend(cost: number): void {
    this.spent += cost
    this.next()
  }

  /** The next turn: what was spent is forgotten, and the longest waiting go on up to the budget. */
  private next(): void {
    if (this.scheduled) return
    this.scheduled = true
    this.schedule(() => {
      this.scheduled = false
      this.spent = 0
      while (this.waiting.length > 0 && this.spent < this.budget) {
        const { cost, go } = this.waiting.shift()!
        this.spent += cost
        go()
      }
      if (this.spent > 0) this.next()
    })
  }
}

/** The budget every HTTP engine client of this process shares: they share its one event loop. */
export const engineReads = new ReadBudget()
