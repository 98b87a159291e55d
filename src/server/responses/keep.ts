/** Keeping a finished Responses response with every item it was generated from, and the ids a continuation needs. */

import type { ResponseObject } from '../../wire/responses'
import type { SentCall } from '../pipeline/call-ids'
import type { Gateway } from '../pipeline/context'
import type { Item, Prepared } from '../pipeline/prepared'
import type { StoredResponse } from '../stores/store'
import { callsOfItems } from './continuation'
import { inputItemsOf, storedResponse } from './conversation'

/** Every item a response was generated from: the stored history, then its own input (with ids). */
export function keptInput(object: { id: string }, prepared: Prepared): Item[] {
  return [...prepared.history, ...inputItemsOf({ input: prepared.input }, object.id.slice('resp_'.length))]
}

/** What a continuation of a response starts from: every item it was generated from, and its ids. */
export function recordOf(object: ResponseObject, prepared: Prepared, generated: number[]): StoredResponse {
  return storedResponse(object as unknown as Item & { id: string; created_at: number }, keptInput(object, prepared), {
    prompt: prepared.prompt.tokens,
    output: generated,
    ...(prepared.rendered === undefined ? {} : { rendered: prepared.rendered.tokens }),
  })
}

/** Keeps a finished response; a store that fails is logged, not fatal (false: not kept). */
export async function keepResponse(gateway: Gateway, object: ResponseObject, prepared: Prepared, generated: number[]): Promise<boolean> {
  try {
    await gateway.store?.put(recordOf(object, prepared, generated))
    return true
  } catch (error) {
    gateway.onError(error)
    return false
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
