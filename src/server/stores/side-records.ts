/**
 * Records a gateway keeps beside a response's, in the same store: about a background run, a cancel request
 * (cancel-requests.ts) and the run's lease (background.ts); the ids behind tool calls it returned
 * (pipeline/call-ids.ts); a conversation of the Conversations API (responses/conversation-store.ts); the
 * responses deleted in a chain of continuations (responses/conversation.ts `forgetResponse`). Their ids
 * start with a prefix no response id has;
 * they are no responses, so the stored-response routes answer their ids with a 404.
 */
export const CANCEL_REQUEST_PREFIX = 'cancel-request:'
export const RUN_LEASE_PREFIX = 'run-lease:'
export const CALL_IDS_PREFIX = 'call-ids:'
export const CONVERSATION_PREFIX = 'conversation:'
export const DELETIONS_PREFIX = 'deletions:'

/** Whether `id` names a record beside a response, not a response. */
export function isSideRecordId(id: string): boolean {
  return (
    id.startsWith(CANCEL_REQUEST_PREFIX) ||
    id.startsWith(RUN_LEASE_PREFIX) ||
    id.startsWith(CALL_IDS_PREFIX) ||
    id.startsWith(CONVERSATION_PREFIX) ||
    id.startsWith(DELETIONS_PREFIX)
  )
}
