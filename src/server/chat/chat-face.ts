/**
 * Chat Completions (`POST /v1/chat/completions`) as a face of the one pipeline. With a `ChatIdCache`, a request
 * answering tool calls this gateway returned is prompted with the ids the engine saw and generated (where the
 * cache has them and the check holds), else with its re-render; after a completion that ended with tool calls,
 * the cache keeps what the next such request needs.
 */
import type { IncomingMessage } from 'node:http'

import type { GenerationParameters } from '../../http/validate'
import { chatGenerationParameters } from '../../http/validate'
import { type ChatAdapterOptions, type ChatCompletion, ChatCompletionsStream, chatCompletion } from '../../wire/chat'
import type { Gateway } from '../pipeline/context'
import { isContinuation } from '../pipeline/continues'
import type { Face, Feature } from '../pipeline/face'
import { type Preparing, prepareRequest } from '../pipeline/prepare'
import { type Item, type Prepared, renderHere, renderOffLoop } from '../pipeline/prepared'
import { serveFace } from '../pipeline/serve-face'
import type { ChatIdCache } from './id-cache'

/** What Chat reads of the gateway beyond what every API does. */
export interface ChatGateway extends Gateway {
  /** Prompts a request answering this gateway's tool calls with the engine's own ids; null: off. */
  chatIdCache: ChatIdCache | null
}

/** A Chat request continuing this gateway's tool calls: its re-render, or the ids the engine saw and generated for it. */
async function exactChat(gateway: ChatGateway, parameters: GenerationParameters, body: Item): Promise<Prepared> {
  const render = (request: Item) => renderOffLoop(gateway, 'chat', request)
  const rendered = await render(body)
  const exact = (await gateway.chatIdCache?.exactPrompt(body, rendered, render)) ?? null
  return { kind: 'chat', parameters, prompt: exact ?? rendered, rendered, body, history: [], input: undefined, storing: false }
}

/** How a Chat body is prepared (also the Chat request another API's request is translated into). */
export const chatPreparing: Preparing<ChatGateway> = {
  kind: 'chat',
  async parsed(gateway, body, offLoop) {
    const parameters = chatGenerationParameters(body, gateway.parameterOptions)
    if (gateway.chatIdCache !== null && isContinuation('chat', body)) return exactChat(gateway, parameters, body)
    const prompt = offLoop ? await renderOffLoop(gateway, 'chat', body) : renderHere(gateway, 'chat', body)
    return { kind: 'chat', parameters, prompt, body, history: [], input: undefined, storing: false }
  },
  continued: (gateway, parameters, body) => exactChat(gateway, parameters, body),
  keepsInput: (gateway) => gateway.chatIdCache !== null,
  storing: () => false,
}

/**
 * What the id cache keeps of an assistant message that ended with tool calls (`message` as Chat writes it, its
 * calls as the next request sends them back), with the ids the engine saw and generated; a failure is logged.
 */
export async function rememberCalls(gateway: ChatGateway, message: object, prepared: Prepared, generated: number[]): Promise<boolean> {
  try {
    if (gateway.chatIdCache === null) return true
    await gateway.chatIdCache.remember(message, {
      prompt: prepared.prompt.tokens,
      output: generated,
      ...(prepared.rendered === undefined ? {} : { rendered: prepared.rendered.tokens }),
    })
  } catch (error) {
    gateway.onError(error)
  }
  // What the cache could not keep costs the next request its exact prompt, never its answer.
  return true
}

/** The adapter's options for a prepared Chat request. */
function chatOptions(gateway: Gateway, { parameters, prompt }: Prepared): ChatAdapterOptions {
  return {
    model: parameters.model,
    promptTokens: prompt.promptTokens,
    ...(parameters.stop === undefined ? {} : { stop: parameters.stop }),
    ...(prompt.responseFormat === undefined ? {} : { responseFormat: prompt.responseFormat }),
    ...(prompt.argumentSchemas === undefined ? {} : { argumentSchemas: prompt.argumentSchemas }),
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
  keeps: (gateway) => gateway.chatIdCache !== null,
  async keep(gateway, completion, prepared, generated) {
    const choice = completion.choices[0]
    return choice?.finish_reason === 'tool_calls' ? rememberCalls(gateway, choice.message, prepared, generated) : true
  },
}

export const chatFeature: Feature<ChatGateway> = {
  routes: { '/v1/chat/completions': { POST: (gateway, request, response) => serveFace(chatFace, gateway, request, response) } },
}
