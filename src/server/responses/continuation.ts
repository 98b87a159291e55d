/**
 * A Responses request that continues: one naming `previous_response_id` is rendered after the stored response's
 * input and output, one naming a `conversation` after the conversation's items; within a turn
 * (`exactContinuation`) either is made of the ids the engine saw and generated, so that its prefix cache serves
 * the whole history. One holding a compaction item has it opened first.
 */
import { isRecord } from '../../base/records'
import { HttpError } from '../../http/errors'
import type { GenerationParameters } from '../../http/validate'
import { promptAnswering } from '../pipeline/answering-calls'
import type { SentCall } from '../pipeline/call-ids'
import type { GatewayDiagnostic } from '../pipeline/context'
import { type Item, type Prepared, renderOffLoop } from '../pipeline/prepared'
import type { StoredResponse } from '../stores/store'
import {
  continuationItems,
  continuedBody,
  exactContinuation,
  historyLineage,
  previousResponse,
  resolveItemReferences,
  withoutDeleted,
} from './conversation'
import { type Conversation, conversationIdOf, conversationNotFound, readConversation } from './conversation-store'
import type { ResponsesGateway } from './responses-gateway'
import { openReasoning } from './sealed-reasoning'

/**
 * What a Responses request stands on: its own input with a compaction item opened (`opened`), and the stored
 * response it names (`found` where the caller has it, a WebSocket connection's latest) with that response's
 * items (`history`), or the conversation it names with its items, which come before the input.
 */
export async function historyOf(
  gateway: ResponsesGateway,
  body: Item,
  found: StoredResponse | null = null,
): Promise<{ opened: Item; previous: StoredResponse | null; history: Item[]; sources: string[]; conversation: Conversation | null }> {
  // Checked before anything is read: the request names a conversation, or a response, or neither.
  const conversationId = conversationIdOf(body)
  if (conversationId !== null && body.previous_response_id != null)
    // The `openai` package's ResponseCreateParams: previous_response_id "cannot be used in conjunction with `conversation`".
    throw new HttpError(400, 'previous_response_id cannot be used with conversation: a conversation continues from its own items', {
      param: 'previous_response_id',
      code: 'invalid-parameter',
    })
  // A sealed reasoning item is its text; an item reference stands for the kept item it names; a compaction item
  // for the items it sealed (its own input's; the stored ones come before it). Reasoning is opened and references
  // resolved first, so that an error names the item where the client put it (and a kept reasoning item, which
  // carries its text, is not opened again: a gateway with a key of its process could not after a restart).
  const { sealer } = gateway
  const owner = gateway.caller?.name ?? null
  const { body: opened, sources } = gateway.compactor.expandWithSources(
    await resolveItemReferences(gateway.store, openReasoning(sealer, body, owner)),
    owner,
  )
  await checkSourcesKept(gateway, body, sources)
  if (conversationId !== null) {
    const conversation = await conversationFor(gateway, conversationId)
    checkNewItems(conversation.items, opened.input)
    return { opened, previous: null, history: conversation.items, sources, conversation }
  }
  const id = body.previous_response_id
  // A response the caller holds (a WebSocket connection's latest) may hold items of a response deleted since.
  const previous =
    found !== null && gateway.store !== null
      ? await withoutDeleted(gateway.store, found)
      : (found ?? (id == null ? null : await previousFor(gateway, String(id))))
  return { opened, previous, history: previous === null ? [] : continuationItems(previous), sources, conversation: null }
}

/** The conversation a request names: a 404 naming `conversation` where it is not kept here, a 400 where nothing is. */
async function conversationFor(gateway: ResponsesGateway, id: string): Promise<Conversation> {
  if (gateway.store === null)
    throw new HttpError(400, 'conversation is not supported: this gateway keeps no responses, so no conversations', {
      param: 'conversation',
      code: 'invalid-parameter',
    })
  const conversation = await readConversation(gateway.store, id)
  if (conversation === null) throw conversationNotFound(id, 'conversation')
  return conversation
}

/**
 * An input item that is already in the conversation (by its id), or twice in the input, would be in it twice: a
 * 400, as OpenAI answers it ("Duplicate item found with id …", `param` input: openai/openai-agents-python#1789).
 */
function checkNewItems(items: readonly Item[], input: unknown): void {
  if (!Array.isArray(input)) return
  const ids = new Set(items.map((item) => item.id))
  for (const item of input) {
    const id = isRecord(item) ? item.id : undefined
    if (typeof id !== 'string') continue
    if (ids.has(id))
      throw new HttpError(400, `Duplicate item found with id ${id.slice(0, 100)}. Remove duplicate items from your input and try again.`, {
        param: 'input',
        code: 'invalid-parameter',
      })
    ids.add(id)
  }
}

