/**
 * A face: one API the gateway answers (Chat Completions, Responses, and whatever comes next), as one
 * record of what differs between them: how its request is read, its adapter, its whole answer, what is kept
 * after it, its error body. Everything else (the engine, SSE with backpressure, one JSON object, the request
 * log, keep-before-conclude) is the one pipeline's (`serveFace`), the same for every face and transport. A new
 * API is a folder in `src/server/` that exports a `Feature` (listed in gateway/create-gateway.ts `FEATURES`) and a
 * file in `src/wire/`; nothing else names it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'

import type { EngineStep } from '../../engines/types'
import type { ErrorShape } from '../../http/errors'
import type { SseAdapter } from '../../http/sse'
import type { AdapterDiagnostic } from '../../wire/adapter'
import type { ToolCaller } from '../tools/loop'
import type { Gateway } from './context'
import type { Prepared } from './prepared'

export interface Face<G extends Gateway, Options, Answer extends object, Adapter extends SseAdapter> {
  /** The request read, checked and rendered (its continuation found). */
  prepare(gateway: G, request: IncomingMessage): Promise<Prepared>
  /** The adapter's options for a prepared request (its id, what it echoes, how it seals reasoning…). */
  options(gateway: G, prepared: Prepared, request: IncomingMessage): Options
  /**
   * The tools the gateway runs inside this answer (their calls run between engine steps), made before the
   * adapter, whose options they may extend (where citations point); null or absent: none.
   */
  tools?(gateway: G, prepared: Prepared, options: Options): ToolCaller | null
  /** Answers a request that is not served now (Responses' `background`): true when it took it. */
  detached?(
    gateway: G,
    request: IncomingMessage,
    response: ServerResponse,
    prepared: Prepared,
    options: Options,
    tools: ToolCaller | null,
  ): Promise<boolean>
  /** The streaming adapter. */
  stream(options: Options, prepared: Prepared): Adapter
  /** The whole answer of one collected engine step, with what the parser recovered from. */
  whole(step: EngineStep, options: Options): Answer & { diagnostics: AdapterDiagnostic[] }
  /** The answer a streaming adapter has assembled. */
  answer(adapter: Adapter): Answer
  /** Whether the answer is kept (the generated ids are then recorded as they come). */
  keeps(gateway: G, prepared: Prepared): boolean
  /** Keeps the answer with its ids; false when the store could not (a failure is logged, never thrown). */
  keep(gateway: G, answer: Answer, prepared: Prepared, generated: number[]): Promise<boolean>
  /** Says, in the answer, that it was not kept (Responses: `store: false`). */
  unkept?(kept: { adapter: Adapter } | { answer: Answer }): void
  /** Several choices of one request (Chat's `n`, `parameters.n` above 1); absent: the face answers one. */
  choices?: Choices<Options, Answer, Adapter>
}

/**
 * What a face does for several choices of one request: each choice is a generation of its own, read by an
 * adapter of its own and kept by `keep` on its own; these say how a choice is told apart and how the choices
 * make one answer.
 */
export interface Choices<Options, Answer extends object, Adapter extends SseAdapter> {
  /** Choice `index`'s streaming adapter. */
  stream(options: Options, prepared: Prepared, index: number): Adapter
  /** Choice `index`'s whole answer, of its one collected engine step. */
  whole(step: EngineStep, options: Options, index: number): Answer & { diagnostics: AdapterDiagnostic[] }
  /** The choices' whole answers, in index order, as one. */
  merge(answers: readonly Answer[]): Answer
  /** The SSE bytes after every choice ended, before the stream's last frame (Chat: the usage chunk, summed). */
  closingSse(adapters: readonly Adapter[], prepared: Prepared): string
}

/** A route's handler, given the gateway as the request's caller sees it. */
export type Handler<G extends Gateway> = (gateway: G, request: IncomingMessage, response: ServerResponse) => Promise<void> | void

/** What an API's folder gives the gateway: its routes, and how they answer. */
export interface Feature<G extends Gateway> {
  /** Routes of fixed paths: path → method → handler. */
  routes?: Record<string, Record<string, Handler<G>>>
  /**
   * Routes whose path holds an id (`/v1/responses/{id}`…): answers and resolves true when the path is one of
   * them. Called with the caller's view, only for a path no fixed route has.
   */
  idRoutes?(gateway: G, request: IncomingMessage, response: ServerResponse, url: URL): Promise<boolean>
  /** The label (metrics, traces, log) of a path with ids, never the path as sent; null when not one of its own. */
  label?(path: string): string | null
  /** The error body of this feature's fixed routes (default: OpenAI's). */
  errorShape?: ErrorShape
  /** Called on each of its fixed routes before anything answers (an id header its clients read from every answer). */
  begin?(response: ServerResponse): void
  /** `/v1/models` in the shape this API's clients read, when the request is theirs; null otherwise. */
  models?(request: IncomingMessage, model: string, created: number): object | null
  /** Clients of this API that take the gateway's root as their base URL and add the API's paths themselves. */
  rootClients?: string
}
