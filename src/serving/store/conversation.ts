/**
 * The Responses API's memory on a `ResponseStore` (store.ts), as OpenAI defines it: a response is kept with
 * the input it was generated from (`store`, default true); a request naming `previous_response_id` continues
 * from it (that response's input, then its output, then the new input; its `instructions` are not carried
 * over); `GET /v1/responses/{id}` gives it back, `DELETE` forgets it, and `GET /v1/responses/{id}/input_items`
 * lists its input items a page at a time. The example gateway wires these helpers; any gateway can.
 */
import { HttpError } from '../http/errors'
import type { ResponseStore, StoredResponse } from './store'

type Item = Record<string, unknown>

const isObject = (value: unknown): value is Item => value !== null && typeof value === 'object' && !Array.isArray(value)

function notFound(id: string, param: string | null): HttpError {
  return new HttpError(404, `No response with id '${id.slice(0, 100)}' is stored here (never stored, deleted, or expired)`, {
    param,
    code: 'not-found',
    type: 'invalid_request_error',
  })
}

/**
 * A request's input as items, each with an id (`msg_…` for messages, else the item's own id or `item_…`): a
 * string input is one user message. `stem` makes the ids this response's (its id without `resp_`).
 */
export function inputItemsOf(body: Item, stem: string): Item[] {
  const input = body.input
  const items: unknown[] =
    typeof input === 'string' ? [{ type: 'message', role: 'user', content: input }] : Array.isArray(input) ? input : []
  return items.map((raw, i) => {
    const item: Item = isObject(raw) ? { ...raw } : { value: raw }
    if (item.type === undefined) item.type = 'message'
    if (item.type === 'message' && typeof item.content === 'string') item.content = [{ type: 'input_text', text: item.content }]
    if (typeof item.id !== 'string') item.id = `${item.type === 'message' ? 'msg' : 'item'}_${stem}_in${i}`
    return item
  })
}

/** The items a continuation of `record` starts with: its input, then its output. */
function conversationOf(record: StoredResponse): Item[] {
  const output = Array.isArray(record.response.output) ? (record.response.output as Item[]) : []
  return [...record.input, ...output]
}

/**
 * The items before a request's own input, from the response it names (`previous_response_id`); a 404 naming
 * the field when no such response is stored.
 */
export async function previousItems(store: ResponseStore, previousResponseId: string): Promise<Item[]> {
  const record = await store.get(previousResponseId)
  if (record === null) throw notFound(previousResponseId, 'previous_response_id')
  return conversationOf(record)
}

/** The request to render: `previous` items, then its own input; without `previous_response_id`. */
export function continuedBody(body: Item, previous: readonly Item[]): Item {
  const { previous_response_id: _previous, ...rest } = body
  const own = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : Array.isArray(body.input) ? body.input : []
  return { ...rest, input: [...previous, ...own] }
}

/** The record of a finished response (its `input`: every item it was generated from, with ids). */
export function storedResponse(
  response: Item & { id: string; created_at: number },
  input: Item[],
  tokens: { prompt?: ArrayLike<number>; output?: ArrayLike<number> } = {},
): StoredResponse {
  const record: StoredResponse = { id: response.id, createdAt: response.created_at, response, input }
  if (tokens.prompt !== undefined) record.promptTokens = Array.from(tokens.prompt)
  if (tokens.output !== undefined) record.outputTokens = Array.from(tokens.output)
  return record
}

/** `GET /v1/responses/{id}/input_items` query: `after` (an item id), `limit` (1 to 100, default 20), `order`. */
function pageOf(query: URLSearchParams): { after: string | null; limit: number; order: 'asc' | 'desc' } {
  const limitText = query.get('limit')
  const limit = limitText === null ? 20 : Number(limitText)
  if (!Number.isInteger(limit) || limit < 1 || limit > 100)
    throw new HttpError(400, 'limit must be an integer from 1 to 100', { param: 'limit', code: 'invalid-parameter' })
  const order = query.get('order') ?? 'desc'
  if (order !== 'asc' && order !== 'desc')
    throw new HttpError(400, "order must be 'asc' or 'desc'", { param: 'order', code: 'invalid-parameter' })
  return { after: query.get('after'), limit, order }
}

/**
 * The answer to the stored-response routes, or null for any other path: `GET /v1/responses/{id}` (the
 * response), `DELETE /v1/responses/{id}` (`{ id, object: 'response', deleted: true }`), `GET
 * /v1/responses/{id}/input_items` (a list page). Unknown ids are 404s; other methods on these paths 405s.
 */
export async function storedResponseRoute(
  store: ResponseStore,
  method: string,
  url: URL,
): Promise<{ status: number; body: unknown; allow?: string } | null> {
  const match = /^\/v1\/responses\/([^/]+)(\/input_items)?$/.exec(url.pathname)
  if (match === null) return null
  const id = decodeURIComponent(match[1]!)
  if (match[2] !== undefined) {
    if (method !== 'GET') return { status: 405, body: null, allow: 'GET' }
    const page = pageOf(url.searchParams)
    const record = await store.get(id)
    if (record === null) throw notFound(id, null)
    const ordered = page.order === 'asc' ? record.input : [...record.input].reverse()
    const start = page.after === null ? 0 : ordered.findIndex((item) => item.id === page.after) + 1
    if (page.after !== null && start === 0)
      throw new HttpError(400, `after: no input item '${page.after.slice(0, 100)}' in this response`, {
        param: 'after',
        code: 'invalid-parameter',
      })
    const data = ordered.slice(start, start + page.limit)
    return {
      status: 200,
      body: {
        object: 'list',
        data,
        first_id: (data[0]?.id as string | undefined) ?? null,
        last_id: (data[data.length - 1]?.id as string | undefined) ?? null,
        has_more: start + page.limit < ordered.length,
      },
    }
  }
  if (method === 'GET') {
    const record = await store.get(id)
    if (record === null) throw notFound(id, null)
    return { status: 200, body: record.response }
  }
  if (method === 'DELETE') {
    if (!(await store.delete(id))) throw notFound(id, null)
    return { status: 200, body: { id, object: 'response', deleted: true } }
  }
  return { status: 405, body: null, allow: 'GET, DELETE' }
}
