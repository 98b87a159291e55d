/**
 * The Responses API's memory on a `ResponseStore` (store.ts), as OpenAI defines it: a response is kept with
 * the input it was generated from (`store`, default true); a request naming `previous_response_id` continues
 * from it (that response's input, then its output, then the new input; its `instructions` are not carried
 * over); `GET /v1/responses/{id}` gives it back, `DELETE` forgets it, and `GET /v1/responses/{id}/input_items`
 * lists its input items a page at a time. The example gateway wires these helpers; any gateway can.
 */

import { isRecord } from '../../base/records'
import { HttpError, previousResponseNotFound } from '../../http/errors'
import type { RenderedPrompt } from '../../render/index'
import { holdsItemReference, isItemReference } from '../pipeline/continues'
import { exactPrompt, startsWith } from '../pipeline/exact-prompt'
import { DELETIONS_PREFIX, isSideRecordId } from '../stores/side-records'
import type { HistoryLineage, Lineage, ResponseStore, StoredResponse } from '../stores/store'

type Item = Record<string, unknown>

/** The 404 of a response that is not stored (`param`: the request field that named it, if any). */
export function responseNotFound(id: string, param: string | null = null): HttpError {
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
    const item: Item = isRecord(raw) ? { ...raw } : { value: raw }
    if (item.type === undefined) item.type = 'message'
    if (item.type === 'message' && typeof item.content === 'string') item.content = [{ type: 'input_text', text: item.content }]
    if (typeof item.id !== 'string') item.id = `${item.type === 'message' ? 'msg' : 'item'}_${stem}_in${i}`
    return item
  })
}

/** The items a continuation of `record` starts with: its input, then its output. */
export function continuationItems(record: StoredResponse): Item[] {
  const output = Array.isArray(record.response.output) ? (record.response.output as Item[]) : []
  return [...record.input, ...output]
}

/**
 * The response whose item `id` is: this gateway's item ids carry their response's (`rs_`, `msg_`, `fc_`, `item_`,
 * then the response id without `resp_`, then the item's place), so an item is found without an index of items.
 */
const ITEM_OF_RESPONSE = /^(?:rs|msg|fc|item)_([0-9a-f]{32})_/

/**
 * What one request's references may cost: each one a store lookup (a response is read once per request) and a
 * copy of the item, bounded before any is read, and in characters as they are.
 */
const MAX_REFERENCES = 1000
const MAX_RESOLVED_CHARACTERS = 8 * 1024 * 1024

/**
 * The body with each `item_reference` of its input replaced by the kept item it names (an output item of a kept
 * response, or one of its input items), as OpenAI resolves them. An id that names no kept item is a 404 naming
 * `input[i].id`; without a store, a 400; more than 1000 references, or items over 8 Mi characters of JSON
 * together, a 400.
 */
export async function resolveItemReferences(store: ResponseStore | null, body: Item): Promise<Item> {
  if (!holdsItemReference(body)) return body
  const input = body.input as unknown[]
  const references = input.filter(isItemReference).length
  if (references > MAX_REFERENCES)
    throw new HttpError(400, `input holds ${references} item references; at most ${MAX_REFERENCES} are resolved`, {
      param: 'input',
      code: 'invalid-parameter',
    })
  const records = new Map<string, Promise<StoredResponse | null>>()
  let characters = 0
  const resolved: unknown[] = []
  for (const [i, item] of input.entries()) {
    if (!isItemReference(item)) {
      resolved.push(item)
      continue
    }
    const param = `input[${i}].id`
    if (store === null)
      throw new HttpError(400, `${param}: an item_reference needs a gateway that keeps responses; send the item itself`, {
        param,
        code: 'invalid-parameter',
      })
    const id = item.id
    if (typeof id !== 'string') throw new HttpError(400, `${param} must be a string`, { param, code: 'invalid-parameter' })
    const stem = ITEM_OF_RESPONSE.exec(id)?.[1]
    if (stem !== undefined && !records.has(stem)) records.set(stem, responseRecord(store, `resp_${stem}`))
    const record = stem === undefined ? null : await records.get(stem)
    const found = record == null ? undefined : continuationItems(record).find((kept) => kept.id === id)
    if (found === undefined) throw new HttpError(404, `Item with id '${id.slice(0, 100)}' not found.`, { param, code: 'not-found' })
    characters += JSON.stringify(found).length
    if (characters > MAX_RESOLVED_CHARACTERS)
      throw new HttpError(400, `the items input refers to are over ${MAX_RESOLVED_CHARACTERS} characters of JSON together`, {
        param,
        code: 'invalid-parameter',
      })
    resolved.push(found)
  }
  return { ...body, input: resolved }
}

