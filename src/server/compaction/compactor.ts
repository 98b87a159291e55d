/**
 * Compaction, as the Open Responses specification (2026-04-24, "Context Compaction") and OpenAI define it:
 * `POST /v1/responses/compact` takes a conversation (`input`, and/or `previous_response_id`) and answers a
 * `response.compaction` whose `output` is the conversation's user messages followed by one `compaction` item;
 * a client starts a new chain with that output as its input (plus its next items), without
 * `previous_response_id`, and the server reads the compaction item's `encrypted_content`, which is opaque to the
 * client.
 *
 * Here that content is the conversation's items themselves, sealed (deflated, then AES-256-GCM with the
 * `Compactor`'s key, so a client can neither read nor alter it): nothing is summarised by a model and nothing
 * is lost. A compaction shortens what a client carries, not the prompt: Harmony's renderer already drops what
 * the format drops (earlier turns' reasoning). When such an item comes back, `expand` puts the sealed items in
 * its place and drops the items before it, which were the copies of its user messages (OpenAI: the items before
 * the latest compaction item may be dropped). Sealed with a key of the process unless one is given: gateways
 * that share compactions share a key.
 */

import { randomBytes, randomUUID } from 'node:crypto'
import { checkOptions, is, type OptionSpec, optionError } from '../../base/options'
import { isRecord } from '../../base/records'
import { HttpError } from '../../http/errors'
import { checkRequestFields } from '../../http/fields'
import { holdsCompaction } from '../pipeline/continues'
import { inputItemsOf } from '../responses/conversation'
import { OVERSIZED, Sealer } from '../stores/seal'

type Item = Record<string, unknown>

export interface CompactorOptions {
  /**
   * The 32-byte key that seals compaction items (bytes, or 64 hex digits). Default: a random key of this
   * process, so its compactions open only here; gateways that share compactions (several processes or hosts)
   * pass the same key.
   */
  key?: Uint8Array | string
  /** The longest `encrypted_content` made or taken, in characters. Default 10 MiB, the specification's bound on it. */
  maxSealedLength?: number
  /**
   * The most a compaction holds: the bytes of its items' JSON, which opening one inflates and parses (on the
   * event loop). A conversation larger than this is not compacted (a 400), and an item that would open to more
   * is refused while inflating. Default 4 MiB, the gateway's default body limit: a compaction item opens to no
   * more than a client could send whole (the gateway sets it to its `bodyLimit`), so a small item cannot
   * stand for a large request.
   */
  maxOpenedBytes?: number
}

// `key` is checked apart: an option error shows the value it got, and a key's must not be shown.
const OPTIONS: OptionSpec = { key: is.any, maxSealedLength: is.integer(64), maxOpenedBytes: is.integer(64) }

const isKey = (value: unknown) =>
  value instanceof Uint8Array ? value.length === 32 : typeof value === 'string' && /^[0-9a-fA-F]{64}$/.test(value)

export const DEFAULT_MAX_OPENED_BYTES = 4 * 1024 * 1024

export const DEFAULT_MAX_SEALED_LENGTH = 10 * 1024 * 1024

/** What `POST /v1/responses/compact` answers (Open Responses `CompactResource`). */
export interface CompactionResource {
  id: string
  object: 'response.compaction'
  created_at: number
  output: Item[]
  usage: {
    input_tokens: number
    output_tokens: number
    total_tokens: number
    input_tokens_details: { cached_tokens: number }
    output_tokens_details: { reasoning_tokens: number }
  }
}

export class Compactor {
  /** The gateway's seal: its key seals compactions and, for stateless clients, reasoning (sealed-reasoning.ts). */
  readonly sealer: Sealer

  constructor(options: CompactorOptions = {}) {
    checkOptions(options, OPTIONS, 'Compactor')
    const { key } = options
    if (key !== undefined && !isKey(key))
      throw optionError(TypeError, "Compactor: option 'key' must be 32 bytes (a Uint8Array) or 64 hex digits (its value is not shown)")
    this.sealer = new Sealer(
      key === undefined ? randomBytes(32) : typeof key === 'string' ? Buffer.from(key, 'hex') : Buffer.from(key),
      options.maxOpenedBytes ?? DEFAULT_MAX_OPENED_BYTES,
      options.maxSealedLength ?? DEFAULT_MAX_SEALED_LENGTH,
    )
  }

