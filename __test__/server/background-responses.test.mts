/**
 * BackgroundResponses and StreamLog on their own (the gateway's tests drive them over HTTP): the bound on runs
 * and what a refused start gives back, a run whose store fails (no crash, its followers see the end), closing
 * while a client follows, a cancel whose process is gone (the cancel request not left behind), and a follower
 * that reads too slowly for the log's bound (an error event, not a stream that looks finished).
 */
import { EventEmitter } from 'node:events'
import type { ServerResponse } from 'node:http'

import test from 'ava'
import { ResponsesStream } from 'harmony-stream'
import type { EngineStep } from 'harmony-stream/engines'
import { HttpError } from 'harmony-stream/http'
import { BackgroundResponses, MemoryResponseStore, pipeStreamLog, StreamLog } from 'harmony-stream/server'

import { harmony } from '../helpers/harmony.mjs'
import { until } from '../helpers/until.mjs'

const ANSWER = harmony('<|channel|>final<|message|>Done.<|return|>')

/** Engine steps, one id each, `ms` apart; stops when `signal` aborts. */
async function* steps(tokens: number[], signal: AbortSignal, ms = 0): AsyncGenerator<EngineStep> {
  for (const id of tokens) {
    if (signal.aborted) return
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms))
    yield { tokens: Uint32Array.of(id) }
  }
}

const adapter = () => new ResponsesStream({ model: 'gpt-oss', background: true })

test('at most maxRunning run; a reservation not used is given back', async (t) => {
  const store = new MemoryResponseStore()
  const background = new BackgroundResponses({ store, maxRunning: 1 })
  const release = background.reserve()
  t.throws(() => background.reserve(), { instanceOf: HttpError, message: /1 background responses/ })
  release()
  release()
  const again = background.reserve()
  const run = adapter()
  background.start({ adapter: run, stream: false, steps: (signal) => steps(ANSWER, signal, 5), keep: async () => {} }, again)
  t.throws(() => background.reserve(), { instanceOf: HttpError })
  await background.close()
  t.notThrows(() => background.reserve()())
})

test('a store that fails during a run: no crash, the failure reported, the follower’s stream ends', async (t) => {
  const errors: unknown[] = []
  const background = new BackgroundResponses({ store: new MemoryResponseStore(), onError: (error) => errors.push(error) })
  const log = background.start(
    {
      adapter: adapter(),
      stream: true,
      steps: (signal) => steps(ANSWER, signal),
      keep: async () => {
        throw new Error('store down')
      },
    },
    background.reserve(),
  )
  let text = ''
  for await (const frames of log!.follow(-1)) text += frames
  t.true(log!.ended)
  t.is(text, '', 'the run stopped where it failed, and its follower was let go')
  await background.close()
  t.like(errors[0], { message: 'store down' })
})

test('close() while a client follows: the run is cancelled at once, its stream ends', async (t) => {
  // The engine never ends on its own: close() returns only if it cancels the run.
  t.timeout(60_000, 'close() did not cancel the run')
  const store = new MemoryResponseStore()
  const background = new BackgroundResponses({ store })
  const run = adapter()
  const kept: string[] = []
  async function* endless(signal: AbortSignal): AsyncGenerator<EngineStep> {
    yield* steps(harmony('<|channel|>final<|message|> more'), signal)
    await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
  }
  const log = background.start(
    { adapter: run, stream: true, steps: endless, keep: async (response) => void kept.push(response.status) },
    background.reserve(),
  )
  let frames = 0
  const following = (async () => {
    for await (const _ of log!.follow(-1)) frames++
  })()
  // Followed: the client has frames of the run, which now waits for its engine.
  t.true(await until(() => frames > 0, 10_000), 'the client follows the run')
  await background.close()
  await following
  t.true(log!.ended)
  t.deepEqual(kept, ['in_progress', 'cancelled'])
})

test('a cancel of a response no process runs keeps it as cancelled and leaves no cancel request behind', async (t) => {
  const store = new MemoryResponseStore()
  const background = new BackgroundResponses({ store, cancelWaitMs: 100 })
  await store.put({ id: 'resp_gone', createdAt: 1, response: { id: 'resp_gone', status: 'in_progress' }, input: [] })
  t.like(await background.cancel('resp_gone'), { status: 'cancelled' })
  t.is(await store.get('cancel-request:resp_gone'), null)
  await t.throwsAsync(background.cancel('cancel-request:resp_gone'), { instanceOf: HttpError, message: /No response/ })
  await t.throwsAsync(background.stream('resp_gone', 'x'), { instanceOf: HttpError, message: /starting_after/ })
  await t.throwsAsync(background.stream('resp_gone', null), { instanceOf: HttpError, message: /not kept here/ })
})

/** A ServerResponse whose socket is full until `drain` is emitted. */
function fullResponse() {
  const written: string[] = []
  const response = Object.assign(new EventEmitter(), {
    headersSent: false,
    writableFinished: false,
    writeHead() {
      response.headersSent = true
      return response
    },
    write(chunk: string) {
      written.push(chunk)
      return false
    },
    end(chunk?: string) {
      if (chunk !== undefined) written.push(chunk)
      response.writableFinished = true
      return response
    },
  })
  return { response, written }
}

