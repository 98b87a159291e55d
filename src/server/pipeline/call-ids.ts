/**
 * Exact prompts for clients that send their history back (Chat Completions and Messages tool loops, Responses
 * with `store: false` as Codex sends it, or with `item_reference`s as the AI SDK does). Such a client returns
 * the tool calls the gateway gave it, then their results; a re-render of that history differs from the ids the
 * model generated wherever the model wrote a header otherwise than the reference renders it (` to=…` before or
 * after `<|channel|>`, spacing, its JSON as the client re-serialised it), and the engine's prefix cache misses
 * from the first call on. This cache remembers, after an answer that ended with tool calls, the ids the engine
 * saw and generated, under a digest of those calls (ids, names, arguments) and of the caller's key; a later
 * request that sends the same calls back followed by their results is prompted with those ids and the results'
 * tokens (`exactPrompt`, checked as for a stored response), not with a re-render.
 *
 * The records are side records of the gateway's response store (the SQLite file `--workers` share, Redis for
 * replicas), bounded by that store's bounds and evicted with its records; a gateway that keeps no responses
 * keeps them in a memory store of their own (an hour, 64 MiB). A miss (evicted, expired, another gateway's
 * calls, a history the client changed) is a re-render, never a wrong prompt: `exactPrompt` checks that the
 * request's own render continues what was remembered.
 */
import { createHash } from 'node:crypto'

import { checkOptions, is, type OptionSpec, optionError } from '../../base/options'
import { isRecord } from '../../base/records'
import type { RenderedPrompt } from '../../render/index'
import { CALL_IDS_PREFIX } from '../stores/side-records'
import { EVICTING_BOUND_OPTIONS, type EvictingStoreBounds, MemoryResponseStore, type ResponseStore } from '../stores/store'
import { exactPrompt } from './exact-prompt'

/** A tool call as the client sends it back: its id, its function's name, its arguments (JSON text, as written or re-serialised). */
export interface SentCall {
  id: string
  name: string
  arguments: string
}

/** The ids behind an answer that ended with calls: the prompt the engine saw, what it generated, the prompt's re-render. */
export interface CallIds {
  prompt: ArrayLike<number>
  output: ArrayLike<number>
  /** Where the prompt was itself exact: the re-render it stood for, which the next request's render must continue. */
  rendered?: ArrayLike<number>
}

/**
 * What became of a request that answers calls: `exact` (prompted with the remembered ids), `not-found` (the
 * calls are not remembered: never, evicted, expired, another gateway's) or `changed` (remembered, but the
 * request's history no longer renders to what the ids continue: instructions, tools or earlier messages changed).
 */
export type ExactOutcome = 'exact' | 'not-found' | 'changed'

export interface CallIdCacheOptions extends EvictingStoreBounds {
  /**
   * Where the records are kept, beside the responses (side records): a gateway passes its response store, so
   * that workers and replicas sharing the store share the cache. Absent: a memory store of the cache's own,
   * bounded by the other options (default an hour, 64 MiB).
   */
  store?: ResponseStore
}

const OPTIONS: OptionSpec = { ...EVICTING_BOUND_OPTIONS, store: is.object }

export class CallIdCache {
  private readonly store: ResponseStore
  private readonly ownStore: boolean

  constructor(options: CallIdCacheOptions = {}) {
    const { store, ...bounds } = checkOptions<CallIdCacheOptions>(options, OPTIONS, 'CallIdCache')
    if (store !== undefined && Object.keys(bounds).length > 0)
      throw optionError(TypeError, "CallIdCache: a given store has bounds of its own: give 'store' or the bounds, not both")
    this.ownStore = store === undefined
    this.store = store ?? new MemoryResponseStore({ ttlSeconds: 3600, maxBytes: 64 * 1024 * 1024, ...bounds })
  }

  /** After an answer that ended with `calls` (as the client will send them back), for the caller `owner`. */
  async remember(calls: readonly SentCall[], owner: string | null, ids: CallIds): Promise<void> {
    if (calls.length === 0) return
    await this.store.put({
      id: keyOf(calls, owner),
      createdAt: Math.floor(Date.now() / 1000),
      response: {},
      input: [],
      promptTokens: Array.from(ids.prompt),
      outputTokens: Array.from(ids.output),
      ...(ids.rendered === undefined ? {} : { renderedPromptTokens: Array.from(ids.rendered) }),
    })
  }

  /**
   * The exact prompt of a request whose history ends with `calls` followed only by their results; `rendered`:
   * the request's re-render; `renderWithout`: the re-render of its history up to the calls (without the results).
   */
  async exactPrompt(
    calls: readonly SentCall[],
    owner: string | null,
    rendered: RenderedPrompt,
    renderWithout: () => RenderedPrompt | Promise<RenderedPrompt>,
  ): Promise<{ prompt: RenderedPrompt | null; outcome: ExactOutcome }> {
    const record = calls.length === 0 ? null : await this.store.get(keyOf(calls, owner))
    if (record === null) return { prompt: null, outcome: 'not-found' }
    const prompt = await exactPrompt(record, rendered, renderWithout)
    return { prompt, outcome: prompt === null ? 'changed' : 'exact' }
  }

  /** Closes the cache's own store (a gateway's store is the gateway's to close). */
  close(): Promise<void> {
    return this.ownStore ? this.store.close() : Promise.resolve()
  }
}

/**
 * The record's key: a digest of the caller and the calls. Arguments count by what they mean (JSON parsed and
 * written again, keys sorted), so that a client that re-serialises them (the Anthropic SDK's `tool_use.input`,
 * the AI SDK's calls) still finds the ids; a call whose arguments are no JSON counts by its text.
 */
function keyOf(calls: readonly SentCall[], owner: string | null): string {
  const digest = createHash('sha256').update(JSON.stringify([owner, calls.map((c) => [c.id, c.name, canonical(c.arguments)])]))
  return CALL_IDS_PREFIX + digest.digest('base64url')
}

function canonical(text: string): string {
  try {
    return JSON.stringify(sorted(JSON.parse(text)))
  } catch {
    return text
  }
}

function sorted(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted)
  if (!isRecord(value)) return value
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((key) => [key, sorted(value[key])]),
  )
}
