/**
 * How an engine's stream is read in bulk: the events one read of the socket completes become as few steps as
 * what they say allows (`joinSteps`), and an event that only carries ids, like the one before it, is read
 * without parsing its JSON (`KnownEventShape`). Neither may change what a consumer gets: the same ids in order,
 * the finish reason, usage and log probabilities on the ids they came with, and the ids before a failure.
 */
import { once } from 'node:events'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'

import test from 'ava'
import { EngineError, type EngineStep, VllmEngine } from 'harmony-stream/engines'

import { CompletionReader } from '../../src/engines/completion-stream.ts'
import { joinSteps } from '../../src/engines/skeleton.ts'

const PROMPT = [200006, 1428, 200008, 13225, 200007, 200006, 173781]
const RETURN = 200002
const COMPLETION = [...Array.from({ length: 300 }, (_, i) => 1000 + ((i * 7919) % 50_000)), RETURN]

const event = (choice: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  `data: ${JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: 'gpt-oss', choices: [choice], ...extra })}\n\n`
const plain = (ids: number[]) => event({ index: 0, text: '', logprobs: null, finish_reason: null, stop_reason: null, token_ids: ids })
const usage = (completion: number) =>
  `data: ${JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: 'gpt-oss', choices: [], usage: { prompt_tokens: PROMPT.length, completion_tokens: completion, total_tokens: 0 } })}\n\n`

/** vLLM's `/v1/completions` stream of COMPLETION, one event per id, the whole body written at once. */
function wholeStream(failAfter?: number): string {
  let body = ''
  const ids = COMPLETION.slice(0, -1)
  for (const [i, id] of ids.entries()) {
    if (i === failAfter)
      return `${body}data: ${JSON.stringify({ error: { message: 'out of memory', type: 'InternalServerError', code: 500 } })}\n\n`
    body += plain([id])
  }
  body += event({ index: 0, text: '', logprobs: null, finish_reason: 'stop', stop_reason: RETURN, token_ids: [RETURN] })
  return `${body}${usage(COMPLETION.length)}data: [DONE]\n\n`
}

async function serve(body: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.end(body)
    })
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((r) => server.close(() => r())) }
}

test('the events of one read are one step: the same ids, the finish reason and usage on the last', async (t) => {
  const engine = await serve(wholeStream())
  t.teardown(engine.close)
  const steps: EngineStep[] = []
  for await (const step of new VllmEngine({ url: engine.url }).generate({ tokens: PROMPT })) steps.push(step)
  t.deepEqual(
    steps.flatMap((s) => [...s.tokens]),
    COMPLETION,
  )
  // 300 events in a body of about 45 KB: a few reads at most, never one step per event.
  t.true(steps.length < 20, `${steps.length} steps`)
  t.is(steps.at(-1)!.finishReason, 'stop')
  t.is(steps.at(-1)!.usage?.completionTokens, COMPLETION.length)
  t.true(
    steps.slice(0, -1).every((s) => s.finishReason === undefined && s.usage === undefined),
    'only the last step ends',
  )
})

test('an error event after ids in the same read: the ids are delivered, then the error', async (t) => {
  const engine = await serve(wholeStream(120))
  t.teardown(engine.close)
  const got: number[] = []
  const error = await t.throwsAsync(
    (async () => {
      for await (const step of new VllmEngine({ url: engine.url }).generate({ tokens: PROMPT })) got.push(...step.tokens)
    })(),
    { instanceOf: EngineError },
  )
  t.is(error?.code, 'engine-stream-error')
  t.deepEqual(got, COMPLETION.slice(0, 120))
})

test('joinSteps joins only steps of ids (with their log probabilities), never across a finish, usage or diagnostics', (t) => {
  const lp = (id: number) => ({ id, logprob: -id / 1000, top: [] })
  const ids = (...tokens: number[]): EngineStep => ({ tokens: Uint32Array.from(tokens) })
  const steps: EngineStep[] = [
    ids(1, 2),
    ids(3),
    { tokens: Uint32Array.from([4]), diagnostics: [{ code: 'engine-ids-lost', message: 'x' }] as EngineStep['diagnostics'] },
    ids(5),
    { tokens: Uint32Array.from([6, 7]), logprobs: [lp(6), null] },
    { tokens: Uint32Array.from([8]), logprobs: [lp(8)] },
    ids(9),
    { tokens: Uint32Array.from([10]), finishReason: 'stop', usage: { promptTokens: 1, completionTokens: 10 } },
  ]
  const joined = joinSteps(steps)
  t.deepEqual(
    joined.map((s) => [...s.tokens]),
    [[1, 2, 3], [4], [5], [6, 7, 8], [9], [10]],
  )
  t.deepEqual(joined[3]!.logprobs, [lp(6), null, lp(8)])
  t.is(joined[1]!.diagnostics?.length, 1)
  t.is(joined[5]!.finishReason, 'stop')
  t.deepEqual(joinSteps([ids(1)]), [ids(1)])
  t.deepEqual(joinSteps([]), [])
})

