/**
 * Responses API: parser output → `response.*` stream events (with a monotone `sequence_number` and stable
 * item ids), or one `response` object; a wire format on the adapter base (`adapter.ts`), which routes, reads
 * and finishes.
 *
 * Every message becomes one output item, by the same routing as Chat Completions (`routing.ts`): reasoning
 * → a `reasoning` item (`reasoning_text`), content → a `message` item (`output_text`), a tool call → a
 * `function_call` item. Each item gets its added/delta/done events at the message's own boundaries, also
 * when a batch holds the end of one message and the start of the next, and at the end of the stream. The
 * stream ends with `response.completed`, or `response.incomplete` when it ended without a stop token.
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
import type { MessageEvent } from './message-stream'
import { checkAdapterOptions, RESPONSES_OPTIONS, wholeOptions } from './options'
import type { RecoveredCall } from './text-tool-calls'

export interface ResponsesAdapterOptions extends AdapterOptions {
  model: string
  /** Response id (`resp_…`); item ids derive from it. Default: a random one. */
  id?: string
  /** Unix seconds. Default: now. */
  createdAt?: number
  /** Input tokens, for `usage`. Default: what an engine step's `usage` reported, else 0. */
  inputTokens?: number
}

export type ResponseItem =
  | { id: string; type: 'reasoning'; summary: []; content: { type: 'reasoning_text'; text: string }[]; status: ItemStatus }
  | {
      id: string
      type: 'message'
      role: 'assistant'
      status: ItemStatus
      content: { type: 'output_text'; text: string; annotations: []; logprobs: [] }[]
    }
  | { id: string; type: 'function_call'; call_id: string; name: string; arguments: string; status: ItemStatus }

type ItemStatus = 'in_progress' | 'completed' | 'incomplete'

export interface ResponseUsage {
  input_tokens: number
  input_tokens_details: { cached_tokens: number }
  output_tokens: number
  output_tokens_details: { reasoning_tokens: number }
  total_tokens: number
}

export interface ResponseObject {
  id: string
  object: 'response'
  created_at: number
  status: 'in_progress' | 'completed' | 'incomplete'
  model: string
  output: ResponseItem[]
  usage: ResponseUsage | null
  incomplete_details: { reason: 'max_output_tokens' } | null
  error: null
  instructions: null
  metadata: Record<string, string>
  temperature: null
  top_p: null
  parallel_tool_calls: boolean
  tool_choice: 'auto'
  tools: []
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
}

type ItemHeader = Pick<WireMessage<OpenItem>, 'index' | 'route' | 'toolName'>

/** Streaming Responses for one completion: `start()`, then `push(tokens)` per engine step, then `finish()`. */
export class ResponsesStream extends WireAdapter<ResponseEvent, OpenItem, ResponsesAdapterOptions> {
  private readonly createdAt: number
  private readonly output: ResponseItem[] = []

  constructor(options: ResponsesAdapterOptions) {
    super(options, RESPONSES)
    this.createdAt = options.createdAt ?? nowSeconds()
  }

  /** `response.created` and `response.in_progress` (once; the first `push` sends them otherwise). */
  start(): ResponseEvent[] {
    return this.objectsOf(() => this.opening())
  }

  /** `start`, as SSE bytes (`event: TYPE\ndata: JSON\n\n` per event). */
  startSse(): string {
    return this.sseOf(() => this.opening())
  }

  /** The `error` event to send when the stream cannot go on (the engine failed, a strict parse error). */
  error(message: string, code = 'server_error'): ResponseEvent {
    this.end()
    return this.event('error', { code, message, param: null })
  }

  /** The response as it stands (complete after `finish()`). */
  response(
    status: ResponseObject['status'] = this.done ? (this.finishReason() === 'length' ? 'incomplete' : 'completed') : 'in_progress',
  ): ResponseObject {
    const input = this.promptTokens
    const output = this.completionTokens
    return {
      id: this.id,
      object: 'response',
      created_at: this.createdAt,
      status,
      model: this.options.model,
      output: status === 'in_progress' ? [] : structuredClone(this.output),
      usage:
        status === 'in_progress'
          ? null
          : {
              input_tokens: input,
              input_tokens_details: { cached_tokens: this.cachedPromptTokens },
              output_tokens: output,
              output_tokens_details: { reasoning_tokens: this.reasoningTokens },
              total_tokens: input + output,
            },
      incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
      error: null,
      instructions: null,
      metadata: {},
      temperature: null,
      top_p: null,
      parallel_tool_calls: true,
      tool_choice: 'auto',
      tools: [],
    }
  }

