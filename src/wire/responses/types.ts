/**
 * The Responses API's objects as the adapter writes them: its options, output items, the `response` object, its
 * events and the request fields a response echoes.
 */

import type { AdapterOptions } from '../adapter'
import type { OutputLogprob } from '../logprobs'

export interface ResponsesAdapterOptions extends AdapterOptions {
  model: string
  /** Response id (`resp_…`); item ids derive from it. Default: a random one. */
  id?: string
  /** Unix seconds. Default: now. */
  createdAt?: number
  /** `completed_at`, Unix seconds. Default: `createdAt` plus the whole seconds since the adapter was made. */
  completedAt?: number
  /** Input tokens, for `usage`. Default: what an engine step's `usage` reported, else 0. */
  inputTokens?: number
  /**
   * The Responses request body as it came (or any object with its fields): the response object echoes what it
   * asked for (`instructions`, `tools`, `tool_choice`, sampling fields, `metadata`, …; `responsesRequestEcho`).
   * Only echoed: the parser's tool names still come from `parser.toolNames` and `tools`. Default: the option
   * `tools`, and OpenAI's defaults for the rest.
   */
  request?: object
  /** The gateway keeps this response (in a `ResponseStore`): its `store` says true. Default false. */
  stored?: boolean
  /** The gateway runs this response in the background (`background: true`): its `background` says true. Default false. */
  background?: boolean
  /**
   * Seals a reasoning item's text for its `encrypted_content` (the request's `include:
   * ['reasoning.encrypted_content']`); the gateway's opens it when the item comes back. Null from it: no content
   * could be sealed (the field is null). Default: reasoning items carry no `encrypted_content`.
   */
  sealReasoning?: (text: string) => string | null
  /**
   * Reasoning items carry their text as a summary part too, streamed as summary events, for clients that read
   * only summaries (the AI SDK's OpenAI provider): gpt-oss writes no summary, so its summary is its reasoning.
   * Each reasoning delta is then two events, written off the fast lane. Default false.
   */
  reasoningSummary?: boolean
  /**
   * Whose event names and stream end: `'openai'` (default), or `'open-responses'`, where the Open Responses
   * specification (2026-04-24) differs from OpenAI's: raw reasoning streams as `response.reasoning.delta` and
   * `response.reasoning.done` (its schema/components/schemas/ResponseReasoningDeltaStreamingEvent.json and
   * …DoneStreamingEvent.json; OpenAI's are `response.reasoning_text.*`), and the SSE stream ends with `data:
   * [DONE]` (its "Streaming" section: "The terminal event MUST be the literal string [DONE]"; `endsWithDone`).
   */
  dialect?: ResponsesDialect
  /**
   * With `builtinTools: 'run'`: a `code_interpreter_call` item carries what the code printed as `outputs: [{
   * type: 'logs', logs }]` (the request's `include: ['code_interpreter_call.outputs']`, as OpenAI's); else
   * `outputs` is null. Default false.
   */
  codeInterpreterOutputs?: boolean
  /**
   * The page a citation marker of gpt-oss's browser names (a gateway that runs the browser): given the marker's
   * cursor and how many results of `browser.*` calls the completion had read before it, the page's `url` and
   * `title`, or null for none. Each answer's `【cursor†…】` markers whose cursor names a page are then replaced,
   * whole and streamed, by ` ([domain](url)) ` as gpt-oss's own browser tool replaces them (`citations.ts`),
   * each with a `url_citation` annotation over its replacement, sent as `response.output_text.annotation.added`
   * after the delta that holds it. Default: none (the text as the model wrote it, no annotations).
   */
  citedPage?: CitedPageOf
  /**
   * The tools of the request's remote MCP servers, as the gateway listed them: an `mcp_list_tools` item each,
   * first in the output (with `runNamespaces` naming their labels, their calls are `mcp_call` items).
   */
  mcpListTools?: { server_label: string; tools: unknown[] }[]
  /**
   * The MCP calls the client approved in this request (`mcp_approval_response`), which the gateway ran before
   * generating: a completed (or failed) `mcp_call` item each, after the `mcp_list_tools` items.
   */
  mcpApproved?: ApprovedCall[]
  /**
   * Whether a call of a tool the gateway runs (`label.tool` of an MCP server) waits for the client's approval:
   * it is then an `mcp_approval_request` item, not run. Default: none waits.
   */
  needsApproval?: (tool: string) => boolean
}

/** The event names and stream end a Responses stream follows (`ResponsesAdapterOptions.dialect`). */
export type ResponsesDialect = 'openai' | 'open-responses'

/** A reasoning item's summary part (with the `reasoningSummary` option: the reasoning itself). */
interface SummaryPart {
  type: 'summary_text'
  text: string
}

