/** What the Responses API reads of the gateway beyond what every API does, and the parts other folders plug in. */
import type { IncomingMessage, ServerResponse } from 'node:http'

import type { ResponsesAdapterOptions, ResponsesDialect } from '../../wire/responses'
import type { Gateway } from '../pipeline/context'
import type { Item, Prepared } from '../pipeline/prepared'
import type { SearchBackend } from '../tools/browser'
import type { ToolCaller } from '../tools/loop'
import type { PythonRunner } from '../tools/python'

/** When a Responses reasoning item carries its reasoning as a summary too (`reasoningSummary`). */
export type ReasoningSummaryRule = 'asked' | 'always' | 'never'

/**
 * Opens the compaction items of a request (the `Compactor` of compaction/): the body with each opened, and the
 * stored responses its sealed items came from.
 */
interface CompactionOpener {
  expandWithSources(body: Item, owner: string | null): { body: Item; sources: string[] }
}

/** Serves a request with `background: true` (background/): queued, kept, run detached from the client. */
export type Detach = (
  gateway: ResponsesGateway,
  request: IncomingMessage,
  response: ServerResponse,
  prepared: Prepared,
  options: ResponsesAdapterOptions,
  tools: ToolCaller | null,
) => Promise<void>

export interface ResponsesGateway extends Gateway {
  reasoningSummary: ReasoningSummaryRule
  responsesDialect: ResponsesDialect
  /** A continuation within a turn is made of the ids the engine saw and generated. */
  exactContinuations: boolean
  compactor: CompactionOpener
  /** Serves `background: true`; null: this gateway keeps no responses, so it cannot. */
  detach: Detach | null
  /** gpt-oss's own tools, run inside a response; null: hosted tools. */
  python: PythonRunner | null
  browser: SearchBackend | null
  /** URL prefixes of the MCP servers a request may name; null: MCP off. */
  mcpServers: readonly string[] | null
  mcpTimeMs: number
}
