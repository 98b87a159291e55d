/**
 * The one answer to "does this request continue something the gateway holds?", asked on the event loop and in
 * the render workers alike (they must agree: a body rendered in a worker is otherwise prompted differently from
 * the same body rendered inline).
 *
 * - Responses: it names a stored response (`previous_response_id`), holds a compaction item or sealed
 *   reasoning, or refers to kept items (`item_reference`). Each is rendered with what it stands for, which only
 *   the gateway can find (its store, its key).
 * - Chat: its messages end with tool results, so it may answer tool calls this gateway returned and be
 *   prompted with the ids the engine saw and generated (`ChatIdCache`); nothing else can be.
 */
import { isRecord } from '../../base/records'
import { holdsCompaction } from '../compaction/compactor'
import { holdsItemReference } from './conversation'
import { holdsSealedReasoning } from './sealed-reasoning'

export function isContinuation(kind: 'chat' | 'responses', body: Record<string, unknown>): boolean {
  if (kind === 'responses')
    return body.previous_response_id != null || holdsCompaction(body) || holdsItemReference(body) || holdsSealedReasoning(body)
  const messages = body.messages
  if (!Array.isArray(messages) || messages.length === 0) return false
  const last: unknown = messages[messages.length - 1]
  return isRecord(last) && last.role === 'tool'
}