/**
 * The response a request continues (`previous_response_id`), without the items of responses deleted since
 * (`withoutDeleted`); OpenAI's 400 `previous_response_not_found`, naming the field, when it is not stored.
 */
export async function previousResponse(store: ResponseStore, previousResponseId: string): Promise<StoredResponse> {
  const record = await responseRecord(store, previousResponseId)
  if (record === null) throw previousResponseNotFound(previousResponseId)
  return withoutDeleted(store, record)
}

/*
 * Deleting a response that others continued. OpenAI's API reference says of `DELETE /v1/responses/{response_id}`
 * only that it "Deletes a model response with the given ID" (the `openai` package's resources/responses/
 * responses.d.ts, `delete`), and nothing of the responses that continued it through `previous_response_id`. Here
 * a response's record holds every item it was generated from (its predecessors' too), so a deletion would live on
 * in them: a deleted response's own items (its request's input and its output) leave every response that continued
 * it, directly or through others. Their input items no longer list them, and a continuation of them is rendered
 * without them, never prompted with the engine's ids that held them. Items its own predecessors gave stay while
 * those are kept; items a request sent itself (an `item_reference` resolved, a history sent back) are its own.
 *
 * How: each record says whose items its input holds (`StoredResponse.lineage`), and a deletion is noted under the
 * chain's first response (`deletions:<root>`, a side record) before the record goes; reading a record of the chain
 * drops the runs of deleted responses. The note lives for the store's `ttlSeconds` from the last deletion, longer
 * than any record that holds the items (each was kept before the deletion). A store that evicts (memory, SQLite)
 * evicts it as any record, least recently used first; every read of the chain's input reads it, so it goes only
 * when the chain has gone unread longer than what the store keeps.
 */

/** The ids of the responses deleted in the chain that begins with `root`. */
async function deletedIn(store: ResponseStore, root: string): Promise<Set<string>> {
  const record = await store.get(DELETIONS_PREFIX + root)
  const deleted = record?.response.deleted
  return new Set(Array.isArray(deleted) ? deleted.filter((id): id is string => typeof id === 'string') : [])
}

/**
 * `record` without the items of the responses deleted in its chain, and then without the ids of its prompt and
 * output (which held them): a continuation of it is rendered from what is left. `record` itself where none was.
 */
export async function withoutDeleted(store: ResponseStore, record: StoredResponse): Promise<StoredResponse> {
  const { lineage } = record
  if (lineage === undefined) return record
  const deleted = await deletedIn(store, lineage.root)
  if (!lineage.runs.some((run) => run.response !== undefined && deleted.has(run.response))) return record
  const input: Item[] = []
  const runs: Lineage['runs'] = []
  let at = 0
  for (const run of lineage.runs) {
    const items = record.input.slice(at, at + run.items)
    at += run.items
    if (run.response !== undefined && deleted.has(run.response)) continue
    input.push(...items)
    runs.push(run)
  }
  // Items past the runs (none, in a record this gateway kept) are kept as they are.
  if (at < record.input.length) {
    input.push(...record.input.slice(at))
    runs.push({ items: record.input.length - at })
  }
  const { promptTokens: _prompt, outputTokens: _output, renderedPromptTokens: _rendered, ...rest } = record
  return { ...rest, input, lineage: { root: lineage.root, runs } }
}

/**
 * Deletes response `id`, noting the deletion in its chain first (so that no moment shows its items in a response
 * that continued it); false where it is not stored. The note is the record's owner's, as the record was.
 */
