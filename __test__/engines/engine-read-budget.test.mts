/**
 * The turn budget (base/turn-budget.ts) as the engines' streams use it (engines/read-budget.ts): a turn of the
 * event loop handles at most its budget of engine events, the reads past it wait in order for later turns, a
 * stream's first read never waits, and nothing waits or is scheduled while the budget holds. The turns are
 * driven by hand here (`Schedule`), so no test waits on the clock; the last test runs real streams through the
 * process's own budget.
 */
import { once } from 'node:events'
import { createServer } from 'node:http'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'

import test from 'ava'
import { VllmEngine } from 'harmony-stream/engines'

import { TurnBudget } from '../../src/base/turn-budget.ts'
import type * as ReadBudgetModule from '../../src/engines/read-budget.ts'

// Required, not imported: the engines entry is loaded as CommonJS, and an import of the file would load a second
// copy of it, whose `engineReads` no engine uses.
const { engineReads } = createRequire(import.meta.url)('../../src/engines/read-budget.ts') as typeof ReadBudgetModule

/** A TurnBudget whose turns end when the test says (`turn()`). */
function manual(budget: number) {
  const pending: Array<() => void> = []
  const reads = new TurnBudget(budget, (callback) => pending.push(callback))
  return {
    reads,
    scheduled: () => pending.length,
    /** Runs the next turn, then lets the reads it let go on run (their promises' continuations). */
    async turn() {
      const callbacks = pending.splice(0)
      for (const callback of callbacks) callback()
      await new Promise((resolve) => setImmediate(resolve))
    },
  }
}

/** Starts a read of `cost` events (a stream's `first` or not), noting in `order` when it may go on. */
function read(reads: TurnBudget, name: string, cost: number, order: string[], first = false): void {
  const wait = reads.take(cost, first)
  if (wait === null) order.push(name)
  else void wait.then(() => order.push(name))
}

test('below the budget every read goes on at once, and a turn is scheduled only to forget what was spent', async (t) => {
  const { reads, scheduled, turn } = manual(10)
  t.is(reads.take(4, false), null)
  t.is(reads.take(5, false), null)
  t.is(scheduled(), 1)
  await turn()
  // Nothing was spent in that turn, so none follows it: an idle gateway schedules nothing.
  t.is(scheduled(), 0)
  t.is(reads.take(9, false), null)
})

test('past the budget reads wait for later turns, in the order they came, a budget a turn', async (t) => {
  const { reads, turn } = manual(10)
  const order: string[] = []
  read(reads, 'a', 10, order)
  for (const name of ['b', 'c', 'd']) read(reads, name, 6, order)
  await new Promise((resolve) => setImmediate(resolve))
  t.deepEqual(order, ['a'])
  t.is(reads.queued, 3)
  // a spent the whole of its turn: at its end only the longest waiting, b, goes on.
  await turn()
  t.deepEqual(order, ['a', 'b'])
  // c (6) leaves the next turn under its budget, so d goes too.
  await turn()
  t.deepEqual(order, ['a', 'b', 'c', 'd'])
  t.is(reads.queued, 0)
})

test('what goes on at once in every turn never starves the longest waiting', async (t) => {
  const { reads, turn } = manual(10)
  const order: string[] = []
  read(reads, 'a', 10, order)
  for (const name of ['b', 'c']) read(reads, name, 1, order)
  // A new stream's first read, past the budget on its own, in each of the next turns' I/O: b, then c, go all the same.
  for (let i = 1; i <= 2; i++) {
    await turn()
    read(reads, `first ${i}`, 10, order, true)
  }
  await turn()
  t.deepEqual(order, ['a', 'b', 'first 1', 'c', 'first 2'])
  t.is(reads.queued, 0)
})

test('what went on at once in a turn counts against it: the waiting get what the turn has left', async (t) => {
  const { reads, turn } = manual(10)
  const order: string[] = []
  read(reads, 'a', 10, order)
  for (const name of ['b', 'c', 'd', 'e']) read(reads, name, 4, order)
  await turn()
  t.deepEqual(order, ['a', 'b'])
  // In the next turn's I/O, a stream's first read (3) goes on at once; at the turn's end c (4) and d (4) fit in
  // the 7 left, with the budget passed by the last…
  read(reads, 'first', 3, order, true)
  await new Promise((resolve) => setImmediate(resolve))
  await turn()
  t.deepEqual(order, ['a', 'b', 'first', 'c', 'd'])
  // …and e goes on in the turn after.
  await turn()
  t.deepEqual(order, ['a', 'b', 'first', 'c', 'd', 'e'])
  t.is(reads.queued, 0)
})

