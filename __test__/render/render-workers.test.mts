/**
 * RenderWorkers: the same prompts as the synchronous renderers, rendered in worker threads so the event loop
 * goes on while a large request is encoded; the same typed request errors; a bounded queue; a clean close.
 */
import test from 'ava'
import {
  HarmonyError,
  HarmonyRequestError,
  renderChatCompletionRequest,
  renderResponsesRequest,
  responsesRequestEcho,
} from 'harmony-stream'
import { chatGenerationParameters, HttpError, responsesGenerationParameters } from 'harmony-stream/http'
import { RenderWorkers } from 'harmony-stream/server'

import { IMPLEMENTATIONS } from '../helpers/harmony.mjs'

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

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: prepare parses, checks and renders a body's bytes in a worker, as the event loop would`, async (t) => {
    const renderOptions = { implementation, currentDate: '2026-01-01' } as const
    const workers = new RenderWorkers({ size: 1, renderOptions, parameterOptions: { maxModelLength: 8 } })
    t.teardown(() => workers.close())
    for (const [kind, body, parameters] of [
      ['chat', { ...CHAT, max_tokens: 7, temperature: 0.5, stream: true }, chatGenerationParameters],
      ['responses', { ...RESPONSES, max_output_tokens: 9, metadata: { team: 'a' }, temperature: 0.3 }, responsesGenerationParameters],
    ] as const) {
      // A large body owns its memory and is transferred (detached here); a small one is a slice of Node's pool and copied.
      for (const bytes of [
        Buffer.from(JSON.stringify(body)),
        Buffer.from(JSON.stringify({ ...body, metadata: { note: 'word '.repeat(4000) } })),
      ]) {
        const owned = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
        const bytesText = bytes.toString('utf8')
        const prepared = await workers.prepare(kind, bytes)
        t.deepEqual(prepared.parameters, parameters(body))
        const render = kind === 'chat' ? renderChatCompletionRequest : renderResponsesRequest
        t.deepEqual(prepared.prompt, render(body, { ...renderOptions, cache: null }))
        // Responses: what the response object echoes of the body, which stays in the worker.
        t.deepEqual(prepared.echo, kind === 'responses' ? responsesRequestEcho(JSON.parse(bytesText)) : undefined)
        t.is(bytes.byteLength === 0, owned, 'transferred exactly when the bytes own their memory')
      }
    }
    const refused = async (bytes: string, type: typeof HttpError | typeof HarmonyRequestError, code: string, param: string | null) => {
      const error = (await t.throwsAsync(workers.prepare('chat', Buffer.from(bytes)))) as HttpError | HarmonyRequestError
      t.true(error instanceof type, bytes.slice(0, 40))
      t.is(error?.code, code, bytes.slice(0, 40))
      t.is((error as HttpError).param, param)
      if (type === HttpError) t.is((error as HttpError).status, 400)
    }
    await refused('{"model": "m", "messages": [', HttpError, 'invalid-json', null)
    await refused('[1, 2]', HttpError, 'invalid-json', null)
    await refused('{"model": "a-much-too-long-name", "messages": []}', HttpError, 'invalid-parameter', 'model')
    await refused('{"model": "m", "temperature": "hot", "messages": []}', HttpError, 'invalid-parameter', 'temperature')
    await refused(
      JSON.stringify({ model: 'm', messages: [{ role: 'tool', tool_call_id: 'x', content: 'y' }] }),
      HarmonyRequestError,
      'invalid-request',
      'messages[0].tool_call_id',
    )
    await t.throwsAsync(workers.prepare('chat', 'not bytes' as never), { instanceOf: TypeError })
    // The worker serves on after every refusal.
    t.is((await workers.prepare('chat', Buffer.from(JSON.stringify(CHAT)))).parameters.model, 'm')
  })
}
