/**
 * Keeping a finished Responses response with every item it was generated from, and the ids a continuation needs;
 * adding its items to the conversation it names.
 */

import type { ResponseObject } from '../../wire/responses'
import type { SentCall } from '../pipeline/call-ids'
import type { Gateway } from '../pipeline/context'
import type { Item, Prepared } from '../pipeline/prepared'
import type { StoredResponse } from '../stores/store'
import { callsOfItems } from './continuation'
import { inputItemsOf, keptLineage, storedResponse } from './conversation'
import { changeConversation, conversationItem, withItems } from './conversation-store'

/** Every item a response was generated from: the stored history, then its own input (with ids). */
function keptInput(object: { id: string }, prepared: Prepared): Item[] {
  return [...prepared.history, ...inputItemsOf({ input: prepared.input }, object.id.slice('resp_'.length))]
}

/**
 * The record of response `object`: every item it was generated from, whose each is (its history's, then its own:
 * what a deletion takes out of it, conversation.ts `withoutDeleted`), and `tokens`.
 */
export function keptRecord(object: object, prepared: Prepared, tokens: Parameters<typeof storedResponse>[2]): StoredResponse {
  const response = object as Item & { id: string; created_at: number }
  const input = keptInput(response, prepared)
  const lineage = keptLineage(response.id, prepared.lineage, input.length - prepared.history.length)
  return { ...storedResponse(response, input, tokens), lineage }
}

/** What a continuation of a response starts from: every item it was generated from, and its ids. */
export function recordOf(object: ResponseObject, prepared: Prepared, generated: number[]): StoredResponse {
  return keptRecord(object, prepared, {
    prompt: prepared.prompt.tokens,
    output: generated,
    ...(prepared.rendered === undefined ? {} : { rendered: prepared.rendered.tokens }),
  })
}

/** Keeps a finished response; a store that fails is logged, not fatal (false: not kept). */
async function keepResponse(gateway: Gateway, object: ResponseObject, prepared: Prepared, generated: number[]): Promise<boolean> {
  try {
    await gateway.store?.put(recordOf(object, prepared, generated))
    return true
  } catch (error) {
    gateway.onError(error)
    return false
  }
}

/**
 * Keeps a finished response where it is to be kept (`store`), and adds its items to the conversation it names;
 * false: the store could not keep the response.
 */
export async function keepAnswer(gateway: Gateway, object: ResponseObject, prepared: Prepared, generated: number[]): Promise<boolean> {
  const kept = prepared.storing ? await keepResponse(gateway, object, prepared, generated) : true
  await addToConversation(gateway, object, prepared, generated)
  return kept
}

/**
 * After a response that names a conversation: the request's input items, then the response's output items, are
 * the conversation's next items (OpenAI's `conversation`: "Input items and output items from this response are
 * automatically added to this conversation after this response completes", the `openai` package's
 * ResponseCreateParams). A response that failed or was cancelled adds nothing, so that the client can send the
 * same input again. Where nothing changed the conversation since the request read it, the ids the engine saw and
 * generated are kept with it, for the next request within the turn. A store that fails, or a conversation grown
 * past the store's largest record, is logged: the response stands.
 */
async function addToConversation(gateway: Gateway, object: ResponseObject, prepared: Prepared, generated: number[]): Promise<void> {
  const { conversation } = prepared
  if (conversation === undefined || gateway.store === null) return
  if (object.status !== 'completed' && object.status !== 'incomplete') return
  const added = [
    ...inputItemsOf({ input: prepared.input }, object.id.slice('resp_'.length)),
    ...(JSON.parse(JSON.stringify(object.output)) as Item[]),
  ].map(conversationItem)
  const { prompt, rendered } = prepared
  const ids = {
    promptTokens: Array.from(prompt.tokens),
    outputTokens: [...generated],
    // Kept only where the prompt was made of earlier ids: the re-render the next request's must continue.
    ...(rendered === undefined || rendered === prompt ? {} : { renderedPromptTokens: Array.from(rendered.tokens) }),
  }
  try {
    await changeConversation(gateway.store, conversation.id, (now) =>
      withItems(now, [...now.items, ...added], now.revision === conversation.revision ? ids : null),
    )
  } catch (error) {
    gateway.onError(error)
  }
}

/**
 * The function calls a finished response ends with, as its client sends them back (the call id cache's key);
 * none where it ended otherwise (an answer, a cut, a failure).
 */
export function endingCalls(object: ResponseObject): SentCall[] {
  if (object.status !== 'completed') return []
  let start = object.output.length
  while (start > 0 && object.output[start - 1]!.type === 'function_call') start--
  return callsOfItems(object.output.slice(start) as unknown as Item[]) ?? []
}
