/**
 * The one answer to "does this request continue something the gateway holds?", asked on the event loop and in
 * the render workers alike (they must agree: a body rendered in a worker is otherwise prompted differently from
 * the same body rendered inline). It reads only the shape of a body, so it sits below every API's folder.
 *
 * - Responses: it names a stored response (`previous_response_id`) or a conversation (`conversation`), holds a compaction item or sealed
 *   reasoning, or refers to kept items (`item_reference`). Each is rendered with what it stands for, which only
 *   the gateway can find (its store, its key). Or its input ends with tool results, so it may answer tool
 *   calls this gateway returned, as Chat's may.
 * - Chat: its messages end with tool results, so it may answer tool calls this gateway returned and be
 *   prompted with the ids the engine saw and generated (the call id cache, call-ids.ts); nothing else can be.
 */
import { isRecord } from '../../base/records'

type Item = Record<string, unknown>

/** Whether some item of a Responses body's input passes `test`. */
const inputHolds = (body: Item, test: (item: unknown) => boolean) => Array.isArray(body.input) && body.input.some(test)

/** An input item that refers to a kept item (`{ type: 'item_reference', id }`). */
export function isItemReference(item: unknown): item is Item {
  return isRecord(item) && item.type === 'item_reference'
}

/** A reasoning item whose text came back sealed (`encrypted_content`). */
export function isSealedReasoningItem(item: unknown): item is Item & { encrypted_content: string } {
  return isRecord(item) && item.type === 'reasoning' && typeof item.encrypted_content === 'string'
}

/** Whether a Responses body's input refers to kept items. */
export const holdsItemReference = (body: Item): boolean => inputHolds(body, isItemReference)

/** Whether a Responses body's input holds a reasoning item with sealed content (which `openReasoning` must open). */
export const holdsSealedReasoning = (body: Item): boolean => inputHolds(body, isSealedReasoningItem)

/** Whether a Responses body's input ends with a tool call's result (`function_call_output`). */
const endsWithCallOutput = (body: Item): boolean =>
  Array.isArray(body.input) &&
  body.input.length > 0 &&
  isRecord(body.input.at(-1)) &&
  (body.input.at(-1) as Item).type === 'function_call_output'

/** Whether a Responses body's input holds a compaction item (which the gateway's `Compactor` opens). */
export const holdsCompaction = (body: Item): boolean => inputHolds(body, (item) => isRecord(item) && item.type === 'compaction')

export function isContinuation(kind: 'chat' | 'responses', body: Item): boolean {
  if (kind === 'responses')
    return (
      body.previous_response_id != null ||
      body.conversation != null ||
      holdsCompaction(body) ||
      holdsItemReference(body) ||
      holdsSealedReasoning(body) ||
      endsWithCallOutput(body)
    )
  const messages = body.messages
  if (!Array.isArray(messages) || messages.length === 0) return false
  const last: unknown = messages[messages.length - 1]
  return isRecord(last) && last.role === 'tool'
}
