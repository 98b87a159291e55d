/**
 * The one option kit, as users meet it: every public constructor and function that takes options refuses an
 * unknown or misspelt option (naming the closest valid one), a wrong type and a number out of range, with
 * JavaScript's TypeError / RangeError carrying code `invalid-option`; and the typed errors of the hierarchy.
 */
import { spawnSync } from 'node:child_process'
import { ServerResponse } from 'node:http'
import { Socket } from 'node:net'

import test from 'ava'
import {
  ChatCompletionsStream,
  HarmonyError,
  HarmonyRequestError,
  HarmonySetupError,
  HarmonyStreamParser,
  HarmonyStreamPool,
  HarmonyTextParser,
  renderChatCompletionRequest,
  renderConversation,
  renderForTraining,
  SsePool,
} from 'harmony-stream'
import { pipeSse, readJsonBody } from 'harmony-stream/http'

import { IMPLEMENTATIONS } from '../helpers/harmony.mjs'

type Call = (options: never) => unknown

const CHAT = { model: 'gpt-oss', messages: [{ role: 'user', content: 'hi' }] }
const CONVERSATION = [{ role: 'user', content: 'hi' }]

/** Every options-taking entry of the package's main export, with a misspelling of one real option and what it should suggest. */
const ENTRIES: { name: string; call: Call; typo: string; suggests: string }[] = [
  { name: 'HarmonyStreamParser', call: (o) => new HarmonyStreamParser(o), typo: 'Strict', suggests: 'strict' },
  { name: 'HarmonyStreamParser', call: (o) => new HarmonyStreamParser(o), typo: 'maxHeaderToken', suggests: 'maxHeaderTokens' },
  { name: 'HarmonyTextParser', call: (o) => new HarmonyTextParser(o), typo: 'detectStriped', suggests: 'detectStripped' },
  { name: 'HarmonyStreamPool', call: (o) => new HarmonyStreamPool(o), typo: 'implementaton', suggests: 'implementation' },
  { name: 'HarmonyStreamPool.open', call: (o) => new HarmonyStreamPool().open(o), typo: 'toolname', suggests: 'toolNames' },
  { name: 'SsePool', call: (o) => new SsePool(o), typo: 'Implementation', suggests: 'implementation' },
  {
    name: 'renderChatCompletionRequest',
    call: (o) => renderChatCompletionRequest(CHAT, o),
    typo: 'reasoningEfort',
    suggests: 'reasoningEffort',
  },
  { name: 'renderConversation', call: (o) => renderConversation(CONVERSATION as never, o), typo: 'keepanalysis', suggests: 'keepAnalysis' },
  {
    name: 'renderForTraining',
    call: (o) => renderForTraining(CONVERSATION as never, o),
    typo: 'prefixPreserv',
    suggests: 'prefixPreserving',
  },
]

for (const { name, call, typo, suggests } of ENTRIES) {
  test(`${name}: a misspelt option '${typo}' is a TypeError naming it and suggesting '${suggests}'`, (t) => {
    const error = t.throws(() => call({ [typo]: true } as never), { instanceOf: TypeError })
    t.is((error as TypeError & { code?: string }).code, 'invalid-option')
    t.true(error!.message.includes(`'${typo}'`), error!.message)
    t.true(error!.message.includes(`did you mean '${suggests}'?`), error!.message)
    t.true(error!.message.startsWith(`${name}: `), error!.message)
  })
}