export async function forgetResponse(store: ResponseStore, id: string): Promise<boolean> {
  const record = await responseRecord(store, id)
  if (record === null) return false
  const root = record.lineage?.root ?? id
  const noteId = DELETIONS_PREFIX + root
  // Read, changed, written, read back: two deletions in one chain at once (two processes) both stay noted.
  for (let attempt = 0; attempt < 3; attempt++) {
    const deleted = await deletedIn(store, root)
    if (deleted.has(id)) break
    await store.put({
      id: noteId,
      createdAt: Math.floor(Date.now() / 1000),
      response: { deleted: [...deleted, id] },
      input: [],
      ...(record.owner === undefined ? {} : { owner: record.owner }),
    })
  }
  return store.delete(id)
}

/**
 * Whose items a request's history holds (`Prepared.lineage`): a continuation of `previous`, its input then its
 * output, in its chain (`root`); a conversation's items (`previous` null), no response's and in no chain.
 */
export function historyLineage(previous: StoredResponse | null, historyItems: number): HistoryLineage {
  if (previous === null) return { root: null, runs: historyItems === 0 ? [] : [{ items: historyItems }] }
  const output = Array.isArray(previous.response.output) ? previous.response.output.length : 0
  const runs = previous.lineage?.runs ?? [{ items: previous.input.length }]
  return { root: previous.lineage?.root ?? previous.id, runs: [...runs, { items: output, response: previous.id }] }
}

/** The lineage of response `id`, kept after a history (`historyLineage`; none: it continues nothing) with `own` items of its own. */
export function keptLineage(id: string, history: HistoryLineage | undefined, own: number): Lineage {
  return { root: history?.root ?? id, runs: [...(history?.runs ?? []), { items: own, response: id }] }
}

/** The items before a request's own input, from the response it names (its input, then its output). */
export async function previousItems(store: ResponseStore, previousResponseId: string): Promise<Item[]> {
  return continuationItems(await previousResponse(store, previousResponseId))
}

/**
 * A continuation's prompt made of the ids the engine saw and generated: the stored response's prompt, then the
 * ids it generated, then the new input's tokens; or null where Harmony's rules do not keep that prefix. An
 * engine's prefix cache then serves the whole history, where a re-render would differ from the generated ids
 * wherever the model wrote a header otherwise than the reference renders it (` to=functions.x<|channel|>…`,
 * spacing), and miss from there on.
 *
 * The prefix holds within a turn: the stored response ended with a tool call (its ids end with `<|call|>`) and
 * the request only answers calls (`function_call_output` items). It is checked, not assumed: the request's
 * own render (`rendered`, of `continuedBody`) must start with the stored prompt as a re-render gives it
 * (`renderedPromptTokens`, or `promptTokens`: same system and developer messages, date, history), and `renderWithout` (the same body without the new items) must be a prefix of it,
 * so the new items' tokens are exactly what the re-render has after it. Anything else (a final answer, whose
 * analysis the format drops; other instructions or tools; another day) is null: render from the items.
 */
export async function exactContinuation(
  record: Pick<StoredResponse, 'promptTokens' | 'outputTokens' | 'renderedPromptTokens'>,
  ownInput: unknown,
  rendered: RenderedPrompt,
  renderWithout: () => RenderedPrompt | Promise<RenderedPrompt>,
): Promise<RenderedPrompt | null> {
  if (
    !Array.isArray(ownInput) ||
    ownInput.length === 0 ||
    !ownInput.every((item) => isRecord(item) && item.type === 'function_call_output')
  )
    return null
  return exactPrompt(record, rendered, renderWithout)
}

function sameIds(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  return a.length === b.length && startsWith(a, b)
}

/** The request to render: `previous` items, then its own input; without `previous_response_id` and `conversation`. */
export function continuedBody(body: Item, previous: readonly Item[]): Item {
  const { previous_response_id: _previous, conversation: _conversation, ...rest } = body
  const own = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : Array.isArray(body.input) ? body.input : []
  return { ...rest, input: [...previous, ...own] }
}

/**
 * The record of a finished response (its `input`: every item it was generated from, with ids); `tokens`: the
 * prompt the engine saw, the ids it generated, and the prompt's re-render where the prompt was an exact
 * continuation.
 */
