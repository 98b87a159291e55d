/**
 * Responses API: parser output → `response.*` stream events (with a monotone `sequence_number` and stable
 * item ids), or one `response` object; a wire format on the adapter base (`adapter.ts`), which routes, reads
 * and finishes.
 *
 * Every message becomes one output item, by the same routing as Chat Completions (`routing.ts`): reasoning
 * → a `reasoning` item (`reasoning_text`), content → a `message` item (`output_text`), a tool call → a
 * `function_call` item. Each item gets its added/delta/done events at the message's own boundaries, also
 * when a batch holds the end of one message and the start of the next, and at the end of the stream. The
 * stream ends with `response.completed`, or `response.incomplete` when it ended without a stop token, or
 * (`error()`) `error` and `response.failed`. Every `response` snapshot carries what the request asked for
 * (option `request`, `responsesRequestEcho`).
 */

import { FRAME_COUNTER, FRAME_TEXT, type FrameTemplate, writeFrame } from '../backend/frames'
import {
  type AdapterDiagnostic,
  type AdapterOptions,
  nowSeconds,
  readWhole,
  WireAdapter,
  type WireFormat,
  type WireMessage,
} from './adapter'
import type { FinishOptions, FinishReason } from './finish'
import type { AdapterInput } from './input'
import type { OutputLogprob } from './logprobs'
import type { MessageEvent } from './message-stream'
import { checkAdapterOptions, functionFields, RESPONSES_OPTIONS, wholeOptions } from './options'
import { isBuiltinTool, splitRecipient } from './routing'
import type { RecoveredCall } from './text-tool-calls'

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
   * The citations of an answer's text, given its whole text when its message closes (a gateway that runs
   * gpt-oss's browser: its `【cursor†L…】` markers, with the pages they name): the `output_text` part's
   * `annotations`, each also sent as `response.output_text.annotation.added`. Default: no annotations.
   */
  citations?: (text: string) => UrlCitation[]
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

/** The raw reasoning events' names in each dialect. */
const REASONING_EVENTS = {
  openai: { delta: 'response.reasoning_text.delta', done: 'response.reasoning_text.done' },
  'open-responses': { delta: 'response.reasoning.delta', done: 'response.reasoning.done' },
} as const satisfies Record<ResponsesDialect, { delta: string; done: string }>

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
      /** `annotations`: with the `citations` option, the pages the text cites. */
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

type ItemStatus = 'in_progress' | 'completed' | 'incomplete'
/** A tool the gateway ran can also have failed (its result says why). */
type ToolItemStatus = ItemStatus | 'failed'

/** A passage of an answer that cites a page (as OpenAI's web search annotates answers). */
export interface UrlCitation {
  type: 'url_citation'
  /** Where the citation is in the text (UTF-16 code units, as JavaScript indexes strings). */
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

const RESPONSES: WireFormat = {
  name: 'ResponsesStream',
  options: RESPONSES_OPTIONS,
  idPrefix: 'resp_',
  promptTokensOption: 'inputTokens',
  finished: 'finish(), error() or close(): create a new adapter for a new response',
}

const RESPONSES_WHOLE_OPTIONS = wholeOptions(RESPONSES_OPTIONS)

/** The output item of a message, while it is open. */
interface OpenItem {
  outputIndex: number
  item: ResponseItem
  /** Text released by text-call recovery (held messages); other items take their message's content at its close. */
  released: string
  /** SSE: the delta frame around its sequence number and delta, made on the item's first delta. */
  frame: FrameTemplate | null
  /** SSE, a reasoning item with the `reasoningSummary` option: its summary delta frame, made as `frame` is. */
  summaryFrame: FrameTemplate | null
  /** A message item's log probabilities so far (the `logprobs` option). */
  logprobs: OutputLogprob[]
}

type ItemHeader = Pick<WireMessage<OpenItem>, 'index' | 'route' | 'toolName' | 'toolNamespace'>

/** Streaming Responses for one completion: `start()`, then `push(tokens)` per engine step, then `finish()`. */
export class ResponsesStream extends WireAdapter<ResponseEvent, OpenItem, ResponsesAdapterOptions> {
  private readonly createdAt: number
  /** When the adapter was made (`performance.now()`), for `completed_at` after a given `createdAt`. */
  private readonly madeAt = performance.now()
  private readonly output: ResponseItem[] = []
  /** What the request asked for, as every snapshot of the response repeats it. */
  private readonly echo: ResponseRequestEcho
  /** `completed_at`, set when the response completes. */
  private completedAt: number | null = null
  /** What `error()` said: the response failed. */
  private failure: { code: string; message: string } | null = null
  /** The messages read and not yet closed, by index (`error()` cuts their items). */
  private readonly openMessages = new Map<number, WireMessage<OpenItem>>()
  /** The raw reasoning events' names, by the dialect. */
  private readonly reasoningEvents: (typeof REASONING_EVENTS)[ResponsesDialect]
  /** The item of the built-in tool call made last, until its result comes (the gateway runs one at a time). */
  private awaitingResult: OpenItem | null = null

