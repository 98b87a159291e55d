/**
 * OpenAI's Conversations API, as the `openai` package's resources/conversations/*.d.ts types it (the calls of
 * `client.conversations` and `client.conversations.items`, which the Agents SDK's `OpenAIConversationsSession`
 * makes): `POST /v1/conversations` (`items`, at most 20, and `metadata`), `GET`, `POST` (its `metadata`) and
 * `DELETE /v1/conversations/{id}`; `GET` (a list page: `after`, `limit`, `order`, `include`) and `POST` (`items`)
 * `/v1/conversations/{id}/items`; `GET` and `DELETE /v1/conversations/{id}/items/{item_id}` (which answers with
 * the conversation). A conversation is kept in the response store (responses/conversation-store.ts), as one API
 * key's holder's: to another key it is a 404. Items are checked by rendering the conversation with them, so that
 * what cannot be a prompt is refused when it is added, not in every response after. `POST /v1/responses` with
 * `conversation` continues one (responses/continuation.ts) and adds its items to it (responses/keep.ts).
 *
 * Followed where OpenAI's reference leaves a case open: SMG's handlers (lightseekorg/smg,
 * model_gateway/src/routers/conversations/handlers.rs): 20 items a request, an item already in the conversation
 * refused, a deleted item answered with its conversation.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'

import { HarmonyLimitError, HarmonyRequestError } from '../../base/errors'
import { isRecord } from '../../base/records'
import { readJsonBody } from '../../http/body'
import { HttpError } from '../../http/errors'
import { checkRequestFields, honoured, type RequestFields } from '../../http/fields'
import type { Feature } from '../pipeline/face'
import { type Item, renderOffLoop } from '../pipeline/prepared'
import { methodNotAllowed, sendJson } from '../pipeline/send'
import { listPage, pageOf, resolveItemReferences, responseIdOf } from '../responses/conversation'
import {
  type Conversation,
  changeConversation,
  conversationItem,
  conversationNotFound,
  deleteConversation,
  itemNotFound,
  newConversationId,
  putConversation,
  readConversation,
  withItems,
} from '../responses/conversation-store'
import type { ResponsesGateway } from '../responses/responses-gateway'
import { openReasoning, reasoningSealer } from '../responses/sealed-reasoning'
import type { ResponseStore } from '../stores/store'

/** Items one request adds at most ("You may add up to 20 items at a time": ConversationCreateParams, ItemCreateParams). */
const MAX_ITEMS = 20

/** OpenAI's `Metadata`: 16 pairs at most, keys up to 64 characters, values strings up to 512. */
const MAX_METADATA_PAIRS = 16
const MAX_METADATA_KEY = 64
const MAX_METADATA_VALUE = 512

const ITEMS_NOTE = `at most ${MAX_ITEMS}; each an input item of the Responses API, checked by rendering the conversation with it`
const METADATA_NOTE = `kept with the conversation: at most ${MAX_METADATA_PAIRS} pairs, keys up to ${MAX_METADATA_KEY} characters, string values up to ${MAX_METADATA_VALUE}`

/** The fields of each body (ConversationCreateParams, ConversationUpdateParams, ItemCreateParams); any other is a 400. */
const CREATE_FIELDS: RequestFields = { items: honoured(ITEMS_NOTE), metadata: honoured(METADATA_NOTE) }
const UPDATE_FIELDS: RequestFields = { metadata: honoured(`${METADATA_NOTE}; replaces the conversation's (null: none)`) }
const ITEMS_FIELDS: RequestFields = { items: honoured(ITEMS_NOTE) }

/**
 * What `include` may ask of listed items, as the Responses API's `include` may (http/validate.ts): each is what
 * its response was asked to include, kept with the item and shown only when asked again; sealed reasoning is
 * sealed when asked, for the caller.
 */
const OUTPUT_TEXT_LOGPROBS = 'message.output_text.logprobs'
const ENCRYPTED_REASONING = 'reasoning.encrypted_content'
const CODE_OUTPUTS = 'code_interpreter_call.outputs'
const INCLUDABLE: readonly string[] = [OUTPUT_TEXT_LOGPROBS, ENCRYPTED_REASONING, CODE_OUTPUTS]