export function storedResponse(
  response: Item & { id: string; created_at: number },
  input: Item[],
  tokens: { prompt?: ArrayLike<number>; output?: ArrayLike<number>; rendered?: ArrayLike<number> } = {},
): StoredResponse {
  const record: StoredResponse = { id: response.id, createdAt: response.created_at, response, input }
  if (tokens.prompt !== undefined) record.promptTokens = Array.from(tokens.prompt)
  if (tokens.output !== undefined) record.outputTokens = Array.from(tokens.output)
  // Kept only where it differs: the prompt was an exact continuation.
  if (tokens.rendered !== undefined && tokens.prompt !== undefined && !sameIds(tokens.rendered, tokens.prompt))
    record.renderedPromptTokens = Array.from(tokens.rendered)
  return record
}

/** The response id a path segment names; a segment that is no valid percent-encoding is a 400. */
export function responseIdOf(segment: string): string {
  try {
    return decodeURIComponent(segment)
  } catch {
    throw new HttpError(400, `the path segment '${segment.slice(0, 100)}' is not valid percent-encoding`, { code: 'invalid-path' })
  }
}

/** The record of response `id` in `store`, or null (also for a cancel request's id: it is no response). */
export function responseRecord(store: ResponseStore, id: string): Promise<StoredResponse | null> {
  return isSideRecordId(id) ? Promise.resolve(null) : store.get(id)
}

/**
 * A list page's query (`GET /v1/responses/{id}/input_items`, `GET /v1/conversations/{id}/items`): `after` (an
 * item id), `limit` (1 to 100, default 20), `order` (`asc` or `desc`, default `desc`); a bad one is a 400 naming it.
 */
export function pageOf(query: URLSearchParams): { after: string | null; limit: number; order: 'asc' | 'desc' } {
  const limitText = query.get('limit')
  const limit = limitText === null ? 20 : Number(limitText)
  if (!Number.isInteger(limit) || limit < 1 || limit > 100)
    throw new HttpError(400, 'limit must be an integer from 1 to 100', { param: 'limit', code: 'invalid-parameter' })
  const order = query.get('order') ?? 'desc'
  if (order !== 'asc' && order !== 'desc')
    throw new HttpError(400, "order must be 'asc' or 'desc'", { param: 'order', code: 'invalid-parameter' })
  return { after: query.get('after'), limit, order }
}

/** OpenAI's list page of `items` (in order), as `page` asks; an `after` that is none of them is a 400 naming it. */
export function listPage(
  items: readonly Item[],
  page: ReturnType<typeof pageOf>,
  what: string,
  where: string,
): { object: 'list'; data: Item[]; first_id: string | null; last_id: string | null; has_more: boolean } {
  const ordered = page.order === 'asc' ? items : [...items].reverse()
  const start = page.after === null ? 0 : ordered.findIndex((item) => item.id === page.after) + 1
  if (page.after !== null && start === 0)
    throw new HttpError(400, `after: no ${what} '${page.after.slice(0, 100)}' in ${where}`, { param: 'after', code: 'invalid-parameter' })
  const data = ordered.slice(start, start + page.limit)
  return {
    object: 'list',
    data,
    first_id: (data[0]?.id as string | undefined) ?? null,
    last_id: (data[data.length - 1]?.id as string | undefined) ?? null,
    has_more: start + page.limit < ordered.length,
  }
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
  const id = responseIdOf(match[1]!)
  if (match[2] !== undefined) {
    if (method !== 'GET') return { status: 405, body: null, allow: 'GET' }
    const page = pageOf(url.searchParams)
    const record = await responseRecord(store, id)
    if (record === null) throw responseNotFound(id, null)
    return { status: 200, body: listPage((await withoutDeleted(store, record)).input, page, 'input item', 'this response') }
  }
  if (method === 'GET') {
    const record = await responseRecord(store, id)
    if (record === null) throw responseNotFound(id, null)
    return { status: 200, body: record.response }
  }
  if (method === 'DELETE') {
    if (!(await forgetResponse(store, id))) throw responseNotFound(id, null)
    return { status: 200, body: { id, object: 'response', deleted: true } }
  }
  return { status: 405, body: null, allow: 'GET, DELETE' }
}
