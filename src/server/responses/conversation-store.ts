/**
 * Conversations (OpenAI's Conversations API, the `openai` package's resources/conversations/*.d.ts) kept in the
 * gateway's response store: one side record per conversation (`conversation:conv_…`, stores/side-records.ts), so
 * it lives under that store's bounds and expiry, in memory, SQLite or Redis alike, and an API key's holder sees
 * only their own (the store a request reads is narrowed to its caller: owned-store.ts). The record holds the
 * conversation object, its items in order, a revision that every change of its items moves, and the ids behind
 * its last items where a response added them: the prompt the engine saw, the ids it generated (and the prompt's
 * re-render where that prompt was itself exact), so that a response continuing the conversation within a turn is
 * prompted as a `previous_response_id` continuation is (`exactContinuation`), and a change of the items made
 * since (an item added or deleted through the items routes) drops them.
 *
 * Changes of one conversation are made one at a time in a process (read, change, write); processes that share a
 * store (SQLite with `--workers`, Redis) do not lock each other out, so two of them changing one conversation at
 * the same instant keep the later write. A response added after another changed the conversation is appended
 * all the same, without its ids.
 */
import { randomBytes } from 'node:crypto'

import { isRecord } from '../../base/records'
import { HttpError } from '../../http/errors'
import type { Item } from '../pipeline/prepared'
import { CONVERSATION_PREFIX } from '../stores/side-records'
import type { ResponseStore, StoredResponse } from '../stores/store'

/** A conversation's object, as the `openai` package's `Conversation` type has it. */
interface ConversationObject {
  id: string
  object: 'conversation'
  created_at: number
  metadata: Record<string, string>
}

/** The token ids behind a conversation's last items (what `exactPrompt` reads). */
export type ConversationIds = Pick<StoredResponse, 'promptTokens' | 'outputTokens' | 'renderedPromptTokens'>

/** A conversation as its record holds it. */
export interface Conversation {
  object: ConversationObject
  items: Item[]
  /** Moves with every change of the items. */
  revision: number
  /** Where a response added the last items and nothing changed them since. */
  ids: ConversationIds | null
}

/** A new conversation's id: `conv_` and 48 hex digits (OpenAI's conversation ids begin with `conv_`). */
export function newConversationId(): string {
  return `conv_${randomBytes(24).toString('hex')}`
}

/**
 * A new item's id: its kind's prefix and 48 hex digits. Not the `…_<32 hex>_` form of a response's items
 * (conversation.ts `ITEM_OF_RESPONSE`), which names the response that holds the item.
 */
function newItemId(type: unknown): string {
  const prefix = type === 'message' ? 'msg' : type === 'reasoning' ? 'rs' : type === 'function_call' ? 'fc' : 'item'
  return `${prefix}_${randomBytes(24).toString('hex')}`
}

/**
 * An item as a conversation keeps it, in the shape of the `openai` package's `ConversationItem`: an easy input
 * message (`{ role, content }`) is a `message` with content parts (`input_text`, or `output_text` for the
 * assistant's) and `status: 'completed'`; an item without an id gets one.
 */
export function conversationItem(raw: Item): Item {
  const item: Item = { ...raw }
  if (item.type === undefined || item.type === null) item.type = 'message'
  if (item.type === 'message') {
    if (typeof item.content === 'string')
      item.content = [
        item.role === 'assistant'
          ? { type: 'output_text', text: item.content, annotations: [] }
          : { type: 'input_text', text: item.content },
      ]
    if (item.status === undefined || item.status === null) item.status = 'completed'
  }
  if (typeof item.id !== 'string' || item.id === '') item.id = newItemId(item.type)
  return item
}

/** The 404 of a conversation that is not kept here (or is another key's); `param`: the field that named it. */
export function conversationNotFound(id: string, param: string | null = null): HttpError {
  return new HttpError(404, `Conversation with id '${id.slice(0, 100)}' not found.`, { param, code: 'not-found' })
}

/** The 404 of an item that is not in the conversation. */
export function itemNotFound(id: string, conversationId: string): HttpError {
  return new HttpError(404, `Item with id '${id.slice(0, 100)}' not found in conversation '${conversationId.slice(0, 100)}'.`, {
    code: 'not-found',
  })
}

