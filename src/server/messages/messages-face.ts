/**
 * Anthropic's Messages API: `POST /v1/messages` (a message, streamed or whole) and `POST
 * /v1/messages/count_tokens`. A Messages request is read as the Chat request it means (render/messages.ts) and
 * prepared the Chat way (the Chat id cache for exact continuations); its answer comes from the Messages adapter
 * (wire/messages.ts). Its routes answer errors in Anthropic's shape, carry its `request-id`, and `/v1/models`
 * answers its clients in their list's shape.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'

import { parseJsonBody, readJsonBytes } from '../../http/body'
import { errorResponse } from '../../http/errors'
import { checkRequestFields, type RequestFields } from '../../http/fields'
import {
  type AnthropicMessage,
  AnthropicMessagesStream,
  anthropicAnswer,
  anthropicMessage,
  type MessagesAdapterOptions,
} from '../../wire/messages'
import { type ChatGateway, prepareChat } from '../chat/chat-face'
import { mayEndWithCalls, rememberCalls } from '../pipeline/answering-calls'
import type { Face, Feature } from '../pipeline/face'
import { withCheckableSchemas } from '../pipeline/prepare'
import { type Item, type Prepared, renderOffLoop } from '../pipeline/prepared'
import { sendJson } from '../pipeline/send'
import { serveFace } from '../pipeline/serve-face'
import { reasoningSealer } from '../responses/sealed-reasoning'
import { COUNT_TOKENS_REQUEST_FIELDS, MESSAGES_REQUEST_FIELDS } from './fields'
import { openThinking } from './thinking'
import { messagesAsChat, withMessagesRequest } from './translate'

/** A request's body, its fields checked against `fields` (a 400 naming the first that is refused). */
async function readBody(gateway: ChatGateway, request: IncomingMessage, fields: RequestFields): Promise<{ body: Item; bytes: number }> {
  const bytes = await readJsonBytes(request, { limit: gateway.bodyLimit })
  const body = parseJsonBody(bytes)
  checkRequestFields(fields, body, gateway.parameterOptions.unknownFields)
  return { body, bytes: bytes.length }
}

/** Opens the thinking blocks this gateway signed (for the caller's key), once the body is within its bounds. */
function opener(gateway: ChatGateway): (body: Item) => Item {
  return (body) => openThinking(gateway.sealer, body, gateway.caller?.name ?? null)
}

async function prepareMessages(gateway: ChatGateway, request: IncomingMessage): Promise<Prepared> {
  const { body, bytes } = await readBody(gateway, request, MESSAGES_REQUEST_FIELDS)
  const translated = messagesAsChat(body, gateway.renderOptions, false, opener(gateway))
  const prepared = withCheckableSchemas(await prepareChat(gateway, translated.chat, bytes > gateway.renderInlineBytes, 'messages'))
  prepared.prompt = withMessagesRequest(prepared.prompt, translated)
  return prepared
}

const messagesFace: Face<ChatGateway, MessagesAdapterOptions, AnthropicMessage, AnthropicMessagesStream> = {
  prepare: prepareMessages,
  options(gateway, { parameters, prompt }) {
    const seal = reasoningSealer(gateway)
    return {
      model: parameters.model,
      id: `msg_${randomUUID().replaceAll('-', '')}`,
      inputTokens: prompt.promptTokens,
      ...(parameters.stop === undefined ? {} : { stop: parameters.stop }),
      ...(prompt.responseFormat === undefined ? {} : { responseFormat: prompt.responseFormat }),
      ...(prompt.argumentSchemas === undefined ? {} : { argumentSchemas: prompt.argumentSchemas }),
      ...(prompt.functions === undefined ? {} : { tools: prompt.functions }),
      ...(prompt.thinkingDisplay === undefined ? {} : { thinkingDisplay: prompt.thinkingDisplay }),
      // The thinking's text sealed with the gateway's key: a client shown it `omitted` sends it back with its text.
      signThinking: (text) => seal(text) ?? '',
      parser: { implementation: gateway.implementation, toolNames: prompt.toolNames },
    }
  },
  stream: (options) => new AnthropicMessagesStream(options),
  whole: (step, options) => anthropicMessage(step, options),
  answer: (adapter) => adapter.message(),
  keeps: mayEndWithCalls,
  /**
   * After a message that ended with tool calls: its ids, under the calls as the next request brings them back
   * (each `tool_use.input` as the Chat request of that request writes it: `JSON.stringify`).
   */
  async keep(gateway, message, prepared, generated) {
    if (message.stop_reason !== 'tool_use') return true
    const calls = message.content.flatMap((block) =>
      block.type === 'tool_use' ? [{ id: block.id, name: block.name, arguments: JSON.stringify(block.input) }] : [],
    )
    await rememberCalls(gateway, calls, prepared, generated)
    return true
  },
}

/** `POST /v1/messages/count_tokens`: the prompt the request would render, counted (`{ input_tokens }`). */
async function countMessageTokens(gateway: ChatGateway, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const { body } = await readBody(gateway, request, COUNT_TOKENS_REQUEST_FIELDS)
  const { chat } = messagesAsChat(body, gateway.renderOptions, true, opener(gateway))
  const prompt = await renderOffLoop(gateway, 'chat', chat)
  sendJson(response, 200, { input_tokens: prompt.promptTokens })
}

export const messagesFeature: Feature<ChatGateway> = {
  routes: {
    '/v1/messages': { POST: (gateway, request, response) => serveFace(messagesFace, gateway, request, response) },
    '/v1/messages/count_tokens': { POST: countMessageTokens },
  },
  errorShape: (error) => anthropicAnswer(errorResponse(error)),
  // Claude Code's ANTHROPIC_BASE_URL is the root: it adds /v1/messages itself.
  rootClients: "Anthropic's clients",
  /**
   * Anthropic's clients read `request-id` from every answer of these routes (a refusal of the key too): the request
   * log's id where there is one, else a new one.
   */
  begin(response) {
    const id = response.getHeader('x-request-id')
    response.setHeader('request-id', typeof id === 'string' ? id : `req_${randomUUID().replaceAll('-', '')}`)
  },
  // Anthropic's clients send their API version: they get their list's shape.
  models: (request, model, created) =>
    request.headers['anthropic-version'] === undefined
      ? null
      : {
          data: [{ type: 'model', id: model, display_name: model, created_at: new Date(created * 1000).toISOString() }],
          has_more: false,
          first_id: model,
          last_id: model,
        },
}
