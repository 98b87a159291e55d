/**
 * Chat Completions (`POST /v1/chat/completions`) as a face of the one pipeline. A request answering tool calls
 * this gateway returned is prompted with the ids the engine saw and generated (the call id cache, where it holds
 * them and the check holds), else with its re-render; after a completion that ended with tool calls, the cache
 * keeps what the next such request needs.
 */
import type { IncomingMessage } from 'node:http'

import { isRecord } from '../../base/records'
import { chatFrames } from '../../http/sse'
import { chatGenerationParameters, type GenerationParameters } from '../../http/validate'
import { nowSeconds, randomId } from '../../wire/adapter'
import {
  type ChatAdapterOptions,
  type ChatCompletion,
  ChatCompletionsStream,
  chatChoices,
  chatCompletion,
  chatUsageChunk,
} from '../../wire/chat'
import { type CallingFace, mayEndWithCalls, promptAnswering, rememberCalls } from '../pipeline/answering-calls'
import type { SentCall } from '../pipeline/call-ids'
import type { Gateway } from '../pipeline/context'
import { isContinuation } from '../pipeline/continues'
import type { Face, Feature } from '../pipeline/face'
import { type Preparing, prepareRequest } from '../pipeline/prepare'
import { type Item, type Prepared, renderHere, renderOffLoop } from '../pipeline/prepared'
import { serveFace } from '../pipeline/serve-face'

/** What Chat reads of the gateway: what every API does (the call id cache included). */
export type ChatGateway = Gateway

/** An assistant message's tool calls as Chat writes them; null where one is not a function call with string fields. */
function callsOf(message: unknown): SentCall[] | null {
  if (!isRecord(message) || !Array.isArray(message.tool_calls) || message.tool_calls.length === 0) return null
  const calls: SentCall[] = []
  for (const call of message.tool_calls) {
    const fn = isRecord(call) && isRecord(call.function) ? call.function : null
    if (fn === null || typeof call.id !== 'string' || typeof fn.name !== 'string' || typeof fn.arguments !== 'string') return null
    calls.push({ id: call.id, name: fn.name, arguments: fn.arguments })
  }
  return calls
}

/**
 * A Chat request continuing this gateway's tool calls (its messages end with `tool` results after an assistant
 * message with calls): its re-render, or the ids the engine saw and generated for it. `face`: the API the
 * request came in as (Messages is prepared as Chat).
 */
async function exactChat(
  gateway: ChatGateway,
  parameters: GenerationParameters,
  body: Item,
  face: CallingFace = 'chat',
): Promise<Prepared> {
  const render = (request: Item) => renderOffLoop(gateway, 'chat', request)
  const rendered = await render(body)
  const messages = Array.isArray(body.messages) ? body.messages : []
  let last = messages.length - 1
  while (last >= 0 && isRecord(messages[last]) && (messages[last] as Item).role === 'tool') last--
  const calls = last < 0 ? null : callsOf(messages[last])
  const answering =
    calls === null
      ? { prompt: rendered, noted: [] }
      : await promptAnswering(gateway, face, calls, rendered, () => render({ ...body, messages: messages.slice(0, last + 1) }))
  const { prompt, noted } = answering
  return { kind: 'chat', parameters, prompt, rendered, body, history: [], input: undefined, storing: false, noted }
}

/**
 * A parsed Chat body prepared: rendered (`offLoop`: in a worker, where there are workers), or as a continuation
 * of tool calls. `face`: the API the request came in as (Messages is prepared as Chat).
 */
export async function prepareChat(gateway: ChatGateway, body: Item, offLoop: boolean, face: CallingFace = 'chat'): Promise<Prepared> {
  const parameters = chatGenerationParameters(body, gateway.parameterOptions)
  if (gateway.callIds !== null && isContinuation('chat', body)) return exactChat(gateway, parameters, body, face)
  const prompt = offLoop ? await renderOffLoop(gateway, 'chat', body) : renderHere(gateway, 'chat', body)
  return { kind: 'chat', parameters, prompt, body, history: [], input: undefined, storing: false }
}

/** How a Chat body is prepared. */
const chatPreparing: Preparing<ChatGateway> = {
  kind: 'chat',
  parsed: (gateway, body, offLoop) => prepareChat(gateway, body, offLoop),
  continued: (gateway, parameters, body) => exactChat(gateway, parameters, body),
  keepsInput: (gateway) => gateway.callIds !== null,
  storing: () => false,
}

/** The adapter's options for a prepared Chat request; several choices (`n`) share one id and one time, as OpenAI's do. */
function chatOptions(gateway: Gateway, { parameters, prompt }: Prepared): ChatAdapterOptions {
  return {
    model: parameters.model,
    ...(parameters.n > 1 ? { id: randomId('chatcmpl-'), created: nowSeconds() } : {}),
    promptTokens: prompt.promptTokens,
    ...(parameters.stop === undefined ? {} : { stop: parameters.stop }),
    ...(prompt.responseFormat === undefined ? {} : { responseFormat: prompt.responseFormat }),
    ...(prompt.argumentSchemas === undefined ? {} : { argumentSchemas: prompt.argumentSchemas }),
    ...(prompt.functions === undefined ? {} : { tools: prompt.functions }),
    ...(parameters.logprobs === undefined ? {} : { logprobs: true }),
    parser: { implementation: gateway.implementation, toolNames: prompt.toolNames },
  }
}

const chatFace: Face<ChatGateway, ChatAdapterOptions, ChatCompletion, ChatCompletionsStream> = {
  prepare: (gateway, request: IncomingMessage) => prepareRequest(gateway, chatPreparing, request),
  options: (gateway, prepared) => chatOptions(gateway, prepared),
  stream: (options, { parameters }) => new ChatCompletionsStream({ ...options, includeUsage: parameters.includeUsage }),
  whole: (step, options) => chatCompletion(step, options),
  answer: (adapter) => adapter.completion(),
  keeps: mayEndWithCalls,
  // One choice's completion (of several: each is kept on its own, with the ids it generated, under its own
  // call ids, so that the client may go on with any of them).
  async keep(gateway, completion, prepared, generated) {
    const choice = completion.choices[0]
    const calls = choice?.finish_reason === 'tool_calls' ? callsOf(choice.message) : null
    if (calls !== null) await rememberCalls(gateway, calls, prepared, generated)
    return true
  },
  // `n`: each choice its own adapter with its own `index` (and call ids); streamed, one usage chunk at the end,
  // summed over the choices (`chatUsageChunk`), none of each adapter's own.
  choices: {
    stream: (options, _prepared, index) => new ChatCompletionsStream({ ...options, choiceIndex: index, includeUsage: false }),
    whole: (step, options, index) => chatCompletion(step, { ...options, choiceIndex: index }),
    merge: (completions) => chatChoices(completions),
    closingSse: (adapters, { parameters }) => (parameters.includeUsage ? chatFrames([chatUsageChunk(adapters)]) : ''),
  },
}

export const chatFeature: Feature<ChatGateway> = {
  routes: { '/v1/chat/completions': { POST: (gateway, request, response) => serveFace(chatFace, gateway, request, response) } },
}
