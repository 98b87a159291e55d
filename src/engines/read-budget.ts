/**
 * The engines' streams' share of each turn of the event loop. One thread reads every engine stream, and an
 * engine that runs ahead of the gateway (every fast one, under load) leaves a full socket read of hundreds of
 * events per stream. Read as they came, every turn of the loop handled one such read for every stream, so a turn
 * grew with the number of streams (about 100 ms at 64), and a new request waited a turn for its request to be
 * read and another for its first token (docs/PERFORMANCE.md, "The first token under load").
 *
 * So a turn handles about 512 engine events, and reads past them wait, in order, for later turns; a stream
 * that waits is not read from (postEvents reads only when asked), so the engine is held back by TCP, not
 * buffered: a waiting stream holds the one read it has, nothing more. A stream's first read never waits
 * (`take(events, true)`): a new request's first token goes out in the turn its engine's answer arrives. An
 * aborted stream that waits loses nothing by it: the abort closes its connection at once (postEvents).
 */
import { TurnBudget } from '../base/turn-budget'

/**
 * Events a turn handles before later reads wait: 2–4 ms of a gateway's work (5–8 µs an event from the engine's
 * socket to the client's, under `bench:peers`), a few full socket reads. Against 256 it measured the lower CPU
 * per token (bigger reads go further) and the earlier first chunk at 64 clients, beside the begin budget
 * (docs/PERFORMANCE.md).
 */
const BUDGET_EVENTS = 512

/** The budget every HTTP engine client of this process shares: they share its one event loop. */
export const engineReads = new TurnBudget(BUDGET_EVENTS)
