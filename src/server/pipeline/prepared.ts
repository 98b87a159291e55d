/** What preparing a request gives (`Prepared`), and rendering off the event loop, which every kind of preparation uses. */

import type { GenerationParameters } from '../../http/validate'
import { type RenderedPrompt, renderChatCompletionRequest, renderResponsesRequest } from '../../render/index'
import type { ApprovedCall } from '../../wire/responses'
import type { HistoryLineage } from '../stores/store'
import type { McpServer } from '../tools/mcp'
import type { Gateway, GatewayDiagnostic } from './context'

export type ApiKind = 'chat' | 'responses'
export type Item = Record<string, unknown>

/** A request ready to generate. */
export interface Prepared {
  kind: ApiKind
  parameters: GenerationParameters
  /** What the engine is prompted with. */
  prompt: RenderedPrompt
  /** Where `prompt` is made of earlier ids (an exact continuation): the request's own render, kept to check the next one. */
  rendered?: RenderedPrompt
  /** What a response object echoes of its request: the body, or the echo a render worker made of it. */
  body: object
  /** Responses: the stored items the request continues (they come before its own input). */
  history: Item[]
  /** Responses: whose items `history` holds (the response kept after it says whose its input's are). */
  lineage?: HistoryLineage
  /** Responses: the request's own input (a compaction opened), as it is kept. */
  input: unknown
  /** Responses: the response is to be kept (a store, and `store` not false). */
  storing: boolean
  /**
   * Responses: the conversation the request names (`conversation`), whose items `history` is, at the revision
   * they were read at; the request's input and the response's output are added to it after the response.
   */
  conversation?: { id: string; revision: number }
  /** Responses: the remote MCP servers the request names, connected and listed (`mcp-servers.ts`); closed with the response. */
  mcp?: McpServer[]
  /** Responses: the MCP calls the client approved in this request, run before it generates (`mcp_call` items first). */
  mcpApproved?: ApprovedCall[]
  /**
   * What preparing found to say of the request (a `prompt-re-rendered`), said when it is served
   * (serve-face.ts `reportPrepared`): preparing has no request's log line at hand.
   */
  noted?: GatewayDiagnostic[]
}

/** Ends what a prepared request holds open when it is never generated (a 429, a failing engine): its MCP connections. */
export async function releasePrepared(prepared: Prepared): Promise<void> {
  await Promise.all(prepared.mcp?.map((server) => server.close()) ?? [])
}

/** A request body rendered off the event loop when there are workers (else here). */
export function renderOffLoop(gateway: Gateway, kind: ApiKind, body: Item): Promise<RenderedPrompt> | RenderedPrompt {
  return gateway.workers !== null ? gateway.workers.render(kind, body) : renderHere(gateway, kind, body)
}

/** A request body rendered on the event loop. */
export function renderHere(gateway: Gateway, kind: ApiKind, body: Item): RenderedPrompt {
  return (kind === 'chat' ? renderChatCompletionRequest : renderResponsesRequest)(body, gateway.renderOptions)
}
