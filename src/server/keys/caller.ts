/**
 * A gateway as one API key's holder sees it: the same gateway, its store narrowed to what that caller kept.
 * Every step of a request reads the store through the gateway it is given, so a request served with this
 * view can neither read, continue, reference, compact nor delete another caller's responses: to it they are
 * not there (a 404, as OpenAI answers for another project's response). Without keys the view is the gateway.
 */

import type { Gateway } from '../pipeline/context'
import type { ResponseStore, StoredResponse } from '../stores/store'
import type { Caller } from './api-keys'

/** The gateway for `caller` (null: a gateway without keys, seen whole). */
export function gatewayFor(gateway: Gateway, caller: Caller | null): Gateway {
  if (caller === null) return gateway
  return { ...gateway, caller, store: gateway.store === null ? null : ownedStore(gateway.store, caller.name) }
}

/** Whether `record` belongs to `caller` (every record does in a gateway without keys). */
export function belongsTo(record: StoredResponse, caller: Caller | null): boolean {
  return caller === null || record.owner === caller.name
}

/**
 * `store` narrowed to `owner`'s records: what it puts is marked as `owner`'s; another's record (or one kept
 * before the gateway had keys, which has no owner) reads as absent and is not deleted.
 */
function ownedStore(store: ResponseStore, owner: string): ResponseStore {
  const get = async (id: string) => {
    const record = await store.get(id)
    return record !== null && record.owner === owner ? record : null
  }
  return {
    get,
    put: (record) => store.put({ ...record, owner }),
    delete: async (id) => (await get(id)) !== null && store.delete(id),
    close: () => store.close(),
  }
}