function recordId(id: string): string {
  return CONVERSATION_PREFIX + id
}

function conversationOf(record: StoredResponse): Conversation {
  const { revision, ...object } = record.response as unknown as ConversationObject & { revision: number }
  const ids: ConversationIds | null =
    record.promptTokens === undefined || record.outputTokens === undefined
      ? null
      : {
          promptTokens: record.promptTokens,
          outputTokens: record.outputTokens,
          ...(record.renderedPromptTokens === undefined ? {} : { renderedPromptTokens: record.renderedPromptTokens }),
        }
  return { object, items: record.input, revision, ids }
}

function recordOf(conversation: Conversation): StoredResponse {
  const { object, items, revision, ids } = conversation
  return {
    id: recordId(object.id),
    createdAt: object.created_at,
    response: { ...object, revision },
    input: items,
    ...(ids === null ? {} : ids),
  }
}

/** The conversation `id`, or null: never made, deleted, expired, evicted, or another key's. */
export async function readConversation(store: ResponseStore, id: string): Promise<Conversation | null> {
  // Only a conversation id names one: any other text is no key of this kind of record.
  if (!id.startsWith('conv_')) return null
  const record = await store.get(recordId(id))
  return record === null || !isRecord(record.response) || record.response.object !== 'conversation' ? null : conversationOf(record)
}

/** Keeps a new conversation (its items already made conversation items). */
export async function putConversation(store: ResponseStore, conversation: Conversation): Promise<void> {
  await store.put(recordOf(conversation))
}

/** The changes of each conversation in this process, one after another: a change waits for the one before it. */
const changing = new Map<string, Promise<unknown>>()

function oneAtATime<T>(key: string, work: () => Promise<T>): Promise<T> {
  const before = changing.get(key) ?? Promise.resolve()
  const run = before.then(work, work)
  const settled = run.then(
    () => {},
    () => {},
  )
  changing.set(key, settled)
  void settled.then(() => {
    if (changing.get(key) === settled) changing.delete(key)
  })
  return run
}

/**
 * Changes conversation `id`: `change` is given it as it is now and returns it changed (or null: leave it), which
 * is kept. Resolves to what was kept, or null where the conversation is not there.
 */
export function changeConversation(
  store: ResponseStore,
  id: string,
  change: (conversation: Conversation) => Conversation | null | Promise<Conversation | null>,
): Promise<Conversation | null> {
  return oneAtATime(recordId(id), async () => {
    const conversation = await readConversation(store, id)
    if (conversation === null) return null
    const changed = await change(conversation)
    if (changed === null) return conversation
    await store.put(recordOf(changed))
    return changed
  })
}

/** Deletes conversation `id` (after the changes under way); whether it was there. */
export function deleteConversation(store: ResponseStore, id: string): Promise<boolean> {
  return oneAtATime(recordId(id), async () => (await readConversation(store, id)) !== null && store.delete(recordId(id)))
}

/** The conversation with `items` as its items: a new revision, and the ids behind them (null: none known). */
export function withItems(conversation: Conversation, items: Item[], ids: ConversationIds | null): Conversation {
  return { ...conversation, items, revision: conversation.revision + 1, ids }
}

/**
 * A request's `conversation`: its id (a string, or `{ id }` as the `openai` package's
 * `ResponseConversationParam`), or null where it names none. Anything else is a 400 naming `conversation`.
 */
export function conversationIdOf(body: Item): string | null {
  const value = body.conversation
  if (value === undefined || value === null) return null
  const id = typeof value === 'string' ? value : isRecord(value) ? value.id : undefined
  if (typeof id !== 'string' || id === '')
    throw new HttpError(400, "conversation must be a conversation's id, or an object with its id ({ id })", {
      param: typeof value === 'string' || !isRecord(value) ? 'conversation' : 'conversation.id',
      code: 'invalid-parameter',
    })
  if (isRecord(value)) {
    const extra = Object.keys(value).find((key) => key !== 'id')
    if (extra !== undefined)
      throw new HttpError(400, `Unrecognized request argument supplied: conversation.${extra.slice(0, 60)}`, {
        param: `conversation.${extra.slice(0, 60)}`,
        code: 'invalid-parameter',
      })
  }
  return id
}