/** The store conversations are kept in; a gateway that keeps no responses keeps no conversations (a 404). */
function storeOf(gateway: ResponsesGateway): ResponseStore {
  if (gateway.store === null)
    throw new HttpError(404, 'the Conversations API is not served here: this gateway keeps no responses, so no conversations', {
      code: 'not-found',
    })
  return gateway.store
}

async function bodyOf(gateway: ResponsesGateway, request: IncomingMessage, fields: RequestFields): Promise<Item> {
  const body = await readJsonBody(request, { limit: gateway.bodyLimit })
  checkRequestFields(fields, body, gateway.unknownFields)
  return body
}

function bad(param: string, message: string, code = 'invalid-parameter'): HttpError {
  return new HttpError(400, message, { param, code })
}

/** A body's `metadata` (absent or null: none). */
function metadataOf(value: unknown): Record<string, string> {
  if (value === undefined || value === null) return {}
  if (!isRecord(value)) throw bad('metadata', 'metadata must be an object of string values')
  const pairs = Object.entries(value)
  if (pairs.length > MAX_METADATA_PAIRS) throw bad('metadata', `metadata holds ${pairs.length} pairs; at most ${MAX_METADATA_PAIRS}`)
  for (const [key, text] of pairs) {
    if (key.length > MAX_METADATA_KEY) throw bad('metadata', `metadata keys are at most ${MAX_METADATA_KEY} characters`)
    if (typeof text !== 'string' || text.length > MAX_METADATA_VALUE)
      throw bad('metadata', `metadata.${key}: values are strings of at most ${MAX_METADATA_VALUE} characters`)
  }
  return { ...(value as Record<string, string>) }
}

/**
 * An error about a rendered conversation (`input[k]`: its k-th item) as one about the request: the new items are
 * `items[k - offset]`; an item the conversation held already is named by its id (and no `param`).
 */
function asItemsError(error: unknown, offset: number, held: readonly Item[]): unknown {
  if (!(error instanceof HarmonyRequestError) && !(error instanceof HttpError)) return error
  let onHeld = false
  const rename = (text: string) =>
    text.replace(/\binput\[(\d+)\]/g, (_whole, digits: string) => {
      const k = Number(digits)
      if (k >= offset) return `items[${k - offset}]`
      onHeld = true
      return `the conversation's item ${String(held[k]?.id).slice(0, 100)}`
    })
  const message = rename(error.message)
  const param = error.param === null || error.param === 'input' ? 'items' : rename(error.param)
  const status = error instanceof HttpError ? error.status : 400
  return new HttpError(status, message, { param: onHeld ? null : param, code: error.code, type: error.type })
}

/**
 * The items a request adds to a conversation that holds `held`, as it will keep them: sealed reasoning opened,
 * item references resolved (to the kept items they name), none already in the conversation, the conversation
 * with them rendered (a 400 naming `items[i]` for what cannot be a prompt); then with ids and OpenAI's shapes.
 */
async function newItems(gateway: ResponsesGateway, held: readonly Item[], raw: unknown): Promise<Item[]> {
  if (!Array.isArray(raw)) throw bad('items', 'items must be an array of input items')
  if (raw.length > MAX_ITEMS) throw bad('items', `items holds ${raw.length} items: you may add up to ${MAX_ITEMS} items at a time`)
  if (raw.length === 0) return []
  raw.forEach((item, i) => {
    if (!isRecord(item)) throw bad(`items[${i}]`, `items[${i}] must be an object (an input item)`)
  })
  const owner = gateway.caller?.name ?? null
  let items: Item[]
  try {
    items = (await resolveItemReferences(gateway.store, openReasoning(gateway.sealer, { input: raw }, owner))).input as Item[]
  } catch (error) {
    throw asItemsError(error, 0, [])
  }
  const ids = new Set(held.map((item) => item.id))
  items.forEach((item, i) => {
    if (typeof item.id !== 'string') return
    if (ids.has(item.id)) throw bad(`items[${i}].id`, `Item '${item.id.slice(0, 100)}' is already in the conversation`)
    ids.add(item.id)
  })
  try {
    await renderOffLoop(gateway, 'responses', { model: gateway.model, input: [...held, ...items] })
  } catch (error) {
    throw asItemsError(error, held.length, held)
  }
  return items.map(conversationItem)
}