/**
 * A compaction of a stored conversation opens only while the responses it came from are kept: deleting a
 * response deletes what it said, compactions of it included (OpenAI: a deleted response is gone).
 */
async function checkSourcesKept(gateway: ResponsesGateway, body: Item, sources: readonly string[]): Promise<void> {
  if (sources.length === 0) return
  // The item opened is the latest compaction item of the input as the client sent it.
  const input = body.input as unknown[]
  let at = input.length - 1
  while (at > 0 && !(isRecord(input[at]) && (input[at] as Item).type === 'compaction')) at--
  const param = `input[${at}].encrypted_content`
  for (const id of sources) {
    if (gateway.store !== null && (await gateway.store.get(id)) !== null) continue
    throw new HttpError(
      400,
      `the compaction item holds items of response ${id}, which is no longer kept (deleted or expired); compact the conversation again`,
      { param, code: 'compaction-source-not-found' },
    )
  }
}

/**
 * The response `previous_response_id` names; where it is not kept, OpenAI's 400 `previous_response_not_found`
 * (what the WebSocket mode answers too), saying why where this gateway keeps no responses at all.
 */
export function previousFor(gateway: ResponsesGateway, id: string): Promise<StoredResponse> {
  if (gateway.store === null)
    throw new HttpError(
      400,
      'previous_response_id is not supported: this gateway keeps no responses; send the whole conversation in input',
      { param: 'previous_response_id', code: 'previous-response-not-found' },
    )
  return previousResponse(gateway.store, id)
}

export async function continued(
  gateway: ResponsesGateway,
  parameters: GenerationParameters,
  body: Item,
  echo: object,
  found: StoredResponse | null = null,
): Promise<Prepared> {
  const { opened, previous, history, conversation } = await historyOf(gateway, body, found)
  const render = (request: Item) => renderOffLoop(gateway, 'responses', request)
  const rendered = await render(continuedBody(opened, history))
  let prompt = rendered
  // The ids a continuation within a turn is made of: the stored response's, or those behind the conversation's
  // last items (where a response added them and nothing changed them since).
  const ids = previous ?? conversation?.ids ?? null
  let noted: GatewayDiagnostic[] = []
  if (gateway.exactContinuations && ids !== null)
    prompt =
      (await exactContinuation(ids, opened.input, rendered, () => render(continuedBody({ ...opened, input: [] }, history)))) ?? rendered
  else if (previous === null && conversation === null) {
    // The client sent its history back (`store: false`, or item references): the calls it answers may be this gateway's.
    const answered = answeredCalls(opened.input)
    if (answered !== null)
      ({ prompt, noted } = await promptAnswering(gateway, 'responses', answered.calls, rendered, () =>
        render(continuedBody({ ...opened, input: (opened.input as unknown[]).slice(0, answered.end) }, history)),
      ))
  }
  const storing = gateway.store !== null && body.store !== false
  return {
    kind: 'responses',
    parameters,
    prompt,
    rendered,
    body: echo,
    history,
    lineage: historyLineage(previous, history.length),
    input: opened.input,
    storing,
    noted,
    ...(conversation === null ? {} : { conversation: { id: conversation.object.id, revision: conversation.revision } }),
  }
}

/**
 * The function calls a Responses input answers: the run of `function_call` items its trailing
 * `function_call_output` items follow (`end`: where the outputs begin); null where it answers none, or where one
 * is not a call with string fields.
 */
function answeredCalls(input: unknown): { calls: SentCall[]; end: number } | null {
  if (!Array.isArray(input)) return null
  const typeAt = (i: number) => (isRecord(input[i]) ? (input[i] as Item).type : undefined)
  let end = input.length
  while (end > 0 && typeAt(end - 1) === 'function_call_output') end--
  let start = end
  while (start > 0 && typeAt(start - 1) === 'function_call') start--
  if (end === input.length || start === end) return null
  const calls = callsOfItems(input.slice(start, end) as Item[])
  return calls === null ? null : { calls, end }
}

/** Function call items as the client sends them back; null where one lacks a string `call_id`, `name` or `arguments`. */
export function callsOfItems(items: readonly Item[]): SentCall[] | null {
  const calls: SentCall[] = []
  for (const { call_id: id, name, arguments: text } of items) {
    if (typeof id !== 'string' || typeof name !== 'string' || typeof text !== 'string') return null
    calls.push({ id, name, arguments: text })
  }
  return calls
}