  protected frameOf(event: ResponseEvent): string {
    return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`
  }

  protected opening(): void {
    if (this.started) return
    this.started = true
    this.emit(this.event('response.created', { response: this.response('in_progress') }))
    this.emit(this.event('response.in_progress', { response: this.response('in_progress') }))
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
    if (message.held) open.released += text
    this.delta(open, text)
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
    const complete = reason !== 'length'
    const response = this.response(complete ? 'completed' : 'incomplete')
    this.emit(this.event(complete ? 'response.completed' : 'response.incomplete', { response }))
  }

  protected textFrame(message: WireMessage<OpenItem>): FrameTemplate | null {
    const open = message.kept
    return open === null ? null : (open.frame ??= deltaFrame(open))
  }

  private event(type: string, fields: Record<string, unknown>): ResponseEvent {
    return { type, sequence_number: this.counter++, ...fields }
  }

  /** The item of a message, added (with its events) on first sight; null for messages that are dropped. */
  private itemOf(message: WireMessage<OpenItem>): OpenItem | null {
    if (message.kept !== null) return message.kept
    if (message.route === 'ignore') return null
    message.kept = this.add(newItem(`${this.idStem}_${message.index}`, message))
    return message.kept
  }

  /** A new item in the output: its added events. */
  private add(item: ResponseItem): OpenItem {
    const open: OpenItem = { outputIndex: this.output.length, item, released: '', frame: null }
    this.output.push(item)
    this.emit(this.event('response.output_item.added', { output_index: open.outputIndex, item: structuredClone(item) }))
    const where = { item_id: item.id, output_index: open.outputIndex, content_index: 0 }
    if (item.type === 'reasoning') {
      this.emit(this.event('response.content_part.added', { ...where, part: { type: 'reasoning_text', text: '' } }))
    } else if (item.type === 'message') {
      this.emit(
        this.event('response.content_part.added', { ...where, part: { type: 'output_text', text: '', annotations: [], logprobs: [] } }),
      )
    }
    return open
  }

  private delta(open: OpenItem, delta: string): void {
    if (this.writesSse) {
      // Byte for byte the frame of the event object below, without making it.
      this.write(writeFrame((open.frame ??= deltaFrame(open)), delta, this.counter++))
      return
    }
    const where = { item_id: open.item.id, output_index: open.outputIndex }
    if (open.item.type === 'reasoning') this.emit(this.event('response.reasoning_text.delta', { ...where, content_index: 0, delta }))
    else if (open.item.type === 'message')
      this.emit(this.event('response.output_text.delta', { ...where, content_index: 0, delta, logprobs: [] }))
    else this.emit(this.event('response.function_call_arguments.delta', { ...where, delta }))
  }

  private closeItem(open: OpenItem, status: ItemStatus, text: string): void {
    const { item } = open
    const where = { item_id: item.id, output_index: open.outputIndex }
    if (item.type === 'reasoning') {
      const part = { type: 'reasoning_text' as const, text }
      item.content = [part]
      this.emit(this.event('response.reasoning_text.done', { ...where, content_index: 0, text }))
      this.emit(this.event('response.content_part.done', { ...where, content_index: 0, part }))
    } else if (item.type === 'message') {
      const part = { type: 'output_text' as const, text, annotations: [] as [], logprobs: [] as [] }
      item.content = [part]
      this.emit(this.event('response.output_text.done', { ...where, content_index: 0, text, logprobs: [] }))
      this.emit(this.event('response.content_part.done', { ...where, content_index: 0, part }))
    } else {
      item.arguments = text
      this.emit(this.event('response.function_call_arguments.done', { ...where, name: item.name, arguments: text }))
    }
    item.status = status
    this.emit(this.event('response.output_item.done', { output_index: open.outputIndex, item: structuredClone(item) }))
  }
}

/** The item of a message by its route, in progress and empty. */
function newItem(base: string, message: ItemHeader): ResponseItem {
  if (message.route === 'reasoning') return { id: `rs_${base}`, type: 'reasoning', summary: [], content: [], status: 'in_progress' }
  if (message.route === 'content') return { id: `msg_${base}`, type: 'message', role: 'assistant', status: 'in_progress', content: [] }
  return { id: `fc_${base}`, type: 'function_call', call_id: `call_${base}`, name: message.toolName!, arguments: '', status: 'in_progress' }
}

/** An item's delta frame around the sequence number and the delta, as the event objects serialize. */
function deltaFrame(open: OpenItem): FrameTemplate {
  const type =
    open.item.type === 'reasoning'
      ? 'response.reasoning_text.delta'
      : open.item.type === 'message'
        ? 'response.output_text.delta'
        : 'response.function_call_arguments.delta'
  const where = `,"item_id":${JSON.stringify(open.item.id)},"output_index":${open.outputIndex}`
  const middle = open.item.type === 'function_call' ? `${where},"delta":` : `${where},"content_index":0,"delta":`
  const tail = open.item.type === 'message' ? ',"logprobs":[]}\n\n' : '}\n\n'
  return { literals: [`event: ${type}\ndata: {"type":"${type}","sequence_number":`, middle, tail], slots: [FRAME_COUNTER, FRAME_TEXT] }
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