/** A store's refusal of a record over its bounds is the request's: a 400 naming `items`. */
async function kept<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (error) {
    if (error instanceof HarmonyLimitError)
      throw bad('items', "the conversation with these items is larger than the response store's largest record (maxRecordBytes)")
    throw error
  }
}

/** The `include` of a query (`include[]=…` as the JS client writes it, `include=…` as the Python client does). */
function includeOf(query: URLSearchParams): Set<string> {
  const include = new Set<string>()
  for (const [key, value] of query) {
    if (!/^include(?:\[\d*\])?$/.test(key)) continue
    if (!INCLUDABLE.includes(value))
      throw bad(
        'include',
        `include ${JSON.stringify(value).slice(0, 60)} is not supported: this gateway can include '${OUTPUT_TEXT_LOGPROBS}', '${ENCRYPTED_REASONING}' and '${CODE_OUTPUTS}'`,
      )
    include.add(value)
  }
  return include
}

/** The text of a kept reasoning item (its `reasoning_text` parts), or null where it has none. */
function reasoningText(item: Item): string | null {
  if (!Array.isArray(item.content)) return null
  const texts = item.content.flatMap((part) => (isRecord(part) && typeof part.text === 'string' ? [part.text] : []))
  return texts.length === 0 ? null : texts.join('')
}

/** An item as it is shown, with what `include` asks for and without what it does not. */
function shown(gateway: ResponsesGateway, item: Item, include: ReadonlySet<string>): Item {
  let shownItem = item
  if (item.type === 'message' && !include.has(OUTPUT_TEXT_LOGPROBS) && Array.isArray(item.content))
    shownItem = {
      ...shownItem,
      content: item.content.map((part) => (isRecord(part) && Array.isArray(part.logprobs) ? { ...part, logprobs: [] } : part)),
    }
  if (item.type === 'code_interpreter_call' && !include.has(CODE_OUTPUTS) && item.outputs != null)
    shownItem = { ...shownItem, outputs: null }
  if (item.type === 'reasoning' && include.has(ENCRYPTED_REASONING)) {
    const text = reasoningText(item)
    const sealed = text === null ? null : reasoningSealer(gateway)(text)
    if (sealed !== null) shownItem = { ...shownItem, encrypted_content: sealed }
  }
  return shownItem
}

/** A page of items, as `ConversationItemList`. */
function itemList(items: Item[]): object {
  return {
    object: 'list',
    data: items,
    first_id: (items[0]?.id as string | undefined) ?? null,
    last_id: (items[items.length - 1]?.id as string | undefined) ?? null,
    has_more: false,
  }
}

async function createConversation(gateway: ResponsesGateway, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const store = storeOf(gateway)
  const body = await bodyOf(gateway, request, CREATE_FIELDS)
  const metadata = metadataOf(body.metadata)
  const items = body.items === undefined || body.items === null ? [] : await newItems(gateway, [], body.items)
  const conversation: Conversation = {
    object: { id: newConversationId(), object: 'conversation', created_at: Math.floor(Date.now() / 1000), metadata },
    items,
    revision: 0,
    ids: null,
  }
  await kept(() => putConversation(store, conversation))
  sendJson(response, 200, conversation.object)
}

/** `/v1/conversations/{id}`: the conversation, its metadata changed, or deleted. */
async function conversationRoute(gateway: ResponsesGateway, request: IncomingMessage, response: ServerResponse, id: string): Promise<void> {
  const store = storeOf(gateway)
  switch (request.method) {
    case 'GET': {
      const conversation = await readConversation(store, id)
      if (conversation === null) throw conversationNotFound(id)
      return sendJson(response, 200, conversation.object)
    }
    case 'POST': {
      const body = await bodyOf(gateway, request, UPDATE_FIELDS)
      if (!Object.hasOwn(body, 'metadata')) throw bad('metadata', 'metadata is required (null: none)', 'missing-required-parameter')
      const metadata = metadataOf(body.metadata)
      // The items, their revision and their ids stay: metadata is no part of the prompt.
      const changed = await changeConversation(store, id, (now) => ({ ...now, object: { ...now.object, metadata } }))
      if (changed === null) throw conversationNotFound(id)
      return sendJson(response, 200, changed.object)
    }
    case 'DELETE':
      if (!(await deleteConversation(store, id))) throw conversationNotFound(id)
      return sendJson(response, 200, { id, object: 'conversation.deleted', deleted: true })
    default:
      throw methodNotAllowed(response, `/v1/conversations/${id}`, request.method, 'GET, POST, DELETE')
  }
}

