/**
 * A budget of work per turn of the event loop, shared by everything of one kind that runs on the one thread:
 * a turn does about `budget` units (what goes on at once, and the longest waiting, may pass it), and what asks
 * past it waits, in the order it asked, for later turns. Below the budget nothing waits and nothing is held back
 * (no timer, no added latency); a turn is scheduled only to forget what was spent. The gateway has two
 * (docs/PERFORMANCE.md, "The first token under load"): the engines' stream reads (engines/read-budget.ts), a unit
 * an event, and the beginning of requests (server/pipeline/begin-budget.ts), a unit a request.
 */

/** Runs a callback on a later turn of the event loop, after its I/O (`setImmediate`); tests pass their own. */
export type Schedule = (callback: () => void) => void

export class TurnBudget {
  /** The budgets on the event loop's own turns (`setImmediate`) whose end of this turn is scheduled. */
  private static readonly ending = new Set<TurnBudget>()

  /**
   * Moves this turn's end of every budget on the event loop after the callbacks scheduled so far. What was just
   * scheduled (undici's write of a request sent on a kept-alive connection: engines/http.ts) then does not wait
   * for the work a turn's end lets go on: the reads, and the request begins, that waited.
   */
  static postponeTurnEnds(): void {
    for (const budget of [...TurnBudget.ending]) {
      budget.scheduled = false
      budget.next()
    }
  }

  private spent = 0
  private scheduled = false
  /** The turn ended early (`exhaust`): nothing more goes on at once until its end. */
  private closed = false
  /** Which scheduled end of the turn is the live one (`postponeTurnEnds` moves it; an earlier one then does nothing). */
  private ends = 0
  private readonly waiting: Array<{ cost: number; go: () => void }> = []

  constructor(
    /** Units a turn does before what asks waits. */
    readonly budget: number,
    private readonly schedule: Schedule = setImmediate,
  ) {
    if (!Number.isInteger(budget) || budget < 1) throw new RangeError(`TurnBudget: budget must be a positive integer, got ${budget}`)
  }

  /**
   * Asks to do `cost` units now. null: go on at once. A promise: wait for it (a later turn). `atOnce`: goes on
   * at once whatever was spent, and is counted (a stream's first read).
   */
  take(cost: number, atOnce = false): Promise<void> | null {
    if (atOnce || (!this.closed && this.waiting.length === 0 && this.spent < this.budget)) {
      this.spend(cost)
      return null
    }
    return new Promise((go) => {
      this.waiting.push({ cost, go })
      this.next()
    })
  }

  /**
   * Nothing more at once in this turn: what asks from now on waits for its end, where it goes on as at any turn's
   * end, within what the turn has left of its budget.
   */
  exhaust(): void {
    this.closed = true
    this.next()
  }

  /** What waits for a turn. */
  get queued(): number {
    return this.waiting.length
  }

  private spend(cost: number): void {
    this.spent += cost
    this.next()
  }

  /**
   * The end of this turn (after its I/O): the longest waiting goes on whatever the turn spent, and those after it
   * with what the turn has left of its budget; then what was spent is forgotten. What went on at once in the
   * turn's I/O counts: granted a whole budget afresh here, the waiting would go on with no I/O between them and
   * what went before (the engines' answers to the requests just begun could not be read between the two). The
   * longest waiting goes on all the same, so that what goes on at once (a new stream's first read, every turn)
   * never starves what waits.
   */
  private next(): void {
    if (this.scheduled) return
    this.scheduled = true
    const end = ++this.ends
    if (this.schedule === setImmediate) TurnBudget.ending.add(this)
    this.schedule(() => {
      if (end !== this.ends) return
      TurnBudget.ending.delete(this)
      this.scheduled = false
      this.closed = false
      let granted = false
      while (this.waiting.length > 0 && (this.spent < this.budget || !granted)) {
        const { cost, go } = this.waiting.shift()!
        this.spent += cost
        granted = true
        go()
      }
      this.spent = 0
      if (this.waiting.length > 0) this.next()
    })
  }
}
