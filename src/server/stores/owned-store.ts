/**
 * A store as one API key's holder sees it: what it puts is marked as that holder's, and another's records are
 * not there. Every step of a request reads the store through the gateway it is given (`gatewayFor`), so a
 * request can neither read, continue, reference, compact nor delete another caller's responses: to it they are
 * not there (a 404, as OpenAI answers for another project's response).
 */
import type { ResponseStore, StoredResponse } from './store'

/** Whether `record` belongs to `caller` (every record does in a gateway without keys). */
export function belongsTo(record: StoredResponse, caller: { readonly name: string } | null): boolean {
  return caller === null || record.owner === caller.name
}

/**
 * `store` narrowed to `owner`'s records: what it puts is marked as `owner`'s; another's record (or one kept
 * before the gateway had keys, which has no owner) reads as absent and is not deleted.
 */
export function ownedStore(store: ResponseStore, owner: string): ResponseStore {
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