test('no read passes one that waits, even one the budget would have room for', async (t) => {
  const { reads, turn } = manual(10)
  const order: string[] = []
  read(reads, 'a', 10, order)
  read(reads, 'b', 12, order)
  read(reads, 'c', 1, order)
  await turn()
  // That turn let b go, whose 12 left no room for c; the next turn starts with nothing spent…
  t.deepEqual(order, ['a', 'b'])
  read(reads, 'e', 1, order)
  await new Promise((resolve) => setImmediate(resolve))
  // …and e waits all the same, behind c.
  t.deepEqual(order, ['a', 'b'])
  t.is(reads.queued, 2)
  await turn()
  t.deepEqual(order, ['a', 'b', 'c', 'e'])
})

test("a stream's first read never waits, whatever the turn has spent", async (t) => {
  const { reads, turn } = manual(10)
  const order: string[] = []
  read(reads, 'a', 50, order)
  read(reads, 'b', 5, order)
  read(reads, 'first', 300, order, true)
  await new Promise((resolve) => setImmediate(resolve))
  t.deepEqual(order, ['a', 'first'])
  await turn()
  t.deepEqual(order, ['a', 'first', 'b'])
})

test('exhausted, a turn lets nothing more go on at once: the reads after it wait for its end, then go on within the budget', async (t) => {
  const { reads, turn } = manual(10)
  const log: string[] = []
  read(reads, 'a', 2, log)
  reads.exhaust()
  read(reads, 'b', 3, log)
  read(reads, 'c', 3, log)
  read(reads, 'first', 1, log, true)
  t.deepEqual(log, ['a', 'first'])
  await turn()
  // What waited got what the turn had left (6 of 10), not only the longest waiting.
  t.deepEqual(log, ['a', 'first', 'b', 'c'])
  // The next turn has its whole budget, and takes at once again.
  t.is(reads.take(9, false), null)
})

test('postponed, the ends of the turn of the budgets on the event loop come after what was scheduled before', async (t) => {
  // As the engines' reads and the request begins do, on the loop's own turns (setImmediate).
  const reads = new TurnBudget(10)
  const begins = new TurnBudget(1)
  const log: string[] = []
  read(reads, 'read', 10, log)
  read(reads, 'waiting read', 1, log)
  read(begins, 'begin', 1, log)
  read(begins, 'waiting begin', 1, log)
  // undici's write of a request just sent on a kept-alive connection, scheduled after both ends (http.ts).
  setImmediate(() => log.push('request written'))
  TurnBudget.postponeTurnEnds()
  await new Promise((resolve) => setImmediate(resolve))
  await new Promise((resolve) => setImmediate(resolve))
  t.deepEqual(log.slice(0, 3), ['read', 'begin', 'request written'])
  t.deepEqual(log.slice(3).sort(), ['waiting begin', 'waiting read'])
})

test('the budget is a positive integer', (t) => {
  for (const budget of [0, -1, 1.5, Number.NaN])
    t.throws(() => new TurnBudget(budget), { instanceOf: RangeError, message: /budget must be a positive integer/ })
})

const PROMPT = [200006, 1428, 200008, 13225, 200007, 200006, 173781]
const RETURN = 200002

/** vLLM's `/v1/completions` stream of `ids`, an event each, the whole body written at once (an engine far ahead). */
function wholeStream(ids: readonly number[]): string {
  const event = (choice: Record<string, unknown>) =>
    `data: ${JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: 'gpt-oss', choices: [choice] })}\n\n`
  let body = ''
  for (const id of ids.slice(0, -1))
    body += event({ index: 0, text: '', logprobs: null, finish_reason: null, stop_reason: null, token_ids: [id] })
  body += event({ index: 0, text: '', logprobs: null, finish_reason: 'stop', stop_reason: RETURN, token_ids: [RETURN] })
  return `${body}data: [DONE]\n\n`
}

test('streams that run far past the budget wait their turns and each still gets all its ids, in order', async (t) => {
  const streams = Array.from({ length: 8 }, (_, s) => [
    ...Array.from({ length: 4 * engineReads.budget }, (_, i) => 1000 + ((i * 7919 + s * 104_729) % 50_000)),
    RETURN,
  ])
  const server = createServer((req, res) => {
    // `/<stream>/v1/completions`: the stream's number is the base URL's path prefix.
    const ids = streams[Number(req.url?.split('/')[1])]!
    req.resume()
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.end(wholeStream(ids))
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  let mostWaiting = 0
  const got = await Promise.all(
    streams.map(async (_, s) => {
      const engine = new VllmEngine({ url: `${base}/${s}`, keepAlive: false })
      const ids: number[] = []
      for await (const step of engine.generate({ tokens: PROMPT })) {
        ids.push(...step.tokens)
        mostWaiting = Math.max(mostWaiting, engineReads.queued)
      }
      return ids
    }),
  )
  t.deepEqual(got, streams)
  // Eight streams of 4 budgets each, read in socket-sized pieces: some reads waited for a later turn.
  t.true(mostWaiting > 0)
  t.is(engineReads.queued, 0)
})