  /**
   * The compaction of a conversation (`items`: every item so far, the previous response's included, in
   * order; `inputTokens`: the tokens of its prompt, for usage): its user messages, each with an id and
   * status, then one `compaction` item sealing all the items. A conversation too large to seal is a 400.
   * `sources`: the ids of the stored responses the items came from, sealed with them, so that the item stops
   * opening once one of them is deleted (`expandWithSources` gives them back to be looked up). `owner`: the API
   * key's name it is made for; it opens for that owner only.
   */
  compaction(
    items: readonly Item[],
    usage: { inputTokens: number },
    { sources = [], owner = null }: { sources?: readonly string[]; owner?: string | null } = {},
  ): CompactionResource {
    const stem = randomUUID().replaceAll('-', '')
    const listed = inputItemsOf({ input: [...items] }, stem)
    // Without sources, the items alone: what this gateway sealed before it kept sources, which still opens.
    const sealed = this.seal(sources.length === 0 ? listed : { items: listed, sources: [...new Set(sources)] }, owner)
    const users = listed
      .filter((item) => item.type === 'message' && item.role === 'user')
      .map((item) => ({ ...item, status: typeof item.status === 'string' ? item.status : 'completed' }))
    return {
      id: `cmp_${stem}`,
      object: 'response.compaction',
      created_at: Math.floor(Date.now() / 1000),
      output: [...users, { id: `cmp_${stem}_item`, type: 'compaction', encrypted_content: sealed }],
      usage: {
        input_tokens: usage.inputTokens,
        output_tokens: 0,
        total_tokens: usage.inputTokens,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens_details: { reasoning_tokens: 0 },
      },
    }
  }

  /** Whether a request's input holds a compaction item (which `expand` must open before the body is rendered). */
  holds(body: Item): boolean {
    return holdsCompaction(body)
  }

  /**
   * The body with its latest compaction item opened: the items it sealed, then the items after it (the items
   * before it are dropped: they are copies of what it seals). The body itself when it holds none. Content this
   * compactor did not seal (another key, altered, truncated) is a 400 naming the item.
   */
  expand(body: Item): Item {
    return this.expandWithSources(body).body
  }

  /**
   * `expand`, and the ids of the stored responses the opened compaction's items came from; `owner`: the API key's
   * name of the request (an item made for another owner is not opened).
   */
  expandWithSources(body: Item, owner: string | null = null): { body: Item; sources: string[] } {
    if (!this.holds(body)) return { body, sources: [] }
    const input = body.input as unknown[]
    let last = -1
    input.forEach((item, i) => {
      if (isRecord(item) && item.type === 'compaction') last = i
    })
    const at = `input[${last}]`
    const item = input[last] as Item
    if (typeof item.encrypted_content !== 'string') throw invalid(`${at}.encrypted_content must be a string`, `${at}.encrypted_content`)
    const { items, sources } = this.open(item.encrypted_content, `${at}.encrypted_content`, owner)
    return { body: { ...body, input: [...items, ...input.slice(last + 1)] }, sources }
  }

  private seal(value: Item[] | { items: Item[]; sources: string[] }, owner: string | null): string {
    const sealed = this.sealer.seal('compaction', value, owner)
    if (sealed === null)
      throw new HttpError(
        400,
        `the conversation is too large to compact (at most ${this.sealer.maxOpenedBytes} bytes of items, ${this.sealer.maxSealedLength} characters sealed)`,
        { param: 'input', code: 'compaction-too-large' },
      )
    return sealed
  }

  private open(sealed: string, param: string, owner: string | null): { items: Item[]; sources: string[] } {
    const opened = this.sealer.open('compaction', sealed, owner)
    if (opened === OVERSIZED)
      throw new HttpError(400, `${param} opens to more than ${this.sealer.maxOpenedBytes} bytes, this gateway's bound on a compaction`, {
        param,
        code: 'compaction-too-large',
      })
    const { items, sources } = Array.isArray(opened) ? { items: opened, sources: [] } : isRecord(opened) ? opened : {}
    if (!Array.isArray(items) || !items.every(isRecord) || !Array.isArray(sources) || !sources.every((id) => typeof id === 'string'))
      throw invalid(
        `${param} is not a compaction this gateway made (made with another key, altered or cut); compact the conversation here first`,
        param,
      )
    return { items, sources }
  }
}

/**
 * A `POST /v1/responses/compact` body, checked: every field against its table (unknown ones refused unless
 * `unknownFields` is `'ignore'`), `model` required, `previous_response_id` and `instructions` strings or null.
 * The conversation itself is checked by rendering it.
 */
export function checkCompactRequest(body: unknown, options: { unknownFields?: 'refuse' | 'ignore' } = {}): Item {
  if (!isRecord(body)) throw new HttpError(400, 'the request body must be a JSON object', { param: null, code: 'invalid-body' })
  checkRequestFields('compact', body, options.unknownFields)
  if (body.model === undefined || body.model === null)
    throw new HttpError(400, "Missing required parameter: 'model'.", { param: 'model', code: 'missing_required_parameter' })
  for (const name of ['model', 'previous_response_id', 'instructions']) {
    const value = body[name]
    if (value !== undefined && value !== null && typeof value !== 'string')
      throw new HttpError(400, `${name} must be a string`, { param: name, code: 'invalid-parameter' })
  }
  if (body.input !== undefined && body.input !== null && typeof body.input !== 'string' && !Array.isArray(body.input))
    throw new HttpError(400, 'input must be a string or an array of items', { param: 'input', code: 'invalid-parameter' })
  return body
}

function invalid(message: string, param: string): HttpError {
  return new HttpError(400, message, { param, code: 'invalid_encrypted_content' })
}