test('a follower too slow for the log’s bound gets an error event as its stream’s end', async (t) => {
  const log = new StreamLog({ maxBytes: 100 })
  log.append(0, 'data: 0\n\n')
  const { response, written } = fullResponse()
  const piped = pipeStreamLog(response as unknown as ServerResponse, log)
  await new Promise((resolve) => setImmediate(resolve))
  t.deepEqual(written, ['data: 0\n\n'])
  // While the client reads nothing, more than four times the bound comes: frames it was to get are dropped.
  for (let i = 1; i < 100; i++) log.append(i, `data: ${i}\n\n`)
  log.end()
  response.emit('drain')
  t.is(await piped, 'completed')
  t.regex(written.at(-1)!, /^event: error\ndata: .*"events_not_kept"/)
  // The follower never got a frame out of order or twice.
  t.is(written.length, 2)
})

test('a follower that keeps up gets the end of a long answer whole, though that burst passes the bound', async (t) => {
  const log = new StreamLog({ maxBytes: 100 })
  const read: string[] = []
  const following = (async () => {
    for await (const frames of log.follow(-1)) read.push(frames)
  })()
  log.append(0, 'data: start\n\n')
  await new Promise((resolve) => setImmediate(resolve))
  // The last events of an answer come in one burst, each repeating its text: three times the bound here.
  const text = 'x'.repeat(90)
  for (let i = 1; i <= 3; i++) log.append(i, `data: ${i} ${text}\n\n`)
  log.end()
  await following
  t.is(read.join(''), `data: start\n\n${[1, 2, 3].map((i) => `data: ${i} ${text}\n\n`).join('')}`)
  // A late follower, which had read nothing, is refused the frames the bound let go.
  await t.throwsAsync(
    async () => {
      for await (const _ of log.follow(-1));
    },
    { message: /no longer kept/ },
  )
})

/** A run whose engine waits for its signal (a long generation), kept in `store`. */
function waitingRun(store: MemoryResponseStore) {
  const run = adapter()
  return {
    run,
    background: {
      adapter: run,
      steps: (signal: AbortSignal) =>
        (async function* () {
          yield { tokens: Uint32Array.from(harmony('<|channel|>final<|message|>Wor')) }
          if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
        })(),
      keep: (response: object) => store.put({ id: run.id, createdAt: 1, response: response as Record<string, unknown>, input: [] }),
      stream: false,
    },
  }
}

/** Resolves once `store` holds `id` (the run's first keep). */
async function kept(store: MemoryResponseStore, id: string): Promise<void> {
  while ((await store.get(id)) === null) await new Promise((resolve) => setImmediate(resolve))
}

test('a DELETE of a running response stops its run, and how the run ends does not bring it back (this process, or another sharing the store)', async (t) => {
  const store = new MemoryResponseStore()
  const here = new BackgroundResponses({ store })
  const local = waitingRun(store)
  here.start(local.background, here.reserve())
  await kept(store, local.run.id)
  t.true(await here.delete(local.run.id))
  t.is(await store.get(local.run.id), null, 'deleted, and the ended run did not keep it again')

  // Another process sharing the store runs it: asked through the store, it deletes where it would have kept.
  const there = new BackgroundResponses({ store })
  const remote = waitingRun(store)
  there.start(remote.background, there.reserve())
  await kept(store, remote.run.id)
  t.true(await here.delete(remote.run.id))
  await there.close()
  t.is(await store.get(remote.run.id), null)
  t.is(await store.get(`cancel-request:${remote.run.id}`), null, 'no request left behind')
  // A response that is not running is the store's to delete.
  t.false(await here.delete('resp_unknown'))
})

test('a run whose process is gone is found by its lapsed lease and kept as failed, saying why; a live run elsewhere is left alone', async (t) => {
  const store = new MemoryResponseStore()
  const now = Math.floor(Date.now() / 1000)
  // Left in_progress by a process that was killed: no lease, created long ago.
  await store.put({ id: 'resp_orphan', createdAt: now - 3600, response: { id: 'resp_orphan', status: 'in_progress' }, input: [] })
  // Just queued: its run may not have taken its lease yet.
  await store.put({ id: 'resp_young', createdAt: now, response: { id: 'resp_young', status: 'queued' }, input: [] })
  const background = new BackgroundResponses({ store, leaseMs: 60_000 })
  // What the poll is answered with is the record as it is kept now.
  t.like((await background.reapOrphan('resp_orphan'))?.response, { status: 'failed', error: { code: 'run_lost' } })
  t.like((await background.reapOrphan('resp_young'))?.response, { status: 'queued' })
  t.is(await background.reapOrphan('resp_unknown'), null)
  t.like((await store.get('resp_orphan'))?.response, { status: 'failed', error: { code: 'run_lost' } })
  t.like((await store.get('resp_young'))?.response, { status: 'queued' })

  // A run of another process sharing the store holds its lease: polled from here, it is left running.
  const there = new BackgroundResponses({ store, leaseMs: 60_000 })
  const remote = waitingRun(store)
  there.start(remote.background, there.reserve())
  await kept(store, remote.run.id)
  const record = (await store.get(remote.run.id))!
  await store.put({ ...record, createdAt: now - 3600 })
  await background.reapOrphan(remote.run.id)
  t.like((await store.get(remote.run.id))?.response, { status: 'in_progress' })
  await there.close()
  t.is(await store.get(`run-lease:${remote.run.id}`), null, 'the lease is given up when the run ends')
})

test('a follower that reads nothing at all is let go after the stall timeout: its connection closed, the log not held for it', async (t) => {
  const log = new StreamLog({ maxBytes: 100 })
  log.append(0, 'data: 0\n\n')
  const { response } = fullResponse()
  let destroyed = false
  const closing = Object.assign(response, {
    destroy() {
      destroyed = true
      response.emit('close')
      return response
    },
  })
  t.is(await pipeStreamLog(closing as unknown as ServerResponse, log, -1, 50), 'client-closed')
  t.true(destroyed)
})
