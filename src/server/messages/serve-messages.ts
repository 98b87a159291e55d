/**
 * Anthropic's Messages API: `POST /v1/messages` (a message, streamed or whole) and `POST
 * /v1/messages/count_tokens`. A Messages request is read as the Chat request it means (render/messages.ts) and
 * goes the Chat way (prepare → generate, the Chat id cache for exact continuations); its answer comes from the
 * Messages adapter (wire/messages.ts). Errors answer in Anthropic's shape (`sendError`, on these routes).
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { parseJsonBody, readJsonBytes } from '../../http/body'
import { checkRequestFields } from '../../http/fields'
import { pipeSse } from '../../http/sse'
import { messagesAsChat, withMessagesRequest } from '../../render/index'
import { type AnthropicMessage, AnthropicMessagesStream, anthropicMessage, type MessagesAdapterOptions } from '../../wire/messages'
import { rememberCalls } from '../chat/exact-tool-loop'
import { inSpan } from '../observe/tracing'
import type { Gateway } from '../pipeline/context'
import { admit, generate } from '../pipeline/generate'
import { prepareBody } from '../pipeline/prepare'
import { type Item, type Prepared, renderOffLoop } from '../pipeline/prepared'
import { abortOnClose, collectAnswer, reasoningSealer, report, reportNotApplied, withoutDiagnostics } from '../pipeline/respond'
import { sendJson } from '../pipeline/send'
import { openThinking } from '../responses/sealed-reasoning'

/** A request's body, its fields checked against the table of `api` (a 400 naming the first that is refused). */
async function readBody(
  gateway: Gateway,
  request: IncomingMessage,
  api: 'messages' | 'count_tokens',
): Promise<{ body: Item; bytes: number }> {
  const bytes = await readJsonBytes(request, { limit: gateway.bodyLimit })
  const body = parseJsonBody(bytes)
  checkRequestFields(api, body, gateway.parameterOptions.unknownFields)
  return { body, bytes: bytes.length }
}

/**
 * Anthropic's clients read `request-id` from every answer of these routes (a refusal of the key too): the request
 * log's id where there is one, else a new one. Set by the routes before anything else answers.
 */
export function answerRequestId(response: ServerResponse): void {
  const id = response.getHeader('x-request-id')
  response.setHeader('request-id', typeof id === 'string' ? id : `req_${randomUUID().replaceAll('-', '')}`)
}

/** `POST /v1/messages`: request → the Chat request it means → engine → the Messages adapter → SSE or one message. */
export async function serveMessages(gateway: Gateway, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const prepared = await inSpan('prepare', () => prepareMessages(gateway, request))
  reportNotApplied(gateway, prepared, response)
  const { parameters, prompt } = prepared
  const seal = reasoningSealer(gateway)
  const options: MessagesAdapterOptions = {
    model: parameters.model,
    id: `msg_${randomUUID().replaceAll('-', '')}`,
    inputTokens: prompt.promptTokens,
    ...(parameters.stop === undefined ? {} : { stop: parameters.stop }),
    ...(prompt.responseFormat === undefined ? {} : { responseFormat: prompt.responseFormat }),
    ...(prompt.argumentSchemas === undefined ? {} : { argumentSchemas: prompt.argumentSchemas }),
    ...(prompt.thinkingDisplay === undefined ? {} : { thinkingDisplay: prompt.thinkingDisplay }),
    // The thinking's text sealed with the gateway's key: a client shown it `omitted` sends it back with its text.
    signThinking: (text) => seal(text) ?? '',
    parser: { implementation: gateway.implementation, toolNames: prompt.toolNames },
  }
  const abort = abortOnClose(response)
  const generated: number[] | null = gateway.chatIdCache === null ? null : []
  const steps = generate(gateway, request, prepared, abort.signal, generated, await admit(gateway), null)
  if (!parameters.stream) {
    const whole = await collectAnswer(steps)
    const message = withoutDiagnostics(anthropicMessage(whole, options), gateway, request)
    await remember(gateway, message, prepared, generated)
    return sendJson(response, 200, message)
  }
  const adapter = new AnthropicMessagesStream(options)
  const { frames, coalesceMs } = gateway
  report(gateway, request, await pipeSse(response, adapter, steps, { abort, frames, coalesceMs }), adapter)
  await remember(gateway, adapter.message(), prepared, generated)
}

/** `POST /v1/messages/count_tokens`: the prompt the request would render, counted (`{ input_tokens }`). */
export async function countMessageTokens(gateway: Gateway, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const { body } = await readBody(gateway, request, 'count_tokens')
  const { chat } = messagesAsChat(body, gateway.renderOptions, true, opener(gateway))
  const prompt = await renderOffLoop(gateway, 'chat', chat)
  sendJson(response, 200, { input_tokens: prompt.promptTokens })
}

/** Opens the thinking blocks this gateway signed (for the caller's key), once the body is within its bounds. */
function opener(gateway: Gateway): (body: Item) => Item {
  return (body) => openThinking(gateway.compactor.sealer, body, gateway.caller?.name ?? null)
}

async function prepareMessages(gateway: Gateway, request: IncomingMessage): Promise<Prepared> {
  const { body, bytes } = await readBody(gateway, request, 'messages')
  const translated = messagesAsChat(body, gateway.renderOptions, false, opener(gateway))
  const prepared = await prepareBody(gateway, 'chat', translated.chat, null, bytes > gateway.renderInlineBytes)
  prepared.prompt = withMessagesRequest(prepared.prompt, translated)
  return prepared
}

/**
 * After a message that ended with tool calls, with a Chat id cache: its ids, under the calls as the next request
 * brings them back (each `tool_use.input` as the Chat request of that request writes it: `JSON.stringify`).
 */
async function remember(gateway: Gateway, message: AnthropicMessage, prepared: Prepared, generated: number[] | null): Promise<void> {
  if (generated === null || message.stop_reason !== 'tool_use') return
  const calls = message.content.flatMap((block) =>
    block.type === 'tool_use'
      ? [{ id: block.id, type: 'function', function: { name: block.name, arguments: JSON.stringify(block.input) } }]
      : [],
  )
  await rememberCalls(gateway, { role: 'assistant', tool_calls: calls }, prepared, generated)
}
