/**
 * Exact prompts for Chat Completions (opt-in). Chat is stateless: a client in a tool loop sends back the
 * assistant message the gateway returned, then the tools' results. This cache remembers, under the id of that
 * message's first tool call, the ids the engine saw and generated for it; the next request's prompt can then
 * be those ids and the results' tokens (`exactPrompt`, checked the same way as for Responses) instead of a
 * re-render, which would differ wherever the model wrote a header otherwise than the reference renders it.
 *
 * Kept in memory, bounded like `MemoryResponseStore` (which holds the records), an hour by default.
 */
import { isRecord } from '../../base/records'
import type { RenderedPrompt } from '../../render/index'

import { exactPrompt } from '../pipeline/exact-prompt'
import { type EvictingStoreBounds, MemoryResponseStore } from '../stores/store'

type Json = Record<string, unknown>

/** A tool call as Chat writes it, reduced to what must match: id, name, arguments. */
function callsOf(message: unknown): { id: unknown; name: unknown; arguments: unknown }[] | null {
  if (!isRecord(message) || !Array.isArray(message.tool_calls) || message.tool_calls.length === 0) return null
  return message.tool_calls.map((call) => {
    const fn = isRecord(call) && isRecord(call.function) ? call.function : {}
    return { id: isRecord(call) ? call.id : undefined, name: fn.name, arguments: fn.arguments }
  })
}

export class ChatIdCache {
  private readonly records: MemoryResponseStore

  constructor(bounds: EvictingStoreBounds = {}) {
    this.records = new MemoryResponseStore({ ttlSeconds: 3600, ...bounds })
  }

  /**
   * After a completion that ended with tool calls (`message`, as returned): the prompt the engine saw, the ids it
   * generated, and the prompt's re-render where the prompt was itself exact.
   */
  async remember(
    message: unknown,
    ids: { prompt: ArrayLike<number>; output: ArrayLike<number>; rendered?: ArrayLike<number> },
  ): Promise<void> {
    const calls = callsOf(message)
    if (calls === null || typeof calls[0]!.id !== 'string') return
    const rendered = ids.rendered === undefined ? {} : { renderedPromptTokens: Array.from(ids.rendered) }
    await this.records.put({
      id: calls[0]!.id as string,
      createdAt: Math.floor(Date.now() / 1000),
      response: { calls },
      input: [],
      promptTokens: Array.from(ids.prompt),
      outputTokens: Array.from(ids.output),
      ...rendered,
    })
  }

  /**
   * The exact prompt of a Chat request whose messages end with an assistant message this cache remembers (its
   * tool calls as returned: ids, names, arguments) followed only by `tool` messages answering them; null
   * otherwise. `rendered`: the request's re-render; `render`: renders a body (for the one without the results).
   */
  async exactPrompt(
    body: Json,
    rendered: RenderedPrompt,
    render: (body: Json) => RenderedPrompt | Promise<RenderedPrompt>,
  ): Promise<RenderedPrompt | null> {
    const messages = Array.isArray(body.messages) ? body.messages : []
    let last = messages.length - 1
    while (last >= 0 && isRecord(messages[last]) && (messages[last] as Json).role === 'tool') last--
    if (last === messages.length - 1 || last < 0) return null
    const calls = callsOf(messages[last])
    if (calls === null || typeof calls[0]!.id !== 'string') return null
    const record = await this.records.get(calls[0]!.id as string)
    if (record === null || JSON.stringify(record.response.calls) !== JSON.stringify(calls)) return null
    return exactPrompt(record, rendered, () => render({ ...body, messages: messages.slice(0, last + 1) }))
  }

  close(): Promise<void> {
    return this.records.close()
  }
}