  constructor(options: ResponsesAdapterOptions) {
    super(options, RESPONSES)
    this.createdAt = options.createdAt ?? nowSeconds()
    this.echo = responsesRequestEcho(options.request ?? (options.tools == null ? null : { tools: options.tools }))
    if (options.stored === true) this.echo.store = true
    if (options.background === true) this.echo.background = true
    this.reasoningEvents = REASONING_EVENTS[options.dialect ?? 'openai']
  }

  /**
   * The gateway could not keep this response after all (its store failed): the events still to come (the
   * closing one, after `settle`) and `response()` say `store: false`, so no client is told it is kept.
   */
  unstore(): void {
    this.echo.store = false
  }

  /** Whether its SSE stream ends with `data: [DONE]` after the last event (the Open Responses dialect). */
  get endsWithDone(): boolean {
    return this.options.dialect === 'open-responses'
  }

  /** `response.created` and `response.in_progress` (once; the first `push` sends them otherwise). */
  start(): ResponseEvent[] {
    return this.objectsOf(() => this.opening())
  }

  /** `start`, as SSE bytes (`event: TYPE\ndata: JSON\n\n` per event). */
  startSse(): string {
    return this.sseOf(() => this.opening())
  }

  /**
   * The events to send when the stream cannot go on (the engine failed, a strict parse error): `error`, then
   * `response.failed` with the response as it stands (status `failed`, `error: { code, message }`, items
   * still open `incomplete`). The `error` event carries its fields both ways: nested in `error: { type,
   * code, message, param }` as the Open Responses specification's ErrorStreamingEvent has them (and as
   * OpenAI's API sends them, which openai-node raises as an APIError), and flat (`code`, `message`,
   * `param`) as the openai package's ResponseErrorEvent type has them. `type` is the error's, as in an
   * OpenAI error body (`server_error`).
   */
  error(message: string, code = 'server_error', type = 'server_error'): ResponseEvent[] {
    if (!this.done) this.cutOpenItems()
    this.end()
    this.failure = { code, message }
    return [
      this.event('error', { code, message, param: null, error: { type, code, message, param: null } }),
      this.event('response.failed', { response: this.snapshot('failed', true) }),
    ]
  }

  /** The response as it stands (complete after `finish()`, failed after `error()`). */
  response(status: ResponseObject['status'] = this.status()): ResponseObject {
    return this.snapshot(status, true)
  }

  /**
   * The response object with `status`. `copy`: its output and echoed request fields are copies of the adapter's
   * (the object face, where the caller keeps the object); events written as SSE bytes are serialized at once and
   * may share them.
   */
  private snapshot(status: ResponseObject['status'], copy: boolean): ResponseObject {
    const input = this.promptTokens
    const output = this.completionTokens
    const open = status === 'in_progress'
    return {
      id: this.id,
      object: 'response',
      created_at: this.createdAt,
      status,
      // Set once: a response kept before its closing event says the same as that event.
      completed_at: status === 'completed' ? (this.completedAt ??= this.secondsNow()) : null,
      error: status === 'failed' ? { ...(this.failure ?? { code: 'server_error', message: 'the response failed' }) } : null,
      incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
      model: this.options.model,
      output: open ? [] : copy ? structuredClone(this.output) : this.output,
      usage: open
        ? null
        : {
            input_tokens: input,
            input_tokens_details: { cached_tokens: this.cachedPromptTokens },
            output_tokens: output,
            output_tokens_details: { reasoning_tokens: this.reasoningTokens },
            total_tokens: input + output,
          },
      ...(copy ? structuredClone(this.echo) : this.echo),
    }
  }

  /** The status the response has now. */
  private status(): ResponseObject['status'] {
    if (this.failure !== null) return 'failed'
    if (!this.done) return 'in_progress'
    return this.finishReason() === 'length' ? 'incomplete' : 'completed'
  }