test('options that are not an object are refused by every entry', (t) => {
  for (const { name, call } of ENTRIES) {
    for (const bad of [null, 5, 'strict', [true]]) {
      const error = t.throws(() => call(bad as never), { instanceOf: TypeError }, `${name} ${JSON.stringify(bad)}`)
      t.is((error as TypeError & { code?: string }).code, 'invalid-option')
    }
  }
})

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: wrong types are TypeErrors, numbers out of range RangeErrors, each naming the option`, (t) => {
    const wrongType = t.throws(() => new HarmonyStreamParser({ implementation, strict: 'yes' as never }), { instanceOf: TypeError })
    t.regex(wrongType!.message, /^HarmonyStreamParser: option 'strict' must be a boolean, not "yes"$/)
    const range = t.throws(() => new HarmonyStreamParser({ implementation, maxHeaderTokens: 0 }), { instanceOf: RangeError })
    t.regex(range!.message, /option 'maxHeaderTokens' must be an integer from 1 to 4294967295, not 0/)
    t.throws(() => new HarmonyStreamParser({ implementation, role: 'robot' as never }), { instanceOf: TypeError, message: /option 'role'/ })
    t.throws(() => new HarmonyStreamParser({ implementation, toolNames: ['ok', ''] }), {
      instanceOf: TypeError,
      message: /option 'toolNames'/,
    })
    // A correct spelling still works, and is honoured: strict throws where lenient recovers.
    const strict = new HarmonyStreamParser({ implementation, strict: true, role: null })
    t.throws(() => strict.push([200008]), { instanceOf: HarmonyError })
  })
}

test('a pool stream cannot pick its own implementation: the option belongs to the pool', (t) => {
  t.throws(() => new HarmonyStreamPool().open({ implementation: 'js' } as never), {
    instanceOf: TypeError,
    message: /pool's implementation/,
  })
})

test('a word nothing like any option gets no suggestion, but the list of options', (t) => {
  const error = t.throws(() => new HarmonyStreamParser({ zzzzzzzz: 1 } as never), { instanceOf: TypeError })
  t.false(error!.message.includes('did you mean'))
  t.regex(error!.message, /the options are role, strict, maxHeaderTokens, toolNames, implementation/)
})

test('the HTTP helpers check their options the same way', async (t) => {
  const request = Object.assign(new Socket(), { headers: { 'content-type': 'application/json' } })
  await t.throwsAsync(readJsonBody(request as never, { limits: 10 } as never), { instanceOf: TypeError, message: /did you mean 'limit'\?/ })
  await t.throwsAsync(readJsonBody(request as never, { limit: -1 }), { instanceOf: RangeError, message: /option 'limit'/ })
  const response = new ServerResponse({ method: 'POST' } as never)
  const chat = new ChatCompletionsStream({ model: 'm' })
  const steps = (async function* () {})()
  await t.throwsAsync(pipeSse(response, chat, steps, { coalesceMS: 5 } as never), {
    instanceOf: TypeError,
    message: /did you mean 'coalesceMs'\?/,
  })
  await t.throwsAsync(pipeSse(response, chat, steps, { frames: 'bytes' } as never), { instanceOf: TypeError, message: /option 'frames'/ })
})

test('request errors carry their stable code in the OpenAI error body', (t) => {
  const error = t.throws(() => renderChatCompletionRequest({ model: 'm', messages: [{ role: 'robot', content: 'x' }] }), {
    instanceOf: HarmonyRequestError,
  })
  t.is(error!.code, 'invalid-request')
  // On the wire, OpenAI's snake_case.
  t.is(error!.toOpenAIError().error.code, 'invalid_request')
  t.true(error instanceof HarmonyError)
})

test('a bad HARMONY_STREAM_IMPL is a HarmonySetupError with code invalid-environment', (t) => {
  const script = "try { require('harmony-stream') } catch (e) { console.log(JSON.stringify({ name: e.name, code: e.code })) }"
  const run = spawnSync(process.execPath, ['-e', script], { env: { ...process.env, HARMONY_STREAM_IMPL: 'wasm' }, encoding: 'utf8' })
  t.deepEqual(JSON.parse(run.stdout), { name: 'HarmonySetupError', code: 'invalid-environment' })
  t.is(HarmonySetupError.name, 'HarmonySetupError')
})

test('the engines, the render workers, the compactor and the gateway refuse bad options with the same code', async (t) => {
  const { createEngine, ReplayEngine } = await import('harmony-stream/engines')
  const { RenderCache } = await import('harmony-stream')
  const { Compactor, RenderWorkers } = await import('harmony-stream/server')
  const { createGateway } = await import('harmony-stream/server')
  const refusals: [string, () => unknown][] = [
    ['vllm url', () => createEngine('vllm', { url: 'ftp://127.0.0.1' })],
    ['vllm api', () => createEngine('vllm', { url: 'http://127.0.0.1:1', api: 'chat' as never })],
    ['trtllm model', () => createEngine('trtllm', { url: 'http://127.0.0.1:1' } as never)],
    ['sglang timeout', () => createEngine('sglang', { url: 'http://127.0.0.1:1', readTimeoutMs: -1 })],
    ['unknown engine', () => createEngine('ollama' as never, { url: 'http://127.0.0.1:1' } as never)],
    ['replay completions', () => new ReplayEngine({ completions: [] })],
    ['compactor key', () => new Compactor({ key: 'short' })],
    ['render cache', () => new RenderCache(7 as never)],
    ['gateway engine', () => createGateway({})],
  ]
  for (const [name, refuse] of refusals) {
    const error = t.throws(refuse, undefined, name)
    t.true(error instanceof TypeError || error instanceof RangeError, name)
    t.is((error as { code?: string }).code, 'invalid-option', name)
  }
  const workers = new RenderWorkers({ size: 1 })
  t.teardown(() => workers.close())
  const refused = await t.throwsAsync(workers.prepare('embeddings' as never, new Uint8Array(2)))
  t.is((refused as { code?: string }).code, 'invalid-option')
})