/** `/v1/conversations/{id}/items`: a page of the items, or items added. */
async function itemsRoute(
  gateway: ResponsesGateway,
  request: IncomingMessage,
  response: ServerResponse,
  id: string,
  query: URLSearchParams,
): Promise<void> {
  const store = storeOf(gateway)
  switch (request.method) {
    case 'GET': {
      const page = pageOf(query)
      const include = includeOf(query)
      const conversation = await readConversation(store, id)
      if (conversation === null) throw conversationNotFound(id)
      const list = listPage(conversation.items, page, 'item', 'this conversation')
      return sendJson(response, 200, { ...list, data: list.data.map((item) => shown(gateway, item, include)) })
    }
    case 'POST': {
      const include = includeOf(query)
      const body = await bodyOf(gateway, request, ITEMS_FIELDS)
      if (body.items === undefined || body.items === null) throw bad('items', 'items is required', 'missing-required-parameter')
      let added: Item[] = []
      // Items a client adds are none a response generated from: the ids behind the last items no longer hold.
      const changed = await kept(() =>
        changeConversation(store, id, async (now) => {
          added = await newItems(gateway, now.items, body.items)
          return added.length === 0 ? null : withItems(now, [...now.items, ...added], null)
        }),
      )
      if (changed === null) throw conversationNotFound(id)
      return sendJson(response, 200, itemList(added.map((item) => shown(gateway, item, include))))
    }
    default:
      throw methodNotAllowed(response, `/v1/conversations/${id}/items`, request.method, 'GET, POST')
  }
}

/** `/v1/conversations/{id}/items/{item_id}`: one item, or deleted (answered with the conversation). */
async function itemRoute(
  gateway: ResponsesGateway,
  request: IncomingMessage,
  response: ServerResponse,
  id: string,
  itemId: string,
  query: URLSearchParams,
): Promise<void> {
  const store = storeOf(gateway)
  switch (request.method) {
    case 'GET': {
      const include = includeOf(query)
      const conversation = await readConversation(store, id)
      if (conversation === null) throw conversationNotFound(id)
      const item = conversation.items.find((held) => held.id === itemId)
      if (item === undefined) throw itemNotFound(itemId, id)
      return sendJson(response, 200, shown(gateway, item, include))
    }
    case 'DELETE': {
      let found = false
      const changed = await changeConversation(store, id, (now) => {
        const rest = now.items.filter((held) => held.id !== itemId)
        found = rest.length < now.items.length
        return found ? withItems(now, rest, null) : null
      })
      if (changed === null) throw conversationNotFound(id)
      if (!found) throw itemNotFound(itemId, id)
      return sendJson(response, 200, changed.object)
    }
    default:
      throw methodNotAllowed(response, `/v1/conversations/${id}/items/${itemId}`, request.method, 'GET, DELETE')
  }
}

const BY_ID = /^\/v1\/conversations\/([^/]+)(?:\/(items)(?:\/([^/]+))?)?$/

export const conversationsFeature: Feature<ResponsesGateway> = {
  routes: { '/v1/conversations': { POST: createConversation } },
  async idRoutes(gateway, request, response, url) {
    const match = BY_ID.exec(url.pathname)
    if (match === null) return false
    const id = responseIdOf(match[1]!)
    if (match[2] === undefined) await conversationRoute(gateway, request, response, id)
    else if (match[3] === undefined) await itemsRoute(gateway, request, response, id, url.searchParams)
    else await itemRoute(gateway, request, response, id, responseIdOf(match[3]), url.searchParams)
    return true
  },
  label(path) {
    const match = BY_ID.exec(path)
    if (match === null) return null
    return `/v1/conversations/{id}${match[2] === undefined ? '' : match[3] === undefined ? '/items' : '/items/{item_id}'}`
  },
}