/** Every step `reader` reads from `events` (data texts): with `readKnown` first, as the engines read, or parsing each. */
function readAll(events: string[], known: boolean): { steps: EngineStep[] } | { error: string } {
  const reader = new CompletionReader({ engine: 'vllm', stops: [RETURN, 200012] })
  const steps: EngineStep[] = []
  try {
    for (const data of events) {
      const ids: number[] = []
      if (known && reader.readKnown(data, ids)) {
        steps.push({ tokens: Uint32Array.from(ids) })
        continue
      }
      if (ids.length > 0) throw new Error('readKnown left ids behind when it did not read the event')
      const reading = reader.read(JSON.parse(data), data)
      for (let next = reading.next(); !next.done; next = reading.next()) steps.push(next.value)
    }
    steps.push(reader.end(true))
  } catch (error) {
    return { error: (error as Error).message }
  }
  return { steps }
}

const data = (frame: string) => frame.slice('data: '.length, -2)

test('an event read by its shape reads as parsed, and an event that only looks like one is parsed', (t) => {
  const cases: [string, string[]][] = [
    [
      'ids, then the finish',
      [
        plain([1]),
        plain([2, 3]),
        plain([4]),
        event({ index: 0, text: '', logprobs: null, finish_reason: 'stop', stop_reason: RETURN, token_ids: [] }),
        usage(4),
      ].map(data),
    ],
    [
      'the finish with ids, like an event of ids but for its reason',
      [plain([1]), event({ index: 0, text: '', logprobs: null, finish_reason: 'length', stop_reason: null, token_ids: [5] }), usage(2)].map(
        data,
      ),
    ],
    [
      'usage with every event (continuous usage stats)',
      [1, 2, 3]
        .map((n) =>
          data(
            event(
              { index: 0, text: '', logprobs: null, finish_reason: null, stop_reason: null, token_ids: [n] },
              { usage: { prompt_tokens: 7, completion_tokens: n, total_tokens: 7 + n } },
            ),
          ),
        )
        .concat(data(event({ index: 0, text: '', logprobs: null, finish_reason: 'stop', stop_reason: null, token_ids: [RETURN] }))),
    ],
    [
      'a first event with the prompt ids, then plain ones',
      [
        data(
          event({ index: 0, text: '', logprobs: null, finish_reason: null, stop_reason: null, token_ids: [9], prompt_token_ids: PROMPT }),
        ),
        data(plain([10])),
        data(plain([11])),
        data(event({ index: 0, text: '', logprobs: null, finish_reason: 'stop', stop_reason: null, token_ids: [RETURN] })),
      ],
    ],
    [
      'ids JSON reads otherwise, or refuses',
      [data(plain([1])), data(plain([2])).replace('[2]', '[2, 3]'), data(plain([4])).replace('[4]', '[4.0]')],
    ],
    ['an id that is not one', [data(plain([1])), data(plain([2])).replace('[2]', '[007]')]],
    ['a negative id', [data(plain([1])), data(plain([2])).replace('[2]', '[-2]')]],
    ['an id past the vocabulary', [data(plain([1])), data(plain([2])).replace('[2]', '[99999999999]')]],
    [
      'ids after the finish',
      [
        data(plain([1])),
        data(event({ index: 0, text: '', logprobs: null, finish_reason: 'stop', stop_reason: null, token_ids: [RETURN] })),
        data(plain([2])),
      ],
    ],
  ]
  for (const [name, events] of cases) {
    const parsed = readAll(events, false)
    const known = readAll(events, true)
    t.deepEqual(known, parsed, name)
  }
  // The shape is used: a run of plain events is read without JSON.parse after the first.
  const parse = JSON.parse
  let parses = 0
  JSON.parse = (text: string) => {
    parses++
    return parse(text)
  }
  try {
    readAll(
      COMPLETION.slice(0, 50).map((id) => data(plain([id]))),
      true,
    )
  } finally {
    JSON.parse = parse
  }
  t.is(parses, 1)
})
