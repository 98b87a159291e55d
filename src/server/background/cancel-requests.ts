/**
 * Cancelling a background response that another gateway process runs (processes sharing one store: Redis, or
 * `GATEWAY_WORKERS` workers whose `POST /v1/responses/{id}/cancel` lands on any of them). The process that gets
 * the cancel leaves a cancel request in the store, as a record of its own beside the response's (so neither
 * process ever overwrites the other's record: the store has no compare-and-set), and the process that runs the
 * response looks for it while it runs (`watchCancelRequest`) and stops there. A request to delete a running
 * response is one too, which says so: the run then deletes its record where it would have kept how it ended,
 * so the deleted response does not come back. A cancel request is no response: the stored-response routes
 * answer its id with a 404.
 */
import { CANCEL_REQUEST_PREFIX as PREFIX } from '../stores/side-records'
import type { ResponseStore } from '../stores/store'

/** Leaves a cancel request for response `id` in `store` (for the process that runs it); `deleted`: it was deleted. */
export async function requestCancel(store: ResponseStore, id: string, deleted = false): Promise<void> {
  await store.put({ id: PREFIX + id, createdAt: Math.floor(Date.now() / 1000), response: { cancel: id, deleted }, input: [] })
}

/** Removes the cancel request of response `id` (the run ended, or no process runs it any more). */
export async function withdrawCancel(store: ResponseStore, id: string): Promise<void> {
  await store.delete(PREFIX + id)
}

/**
 * Looks for a cancel request of response `id` every `intervalMs` until one is found (then calls `onCancel` once,
 * with whether the response was deleted, and removes the request) or the returned function is called. A store
 * that fails to answer is asked again at the next interval (the run's own writes report the store's failures).
 */
export function watchCancelRequest(store: ResponseStore, id: string, onCancel: (deleted: boolean) => void, intervalMs = 500): () => void {
  let stopped = false
  let timer: NodeJS.Timeout | undefined
  const look = async () => {
    try {
      const request = await store.get(PREFIX + id)
      if (request !== null && !stopped) {
        stopped = true
        onCancel(request.response.deleted === true)
        await store.delete(PREFIX + id)
        return
      }
    } catch {
      // Asked again below.
    }
    if (!stopped) timer = setTimeout(look, intervalMs).unref()
  }
  timer = setTimeout(look, intervalMs).unref()
  return () => {
    stopped = true
    clearTimeout(timer)
  }
}
