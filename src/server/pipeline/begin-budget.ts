/**
 * The requests for a generation begun in each turn of the event loop. Beginning one (its body read and checked,
 * its prompt rendered, its engine request sent) takes most of a millisecond on the one thread, and nothing of a
 * turn reaches the engines' answers before the turn ends: 64 requests that arrive together were all begun in
 * one turn of about 50 ms, and none got its first token before the last was begun. Begun a few a turn, in the
 * order they came, the first ones' engines answer while the rest wait, and their first tokens go out between
 * (docs/PERFORMANCE.md, "The first token under load"). Below the budget nothing waits and nothing is scheduled.
 */
import { TurnBudget } from '../../base/turn-budget'
import { type Gateway, gatewayShutdown } from './context'

/**
 * Requests begun a turn before the rest wait: 5–7 ms of a turn's work, about as long as its engine reads
 * (engines/read-budget.ts). 8 against 4 measured the earlier first chunk and the lower CPU per token at 64
 * clients (docs/PERFORMANCE.md).
 */
const BEGINS_PER_TURN = 8

/** The budget every face and WebSocket turn of the process shares: they share its one event loop. */
export const requestBegins = new TurnBudget(BEGINS_PER_TURN)

/**
 * null: begin now; a promise: begin when it settles, a later turn. It rejects with `gatewayShutdown()` when the
 * gateway's grace period ended while the request waited: such a gateway begins nothing. (A client that left while
 * its request waited needs nothing here: its body is not read, readJsonBytes.)
 */
export function beginTurn(gateway: Pick<Gateway, 'stopping'>): Promise<void> | null {
  const due = requestBegins.take(1)
  return (
    due?.then(() => {
      if (gateway.stopping.aborted) throw gatewayShutdown()
    }) ?? null
  )
}