export type ResponseItem =
  | {
      id: string
      type: 'reasoning'
      summary: SummaryPart[]
      content: { type: 'reasoning_text'; text: string }[]
      /** With the `sealReasoning` option, once the item is done. */
      encrypted_content?: string | null
      status: ItemStatus
    }
  | {
      id: string
      type: 'message'
      role: 'assistant'
      status: ItemStatus
      /** `logprobs`: with the `logprobs` option, the log probabilities of the text's tokens. */
      /** `annotations`: with the `citedPage` option, the pages the text cites. */
      content: { type: 'output_text'; text: string; annotations: UrlCitation[]; logprobs: OutputLogprob[] }[]
    }
  | {
      id: string
      type: 'function_call'
      call_id: string
      name: string
      /** A call to a tool of a `namespace` tool: its namespace (`name` is the tool's within it), as OpenAI's. */
      namespace?: string
      arguments: string
      status: ItemStatus
    }
  | {
      /** gpt-oss's `python` tool, run by the gateway: the code, and what it printed (`codeInterpreterOutputs`). */
      id: string
      type: 'code_interpreter_call'
      status: ToolItemStatus | 'interpreting'
      code: string
      container_id: string
      outputs: { type: 'logs'; logs: string }[] | null
    }
  | {
      /** gpt-oss's `browser` tool, run by the gateway: what it did (search, open a page, find in one). */
      id: string
      type: 'web_search_call'
      status: ToolItemStatus | 'searching'
      action: WebSearchAction
    }
  | {
      /** A remote MCP server's tools, as the gateway listed them for the model. */
      id: string
      type: 'mcp_list_tools'
      server_label: string
      tools: unknown[]
    }
  | {
      /** A call of a remote MCP server's tool, run by the gateway. */
      id: string
      type: 'mcp_call'
      server_label: string
      name: string
      arguments: string
      output: string | null
      error: string | null
      status: ToolItemStatus
      /** A call the client approved: the `mcp_approval_request` it answered. */
      approval_request_id?: string
    }
  | {
      /** A call of a remote MCP server's tool that waits for the client's approval (`mcp_approval_response`). */
      id: string
      type: 'mcp_approval_request'
      server_label: string
      name: string
      arguments: string
    }

/** A remote MCP call the client approved (`mcp_approval_response`), run by the gateway before its response generates. */
export interface ApprovedCall {
  approval_request_id: string
  server_label: string
  name: string
  arguments: string
  /** What the model read; null when the call failed (`error` says why, and the model read that). */
  output: string | null
  error: string | null
}

export type ItemStatus = 'in_progress' | 'completed' | 'incomplete'
/** A tool the gateway ran can also have failed (its result says why). */
export type ToolItemStatus = ItemStatus | 'failed'

/**
 * The page a citation's cursor names, given how many results of the browser the answer's completion had read
 * before it; null: none (the marker stays as written).
 */
export type CitedPageOf = (cursor: number, results: number) => { url: string; title: string } | null

/** A passage of an answer that cites a page (as OpenAI's web search annotates answers). */
export interface UrlCitation {
  type: 'url_citation'
  /**
   * Where the citation is in the text: its first code point, and the one after its last (Unicode code points, as
   * gpt-oss's reference counts them and a Python client indexes text; `Array.from(text)` in JavaScript).
   */
  start_index: number
  end_index: number
  url: string
  title: string
}

/** A `web_search_call`'s action, as OpenAI's (`url` null where gpt-oss named a page by its number, not its address). */
export type WebSearchAction =
  | { type: 'search'; query: string }
  | { type: 'open_page'; url: string | null }
  | { type: 'find'; pattern: string; url: string | null }

export interface ResponseUsage {
  input_tokens: number
  input_tokens_details: { cached_tokens: number }
  output_tokens: number
  output_tokens_details: { reasoning_tokens: number }
  total_tokens: number
}

/** A function tool as a response lists it: the request's, with the fields it left out null. */
export interface ResponseFunctionTool {
  type: 'function'
  name: string
  description: string | null
  parameters: Record<string, unknown> | null
  /** As the request said; null when it did not (nothing here enforces a schema either way). */
  strict: boolean | null
  [field: string]: unknown
}

/**
 * The fields of a response that say what its request asked for (`responsesRequestEcho`): every field of the
 * Open Responses specification's ResponseResource that is not about the generation itself.
 */
export interface ResponseRequestEcho {
  background: boolean
  instructions: string | null
  max_output_tokens: number | null
  max_tool_calls: number | null
  parallel_tool_calls: boolean
  presence_penalty: number
  frequency_penalty: number
  previous_response_id: string | null
  prompt_cache_key: string | null
  reasoning: { effort: string | null; summary: string | null }
  safety_identifier: string | null
  service_tier: string
  store: boolean
  temperature: number
  text: { format: { type: string; [field: string]: unknown }; [field: string]: unknown }
  tool_choice: string | Record<string, unknown>
  tools: (ResponseFunctionTool | Record<string, unknown>)[]
  top_logprobs: number
  top_p: number
  truncation: 'auto' | 'disabled'
  user: string | null
  metadata: Record<string, string>
  /** The conversation the response belongs to, where its request named one. */
  conversation?: { id: string }
}

/**
 * A `response` object: every field the Open Responses specification's ResponseResource requires
 * (openresponses/openresponses, public/openapi/openapi.json), and `user` as OpenAI's Response has it.
 */
export interface ResponseObject extends ResponseRequestEcho {
  id: string
  object: 'response'
  created_at: number
  /** `queued` and `cancelled` only for a background response (the gateway sets them: `response(status)`). */
  status: 'queued' | 'in_progress' | 'completed' | 'incomplete' | 'failed' | 'cancelled'
  /** Unix seconds when it completed: set with status `completed` only (as OpenAI's Response says), else null. */
  completed_at: number | null
  model: string
  output: ResponseItem[]
  usage: ResponseUsage | null
  incomplete_details: { reason: 'max_output_tokens' } | null
  /** Why it failed, with status `failed` (`error()`); else null. */
  error: { code: string; message: string } | null
}

/** A `response.*` event; fields as in the OpenAI API reference for each type. */
export interface ResponseEvent {
  type: string
  sequence_number: number
  [field: string]: unknown
}
