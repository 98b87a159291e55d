/**
 * RenderWorkers: the same prompts as the synchronous renderers, rendered in worker threads so the event loop
 * goes on while a large request is encoded; the same typed request errors; a bounded queue; a clean close.
 */
import test from 'ava'
import {
  HarmonyError,
  HarmonyRequestError,
  HttpError,
  RenderWorkers,
  renderChatCompletionRequest,
  renderResponsesRequest,
} from 'harmony-stream'

import { IMPLEMENTATIONS } from './helpers/harmony.mjs'

const tools = [
  {
    type: 'function',
    function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } },
  },
]
const CHAT = {
  model: 'm',
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    { role: 'tool', tool_call_id: 'c1', content: '{"temp":21}' },
  ],
  tools,
}
const RESPONSES = {
  model: 'm',
  instructions: 'Be brief.',
  input: [{ role: 'user', content: 'Hi there' }],
  tools: [{ type: 'function', name: 'f', parameters: {} }],
}

/** A large request: many words of up to the run limit, seconds of BPE on the TypeScript tokenizer. */
function large(words: number): Record<string, unknown> {
  const text = Array.from({ length: words }, (_, i) => 'abcdefghij'.repeat(400).slice(i % 7)).join(' ')
  return { model: 'm', messages: [{ role: 'user', content: text }] }
}

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: the workers render what the synchronous renderers render`, async (t) => {
    const renderOptions = { implementation, currentDate: '2026-01-01' } as const
    const workers = new RenderWorkers({ size: 2, renderOptions })
    t.teardown(() => workers.close())
    const [chat, responses] = await Promise.all([workers.render('chat', CHAT), workers.render('responses', RESPONSES)])
    t.deepEqual(chat, renderChatCompletionRequest(CHAT, { ...renderOptions, cache: null }))
    t.deepEqual(responses, renderResponsesRequest(RESPONSES, { ...renderOptions, cache: null }))
    const error = await t.throwsAsync(
      workers.render('chat', { model: 'm', messages: [{ role: 'tool', tool_call_id: 'x', content: 'y' }] }),
      {
        instanceOf: HarmonyRequestError,
      },
    )
    t.is(error!.param, 'messages[0].tool_call_id')
    // A body over the bounds is refused before it is copied to a worker (one nested too deep cannot be copied).
    let deep: Record<string, unknown> = {}
    for (let i = 0; i < 5000; i++) deep = { function: deep }
    const tooDeep = await t.throwsAsync(workers.render('chat', { ...CHAT, tool_choice: deep }), { instanceOf: HarmonyRequestError })
    t.regex(tooDeep!.message, /limits\.maxDepth/)
    // The workers go on after a refused request.
    t.deepEqual(await workers.render('chat', CHAT), chat)
  })
}

test('the event loop goes on while a worker encodes a large request', async (t) => {
  const workers = new RenderWorkers({ size: 1, renderOptions: { implementation: 'js' } })
  t.teardown(() => workers.close())
  let ticks = 0
  let rendering = true
  const tick = () => {
    ticks++
    if (rendering) setImmediate(tick)
  }
  setImmediate(tick)
  const body = large(200)
  const prompt = await workers.render('chat', body)
  rendering = false
  t.deepEqual(prompt.tokens, renderChatCompletionRequest(body, { implementation: 'js', cache: null }).tokens)
  // Rendered on the event loop, not one tick could have run before the answer.
  t.true(ticks > 10, `${ticks} event-loop turns while rendering`)
})

test('a full queue answers 503; close rejects what is waiting; options are checked', async (t) => {
  const workers = new RenderWorkers({ size: 1, maxQueue: 1, renderOptions: { implementation: 'js' } })
  const busy = workers.render('chat', large(100))
  const waiting = workers.render('chat', CHAT)
  const refused = await t.throwsAsync(workers.render('chat', CHAT), { instanceOf: HttpError })
  t.is(refused!.status, 503)
  t.is(refused!.code, 'render-queue-full')
  await workers.close()
  await t.throwsAsync(busy, { instanceOf: HarmonyError, message: /closed/ })
  await t.throwsAsync(waiting, { instanceOf: HarmonyError, message: /closed/ })
  await t.throwsAsync(workers.render('chat', CHAT), { instanceOf: HarmonyError, message: /closed/ })
  t.throws(() => new RenderWorkers({ sise: 2 } as never), { instanceOf: TypeError, message: /did you mean 'size'/ })
  t.throws(() => new RenderWorkers({ renderOptions: { reasoningEfort: 'low' } as never }), {
    instanceOf: TypeError,
    message: /reasoningEffort/,
  })
  t.throws(() => new RenderWorkers({ renderOptions: { cache: null } as never }), { instanceOf: TypeError, message: /cache/ })
})
