/**
 * The Conversations API with the clients that use it, as they run: OpenAI's Python client (in the project's
 * `.venv`, a child process) once through; the OpenAI Agents SDK's `OpenAIConversationsSession` (its memory: the
 * conversation's items listed before each turn, the turn's items added after it) for two turns; and an Agents SDK
 * run whose conversation the gateway keeps (`conversationId`: each request names the conversation and sends only
 * what is new), whose tool turn is prompted with the ids the engine saw and generated.
 */
import { spawn } from 'node:child_process'
import { join } from 'node:path'

import { Agent, OpenAIConversationsSession, OpenAIProvider, Runner, setTracingDisabled, tool } from '@openai/agents'
import test from 'ava'
import type OpenAI from 'openai'
import { z } from 'zod'

import { childOutput } from '../helpers/child-output.mjs'
import { recordingEngine, startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { decodeTokens } from '../helpers/token-bytes.mjs'

const PYTHON = join(import.meta.dirname, '..', '..', '.venv', 'bin', 'python')
const final = (text: string) => harmony(`<|channel|>final<|message|>${text}<|return|>`)
/** A call whose header the model wrote otherwise than the reference renders it (recipient first, ` json`). */
const OFF_FORM_CALL = harmony(' to=functions.get_weather<|channel|>commentary json<|message|>{"city":"Paris"}<|call|>')

setTracingDisabled(true)

/** An Agents SDK runner on the gateway's openai client (no global client set). */
const runnerOn = (client: OpenAI) => new Runner({ modelProvider: new OpenAIProvider({ openAIClient: client as never }) })

/** The items of a conversation, oldest first, as type and text. */
async function itemsOf(client: OpenAI, id: string): Promise<string[]> {
  const items: string[] = []
  for await (const item of client.conversations.items.list(id, { order: 'asc' })) {
    const content = 'content' in item && Array.isArray(item.content) ? (item.content[0] as { text?: string } | undefined) : undefined
    items.push(content?.text === undefined ? item.type : `${'role' in item ? item.role : item.type}: ${content.text}`)
  }
  return items
}

test('OpenAI Python: a conversation made, continued, listed, changed and deleted', async (t) => {
  const { engine, prompts } = recordingEngine([
    harmony('<|channel|>analysis<|message|>Paris is in France.<|end|><|start|>assistant<|channel|>final<|message|>France.<|return|>'),
  ])
  const { client } = await startGateway(t, { engine })
  const child = spawn(PYTHON, [join(import.meta.dirname, '..', 'helpers', 'python_conversations.py'), client.baseURL], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const { code, stdout, stderr } = await childOutput(child)
  t.is(code, 0, stderr.slice(-2000))
  t.deepEqual(JSON.parse(stdout), {
    created: ['conversation', true, { topic: 'travel' }],
    response: [true, 'France.'],
    items: [
      ['message', 'user'],
      ['message', 'user'],
      ['reasoning', null],
      ['message', 'assistant'],
    ],
    sealed: [true],
    newest: [1, true, true, 'France.'],
    added: [1, 'completed', true],
    updated: { topic: 'geography' },
    deleted: ['conversation.deleted', true, true],
    gone: 404,
  })
  t.regex(decodeTokens(prompts[0]!), /I am in Paris\.<\|end\|><\|start\|>user<\|message\|>Which country\?/)
})

test('OpenAI Agents SDK: OpenAIConversationsSession keeps two turns in a conversation of the gateway', async (t) => {
  const { engine, prompts } = recordingEngine([final('Paris.'), final('Rome.')])
  const { client } = await startGateway(t, { engine })
  const runner = runnerOn(client)
  const session = new OpenAIConversationsSession({ client: client as never })
  const agent = new Agent({ name: 'Assistant', instructions: 'Be brief.', model: 'gpt-oss' })
  t.is((await runner.run(agent, 'Capital of France?', { session })).finalOutput, 'Paris.')
  t.is((await runner.run(agent, 'And of Italy?', { session })).finalOutput, 'Rome.')
  const id = await session.getSessionId()
  t.regex(id!, /^conv_/)
  t.deepEqual(await itemsOf(client, id!), ['user: Capital of France?', 'assistant: Paris.', 'user: And of Italy?', 'assistant: Rome.'])
  // The second turn was prompted with the first, as the session read it back from the gateway.
  t.regex(
    decodeTokens(prompts[1]!),
    /Capital of France\?<\|end\|><\|start\|>assistant<\|channel\|>final<\|message\|>Paris\..*And of Italy\?/s,
  )
  // Its session ends with its conversation.
  await session.clearSession()
  const gone = await client.conversations.retrieve(id!).then(
    () => 200,
    (error: { status: number }) => error.status,
  )
  t.is(gone, 404)
})

test('OpenAI Agents SDK: a run in a conversation the gateway keeps; its tool turn is the ids the engine saw and generated', async (t) => {
  const { engine, prompts } = recordingEngine([OFF_FORM_CALL, final('Sunny in Paris.')])
  const { client } = await startGateway(t, { engine })
  const conversation = await client.conversations.create()
  const cities: string[] = []
  const getWeather = tool({
    name: 'get_weather',
    description: 'The weather in a city now.',
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      cities.push(city)
      return 'sunny'
    },
  })
  const agent = new Agent({ name: 'Assistant', instructions: 'Be brief.', model: 'gpt-oss', tools: [getWeather] })
  const result = await runnerOn(client).run(agent, 'Weather in Paris?', { conversationId: conversation.id })
  t.is(result.finalOutput, 'Sunny in Paris.')
  t.deepEqual(cities, ['Paris'])
  t.deepEqual(prompts[1]!.slice(0, prompts[0]!.length + OFF_FORM_CALL.length), [...prompts[0]!, ...OFF_FORM_CALL])
  t.regex(
    decodeTokens(prompts[1]!.slice(prompts[0]!.length + OFF_FORM_CALL.length)),
    /^<\|start\|>functions\.get_weather to=assistant.*sunny/s,
  )
  t.deepEqual(await itemsOf(client, conversation.id), [
    'user: Weather in Paris?',
    'function_call',
    'function_call_output',
    'assistant: Sunny in Paris.',
  ])
})