  /**
   * A failing response's items that never closed: `incomplete`, with the text read so far (the parser is
   * finished for it, and released; held text is what was released of it). No events: `response.failed` shows them.
   */
  private cutOpenItems(): void {
    let closes: MessageEvent[] = []
    try {
      closes = this.stream.finish()
    } catch {
      // A parser that failed (strict mode) has nothing more to give; it is released.
      this.stream.close()
    }
    for (const event of closes) {
      const message = event.kind === 'close' ? this.openMessages.get(event.index) : undefined
      const open = message?.kept
      if (open == null) continue
      const text = message!.held ? open.released : (event as Extract<MessageEvent, { kind: 'close' }>).message.content
      const { item } = open
      if (item.type === 'reasoning') this.setReasoning(item, text)
      else if (item.type === 'message') item.content = [{ type: 'output_text', text, annotations: [], logprobs: [] }]
      else if (item.type === 'function_call') item.arguments = text
      else if (item.type === 'code_interpreter_call') item.code = text
    }
    this.openMessages.clear()
    this.awaitingResult = null
    for (const item of this.output) if ('status' in item && item.status !== 'completed') item.status = 'incomplete'
  }

  /**
   * Unix seconds now: the clock, or with a given `createdAt`, that plus the whole seconds since the adapter
   * was made (the same bytes for the same completion, as a fixed `createdAt` promises).
   */
  private secondsNow(): number {
    if (this.options.completedAt !== undefined) return this.options.completedAt
    if (this.options.createdAt === undefined) return nowSeconds()
    return this.createdAt + Math.floor((performance.now() - this.madeAt) / 1000)
  }

  protected frameOf(event: ResponseEvent): string {
    return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`
  }

  protected opening(): void {
    if (this.started) return
    this.started = true
    if (this.writesSse) {
      // Byte for byte the frames of the two events below, with their one response serialized once.
      const response = JSON.stringify(this.snapshot('in_progress', false))
      this.write(responseFrame('response.created', this.counter++, response))
      this.write(responseFrame('response.in_progress', this.counter++, response))
      this.listMcpTools()
      return
    }
    this.emit(this.event('response.created', { response: this.snapshot('in_progress', !this.writesSse) }))
    this.emit(this.event('response.in_progress', { response: this.snapshot('in_progress', !this.writesSse) }))
    this.listMcpTools()
  }

  /** The `mcp_list_tools` items of the request's MCP servers, first in the output; then the calls approved in it. */
  private listMcpTools(): void {
    for (const { server_label, tools } of this.options.mcpListTools ?? []) {
      const open = this.add({ id: `mcpl_${this.idStem}_${server_label}`, type: 'mcp_list_tools', server_label, tools })
      const where = { item_id: open.item.id, output_index: open.outputIndex }
      this.emit(this.event('response.mcp_list_tools.in_progress', where))
      this.emit(this.event('response.mcp_list_tools.completed', where))
      this.itemDone(open)
    }
    for (const call of this.options.mcpApproved ?? []) {
      const item: ResponseItem = {
        id: `mcp_${this.idStem}_${call.approval_request_id}`,
        type: 'mcp_call',
        server_label: call.server_label,
        name: call.name,
        arguments: call.arguments,
        output: call.output,
        error: call.error,
        status: 'in_progress',
        approval_request_id: call.approval_request_id,
      }
      const open = this.add(item)
      this.emit(this.event('response.mcp_call.in_progress', { item_id: item.id, output_index: open.outputIndex }))
      this.doneBuiltin(open, call.error === null ? 'completed' : 'failed')
    }
  }

  protected owesOpening(): boolean {
    return !this.started
  }

  protected opened(message: WireMessage<OpenItem>): void {
    // Every item is added when its header completes, before any delta; final text that may still turn out
    // to be a tool call (textToolCalls: 'recover') gets its item with the first text released.
    this.itemOf(message)
  }

  protected text(message: WireMessage<OpenItem>, text: string): void {
    const open = this.itemOf(message)
    if (open === null) return
    if (open.item.type === 'code_interpreter_call') {
      this.emit(
        this.event('response.code_interpreter_call_code.delta', { item_id: open.item.id, output_index: open.outputIndex, delta: text }),
      )
      return
    }
    if (message.held) open.released += text
    this.delta(open, text, message.route === 'content' ? this.takeLogprobs() : null)
  }

  protected recovered(message: WireMessage<OpenItem>, call: RecoveredCall, _toolIndex: number, ordinal: number): string {
    // A whole function_call item of its own.
    const base = `${this.idStem}_${message.index}_t${ordinal}`
    const item: ResponseItem = {
      id: `fc_${base}`,
      type: 'function_call',
      call_id: `call_${base}`,
      name: call.name,
      arguments: '',
      status: 'in_progress',
    }
    const open = this.add(item)
    this.delta(open, call.arguments)
    this.closeItem(open, 'completed', call.arguments)
    return item.call_id
  }

  protected closed(message: WireMessage<OpenItem>, close: Extract<MessageEvent, { kind: 'close' }>): void {
    this.openMessages.delete(message.index)
    if (message.builtin !== null) {
      this.closeBuiltin(message, close.message.content, close.message.terminator !== null)
      return
    }
    // A held message whose text all became tool calls has no item of its own.
    const open = message.held ? message.kept : this.itemOf(message)
    if (open === null) return
    const { terminator, content } = close.message
    this.closeItem(open, terminator === null ? 'incomplete' : 'completed', message.held ? open.released : content)
  }

  protected callIdOf(message: WireMessage<OpenItem>): string {
    return `call_${this.idStem}_${message.index}`
  }

  protected closing(reason: FinishReason): void {
    // A built-in call whose result never came (the gateway's limits ended the loop, or the engine stopped).
    if (this.awaitingResult !== null) this.doneBuiltin(this.awaitingResult, 'incomplete')
    const complete = reason !== 'length'
    if (complete) this.completedAt ??= this.secondsNow()
    const response = this.snapshot(complete ? 'completed' : 'incomplete', !this.writesSse)
    this.emit(this.event(complete ? 'response.completed' : 'response.incomplete', { response }))
  }

  protected textFrame(message: WireMessage<OpenItem>): FrameTemplate | null {
    // Built-in tool work goes through `text` (its events are few).
    if (message.builtin !== null) return null
    const open = message.kept
    // A reasoning delta with its summary is two frames, which one template cannot write.
    if (open === null || (open.item.type === 'reasoning' && this.options.reasoningSummary === true)) return null
    return (open.frame ??= deltaFrame(open, this.reasoningEvents.delta))
  }

  private event(type: string, fields: Record<string, unknown>): ResponseEvent {
    return { type, sequence_number: this.counter++, ...fields }
  }

  /**
   * The item of a message, added (with its events) on first sight; null for messages that are dropped, for a
   * built-in tool's result (it completes its call's item), and for a browser call until its arguments are whole.
   */
  private itemOf(message: WireMessage<OpenItem>): OpenItem | null {
    if (message.kept !== null) return message.kept
    if (message.route === 'ignore') return null
    if (message.builtin !== null) {
      const { tool, result } = message.builtin
      if (result || tool.startsWith('browser.') || this.options.needsApproval?.(tool) === true) return null
      const mcp = isBuiltinTool(tool) ? null : splitRecipient(tool)
      if (mcp !== null) {
        message.kept = this.add({
          id: `mcp_${this.idStem}_${message.index}`,
          type: 'mcp_call',
          server_label: mcp.namespace,
          name: mcp.name,
          arguments: '',
          output: null,
          error: null,
          status: 'in_progress',
        })
        this.emit(this.event('response.mcp_call.in_progress', { item_id: message.kept.item.id, output_index: message.kept.outputIndex }))
        this.openMessages.set(message.index, message)
        return message.kept
      }
      message.kept = this.add({
        id: `ci_${this.idStem}_${message.index}`,
        type: 'code_interpreter_call',
        status: 'in_progress',
        code: '',
        container_id: `cntr_${this.idStem}`,
        outputs: null,
      })
      this.emit(
        this.event('response.code_interpreter_call.in_progress', { item_id: message.kept.item.id, output_index: message.kept.outputIndex }),
      )
      this.openMessages.set(message.index, message)
      return message.kept
    }
    message.kept = this.add(newItem(`${this.idStem}_${message.index}`, message))
    this.openMessages.set(message.index, message)
    return message.kept
  }

  /** A new item in the output: its added events. */
  private add(item: ResponseItem): OpenItem {
    const open: OpenItem = { outputIndex: this.output.length, item, released: '', frame: null, summaryFrame: null, logprobs: [] }
    this.output.push(item)
    this.emit(this.event('response.output_item.added', { output_index: open.outputIndex, item: structuredClone(item) }))
    const where = { item_id: item.id, output_index: open.outputIndex, content_index: 0 }
    if (item.type === 'reasoning') {
      this.emit(this.event('response.content_part.added', { ...where, part: { type: 'reasoning_text', text: '' } }))
      if (this.options.reasoningSummary === true)
        this.emit(this.event('response.reasoning_summary_part.added', { ...summaryAt(open), part: { type: 'summary_text', text: '' } }))
    } else if (item.type === 'message') {
      this.emit(
        this.event('response.content_part.added', { ...where, part: { type: 'output_text', text: '', annotations: [], logprobs: [] } }),
      )
    }
    return open
  }

  /** A delta of an item; `logprobs` (the `logprobs` option, answer text): its tokens' log probabilities. */
  private delta(open: OpenItem, delta: string, logprobs: OutputLogprob[] | null = null): void {
    if (logprobs !== null) {
      for (const entry of logprobs) open.logprobs.push(entry)
      this.emit(
        this.event('response.output_text.delta', {
          item_id: open.item.id,
          output_index: open.outputIndex,
          content_index: 0,
          delta,
          logprobs,
        }),
      )
      return
    }
    const summary = open.item.type === 'reasoning' && this.options.reasoningSummary === true
    if (this.writesSse) {
      // Byte for byte the frames of the event objects below, without making them.
      this.write(writeFrame((open.frame ??= deltaFrame(open, this.reasoningEvents.delta)), delta, this.counter++))
      if (summary) this.write(writeFrame((open.summaryFrame ??= summaryDeltaFrame(open)), delta, this.counter++))
      return
    }
    const where = { item_id: open.item.id, output_index: open.outputIndex }
    if (open.item.type === 'reasoning') {
      this.emit(this.event(this.reasoningEvents.delta, { ...where, content_index: 0, delta }))
      if (summary) this.emit(this.event('response.reasoning_summary_text.delta', { ...summaryAt(open), delta }))
    } else if (open.item.type === 'message')
      this.emit(this.event('response.output_text.delta', { ...where, content_index: 0, delta, logprobs: [] }))
    else this.emit(this.event('response.function_call_arguments.delta', { ...where, delta }))
  }

  private closeItem(open: OpenItem, status: ItemStatus, text: string): void {
    const { item } = open
    const where = { item_id: item.id, output_index: open.outputIndex }
    if (item.type === 'reasoning') {
      const part = { type: 'reasoning_text' as const, text }
      this.setReasoning(item, text)
      this.emit(this.event(this.reasoningEvents.done, { ...where, content_index: 0, text }))
      this.emit(this.event('response.content_part.done', { ...where, content_index: 0, part }))
      if (this.options.reasoningSummary === true) {
        this.emit(this.event('response.reasoning_summary_text.done', { ...summaryAt(open), text }))
        this.emit(this.event('response.reasoning_summary_part.done', { ...summaryAt(open), part: { type: 'summary_text', text } }))
      }
    } else if (item.type === 'message') {
      const annotations = this.options.citations?.(text) ?? []
      annotations.forEach((annotation, i) => {
        this.emit(this.event('response.output_text.annotation.added', { ...where, content_index: 0, annotation_index: i, annotation }))
      })
      const part = { type: 'output_text' as const, text, annotations, logprobs: open.logprobs }
      item.content = [part]
      this.emit(this.event('response.output_text.done', { ...where, content_index: 0, text, logprobs: open.logprobs }))
      this.emit(this.event('response.content_part.done', { ...where, content_index: 0, part }))
    } else if (item.type === 'function_call') {
      item.arguments = text
      this.emit(this.event('response.function_call_arguments.done', { ...where, name: item.name, arguments: text }))
    }
    if ('status' in item) item.status = status
    this.itemDone(open)
  }

  /**
   * A built-in tool's message closed. The model's call: its item now waits for the result (python: the code is
   * whole and runs; browser: the item is added, its action read from the call's arguments). The result: the
   * call's item completes (python: with what it printed, when asked for).
   */
  private closeBuiltin(message: WireMessage<OpenItem>, content: string, whole: boolean): void {
    const { tool, result } = message.builtin!
    if (result) {
      const failure = this.nextToolFailure()
      const open = this.awaitingResult
      if (open === null) return
      if (open.item.type === 'code_interpreter_call' && this.options.codeInterpreterOutputs === true)
        open.item.outputs = [{ type: 'logs', logs: content }]
      if (open.item.type === 'mcp_call') {
        if (failure === null) open.item.output = content
        else open.item.error = content
      }
      if (open.item.type === 'web_search_call') open.item.action = withShownUrl(open.item.action, content)
      this.doneBuiltin(open, failure === null ? 'completed' : 'failed')
      return
    }
    const mcp = isBuiltinTool(tool) ? null : splitRecipient(tool)
    if (mcp !== null && this.options.needsApproval?.(tool) === true) {
      // Not run: the client is asked (`mcp_approval_response` in its next request).
      this.itemDone(
        this.add({
          id: `mcpr_${this.idStem}_${message.index}`,
          type: 'mcp_approval_request',
          server_label: mcp.namespace,
          name: mcp.name,
          arguments: content,
        }),
      )
      return
    }
    let open = this.itemOf(message)
    if (open === null) {
      open = this.add({
        id: `ws_${this.idStem}_${message.index}`,
        type: 'web_search_call',
        status: 'in_progress',
        action: browserAction(tool, content),
      })
      this.emit(this.event('response.web_search_call.in_progress', { item_id: open.item.id, output_index: open.outputIndex }))
    }
    const { item } = open
    const where = { item_id: item.id, output_index: open.outputIndex }
    if (item.type === 'code_interpreter_call') {
      item.code = content
      this.emit(this.event('response.code_interpreter_call_code.done', { ...where, code: content }))
    } else if (item.type === 'mcp_call') {
      item.arguments = content
      this.emit(this.event('response.mcp_call_arguments.done', { ...where, arguments: content }))
    }
    if (!whole) {
      this.doneBuiltin(open, 'incomplete')
      return
    }
    if (item.type === 'code_interpreter_call') {
      item.status = 'interpreting'
      this.emit(this.event('response.code_interpreter_call.interpreting', where))
    } else if (item.type === 'web_search_call') {
      item.status = 'searching'
      this.emit(this.event('response.web_search_call.searching', where))
    }
    this.awaitingResult = open
  }

  /**
   * A built-in tool call's item ends: `completed` with its result, `failed` with a result that says the tool failed
   * (OpenAI has a `failed` event for MCP calls only), or `incomplete` without one.
   */
  private doneBuiltin(open: OpenItem, status: ToolItemStatus): void {
    if (this.awaitingResult === open) this.awaitingResult = null
    const { item } = open
    if ('status' in item) item.status = status
    if (status === 'failed' && item.type === 'mcp_call')
      this.emit(this.event('response.mcp_call.failed', { item_id: item.id, output_index: open.outputIndex }))
    if (status === 'completed') {
      const type =
        item.type === 'code_interpreter_call'
          ? 'response.code_interpreter_call.completed'
          : item.type === 'mcp_call'
            ? 'response.mcp_call.completed'
            : 'response.web_search_call.completed'
      this.emit(this.event(type, { item_id: item.id, output_index: open.outputIndex }))
    }
    this.itemDone(open)
  }

  /** `response.output_item.done` of an item: written as SSE at once, the event needs no copy of it (a copy costs more than the frame). */
  private itemDone(open: OpenItem): void {
    this.emit(
      this.event('response.output_item.done', {
        output_index: open.outputIndex,
        item: this.writesSse ? open.item : structuredClone(open.item),
      }),
    )
  }

  /** A reasoning item's text, with `reasoningSummary` its summary too, and with `sealReasoning` that text sealed. */
  private setReasoning(item: Extract<ResponseItem, { type: 'reasoning' }>, text: string): void {
    item.content = [{ type: 'reasoning_text', text }]
    if (this.options.reasoningSummary === true) item.summary = [{ type: 'summary_text', text }]
    const { sealReasoning } = this.options
    if (sealReasoning !== undefined) item.encrypted_content = sealReasoning(text)
  }
}

/**
 * What a browser call did, from its tool (`browser.search`, `.open`, `.find`) and arguments (gpt-oss's, as the
 * system message declares them: `query`; `id`, a page number or an address; `pattern`). Arguments that are not
 * the JSON object they should be: a search for their text, as the model wrote it.
 */
function browserAction(tool: string, args: string): WebSearchAction {
  let fields: Fields | null = null
  try {
    fields = fieldsOf(JSON.parse(args))
  } catch {
    // not JSON: below
  }
  if (tool === 'browser.open' && fields !== null) return { type: 'open_page', url: stringOr(fields.id, null) }
  if (tool === 'browser.find' && fields !== null) return { type: 'find', pattern: stringOr(fields.pattern, ''), url: null }
  return { type: 'search', query: fields === null ? args : stringOr(fields.query, args) }
}

/**
 * A browser action whose page the model named by a link's number or a cursor (its `url` null in the call), with
 * the address of the page the browser showed: its first line, `[cursor] title (url)` (a find's page is
 * `{url}/find?pattern=…`).
 */
function withShownUrl(action: WebSearchAction, page: string): WebSearchAction {
  if (action.type === 'search' || action.url !== null) return action
  // Read by position, not by a pattern over the line: its title is a fetched page's, of any length and text.
  const end = page.indexOf('\n')
  const line = end < 0 ? page : page.slice(0, end)
  const open = line.lastIndexOf(' (')
  if (!line.startsWith('[') || open < 0 || !line.endsWith(')')) return action
  const shown = line.slice(open + 2, -1)
  if (!/^https?:\/\/\S+$/.test(shown)) return action
  return { ...action, url: action.type === 'find' ? shown.replace(/\/find\?pattern=[^/]*$/, '') : shown }
}

/** The SSE frame of a response event, `{ type, sequence_number, response }`, from the response's JSON. */
function responseFrame(type: string, sequence: number, response: string): string {
  return `event: ${type}\ndata: {"type":"${type}","sequence_number":${sequence},"response":${response}}\n\n`
}

/** The item of a message by its route, in progress and empty. */
function newItem(base: string, message: ItemHeader): ResponseItem {
  if (message.route === 'reasoning') return { id: `rs_${base}`, type: 'reasoning', summary: [], content: [], status: 'in_progress' }
  if (message.route === 'content') return { id: `msg_${base}`, type: 'message', role: 'assistant', status: 'in_progress', content: [] }
  const call = { id: `fc_${base}`, type: 'function_call' as const, call_id: `call_${base}` }
  const namespace = message.toolNamespace
  if (namespace === null) return { ...call, name: message.toolName!, arguments: '', status: 'in_progress' }
  return { ...call, name: message.toolName!.slice(namespace.length + 1), namespace, arguments: '', status: 'in_progress' }
}

/** Where a reasoning item's (one) summary part is, as its summary events say. */
function summaryAt(open: OpenItem): { item_id: string; output_index: number; summary_index: 0 } {
  return { item_id: open.item.id, output_index: open.outputIndex, summary_index: 0 }
}

/** A reasoning item's summary delta frame, as `response.reasoning_summary_text.delta` objects serialize. */
function summaryDeltaFrame(open: OpenItem): FrameTemplate {
  const type = 'response.reasoning_summary_text.delta'
  const middle = `,"item_id":${JSON.stringify(open.item.id)},"output_index":${open.outputIndex},"summary_index":0,"delta":`
  return { literals: [`event: ${type}\ndata: {"type":"${type}","sequence_number":`, middle, '}\n\n'], slots: [FRAME_COUNTER, FRAME_TEXT] }
}

/**
 * An item's delta frame around the sequence number and the delta, as the event objects serialize
 * (`reasoningDelta`: the reasoning delta's name in the stream's dialect).
 */
function deltaFrame(open: OpenItem, reasoningDelta: string): FrameTemplate {
  const type =
    open.item.type === 'reasoning'
      ? reasoningDelta
      : open.item.type === 'message'
        ? 'response.output_text.delta'
        : 'response.function_call_arguments.delta'
  const where = `,"item_id":${JSON.stringify(open.item.id)},"output_index":${open.outputIndex}`
  const middle = open.item.type === 'function_call' ? `${where},"delta":` : `${where},"content_index":0,"delta":`
  const tail = open.item.type === 'message' ? ',"logprobs":[]}\n\n' : '}\n\n'
  return { literals: [`event: ${type}\ndata: {"type":"${type}","sequence_number":`, middle, tail], slots: [FRAME_COUNTER, FRAME_TEXT] }
}

type Fields = Readonly<Record<string, unknown>>

function fieldsOf(value: unknown): Fields | null {
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Fields) : null
}

function stringOr<T>(value: unknown, otherwise: T): string | T {
  return typeof value === 'string' ? value : otherwise
}

function numberOr<T>(value: unknown, otherwise: T): number | T {
  return typeof value === 'number' && Number.isFinite(value) ? value : otherwise
}

function integerOr<T>(value: unknown, otherwise: T): number | T {
  return Number.isSafeInteger(value) ? (value as number) : otherwise
}

/**
 * A tool as the response lists it: a function tool (Responses shape, or Chat's nested `function`) in the
 * Responses shape with `description`, `parameters` and `strict` null where the request left them out (the
 * specification's FunctionTool requires the three, nullable); another tool type as it came.
 */
function echoedTool(tool: unknown): ResponseFunctionTool | Record<string, unknown> {
  const fields = functionFields(tool)
  if (fields === null) return tool as Record<string, unknown>
  const { function: _nested, ...rest } = tool as Record<string, unknown>
  return {
    ...rest,
    type: 'function',
    name: fields.name as string,
    description: (fields.description as string | null | undefined) ?? null,
    parameters: (fields.parameters as Record<string, unknown> | null | undefined) ?? null,
    strict: (fields.strict as boolean | null | undefined) ?? null,
  }
}

/**
 * What a response says of its request (`ResponsesAdapterOptions.request`): the fields of a Responses request
 * `body` that the response object repeats, each as the request gave it when it has the field's type, else
 * what OpenAI answers when a request leaves it out. The defaults are those of the Open Responses
 * specification's example response (public/openapi/openapi.json, ResponseResource `example`): `temperature`
 * 1, `top_p` 1, the penalties 0, `top_logprobs` 0, `parallel_tool_calls` true, `tool_choice` 'auto', `tools`
 * [], `metadata` {}, `text` `{ format: { type: 'text' } }`, `truncation` 'disabled' (also "`disabled`
 * (default)" in the openai package's Response type, resources/responses/responses.d.ts); the nullable ones
 * (`instructions`, `max_output_tokens`, `max_tool_calls`, `previous_response_id`, `safety_identifier`,
 * `prompt_cache_key`, `user`; `reasoning.effort` "if specified", and `.summary`) null. Three say what
 * happened rather than what was asked: `store` false (the adapters' `stored` option says when a gateway kept
 * the response), `background` false (nothing runs in the background), `service_tier` 'default' (OpenAI's
 * response names the tier it used, responses.d.ts; there is one). The result shares nothing with `body`.
 */
export function responsesRequestEcho(body: object | null = null): ResponseRequestEcho {
  const request: Fields = fieldsOf(body) ?? {}
  const reasoning = fieldsOf(request.reasoning)
  const text = fieldsOf(request.text)
  const format = fieldsOf(text?.format)
  const toolChoice = request.tool_choice
  const metadata = fieldsOf(request.metadata)
  const echo: ResponseRequestEcho = {
    background: false,
    instructions: stringOr(request.instructions, null),
    max_output_tokens: integerOr(request.max_output_tokens, null),
    max_tool_calls: integerOr(request.max_tool_calls, null),
    parallel_tool_calls: typeof request.parallel_tool_calls === 'boolean' ? request.parallel_tool_calls : true,
    presence_penalty: numberOr(request.presence_penalty, 0),
    frequency_penalty: numberOr(request.frequency_penalty, 0),
    previous_response_id: stringOr(request.previous_response_id, null),
    prompt_cache_key: stringOr(request.prompt_cache_key, null),
    reasoning: { effort: stringOr(reasoning?.effort, null), summary: stringOr(reasoning?.summary, null) },
    safety_identifier: stringOr(request.safety_identifier, null),
    service_tier: 'default',
    store: false,
    temperature: numberOr(request.temperature, 1),
    text: { ...text, format: format === null ? { type: 'text' } : { type: stringOr(format.type, 'text'), ...format } },
    tool_choice: typeof toolChoice === 'string' ? toolChoice : ((fieldsOf(toolChoice) as Record<string, unknown> | null) ?? 'auto'),
    tools: Array.isArray(request.tools) ? request.tools.map(echoedTool) : [],
    top_logprobs: integerOr(request.top_logprobs, 0),
    top_p: numberOr(request.top_p, 1),
    truncation: request.truncation === 'auto' ? 'auto' : 'disabled',
    user: stringOr(request.user, null),
    metadata: (metadata ?? {}) as Record<string, string>,
  }
  // Detached from the request: the fields that hold its objects are copied (the rest are new objects or
  // primitives). Most requests have none of them, and a clone of the whole echo cost more than the rest of
  // a response's opening.
  if (text !== null || fieldsOf(toolChoice) !== null || echo.tools.length > 0 || metadata !== null) {
    const copied = structuredClone({ text: echo.text, tool_choice: echo.tool_choice, tools: echo.tools, metadata: echo.metadata })
    echo.text = copied.text
    echo.tool_choice = copied.tool_choice
    echo.tools = copied.tools
    echo.metadata = copied.metadata
  }
  return echo
}

/**
 * Non-streaming Responses: a whole completion (token ids, text for `input: 'text'`, or one engine step holding
 * all of it, as `collectSteps` of `harmony-stream/engines` gives) → one `response` object (the streamed one, complete).
 */
export function responseObject(
  completion: AdapterInput,
  options: ResponsesAdapterOptions & FinishOptions,
): ResponseObject & { diagnostics: AdapterDiagnostic[] } {
  checkAdapterOptions(options, RESPONSES_WHOLE_OPTIONS, 'responseObject')
  const { truncated, ...streamOptions } = options
  const stream = new ResponsesStream(streamOptions)
  readWhole(stream, completion, { truncated })
  return { ...stream.response(), diagnostics: stream.diagnostics }
}
