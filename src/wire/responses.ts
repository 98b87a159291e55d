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

import { type FrameTemplate, writeFrame } from '../backend/frames'
import type { OpenAIAnswer } from '../base/errors'
import { type AdapterDiagnostic, nowSeconds, WireAdapter, type WireFormat, type WireMessage } from './adapter'
import type { FinishOptions, FinishReason } from './finish'
import type { AdapterInput } from './input'
import type { OutputLogprob } from './logprobs'
import type { MessageEvent } from './message-stream'
import { RESPONSES_OPTIONS, wholeOptions } from './options'
import { BuiltinItems, type ItemWriter } from './responses/builtin-items'
import { CitationMarkers } from './responses/citations'
import { responsesRequestEcho } from './responses/echo'
import { deltaFrame, newItem, type OpenItem, REASONING_EVENTS, responseFrame, summaryAt, summaryDeltaFrame } from './responses/items'
import type {
  ItemStatus,
  ResponseEvent,
  ResponseItem,
  ResponseObject,
  ResponseRequestEcho,
  ResponsesAdapterOptions,
  ResponsesDialect,
  UrlCitation,
} from './responses/types'
import type { RecoveredCall } from './text-tool-calls'
import { wholeAnswer } from './whole-answer'

export { responsesRequestEcho } from './responses/echo'
export type {
  ApprovedCall,
  CitedPageOf,
  ResponseEvent,
  ResponseFunctionTool,
  ResponseItem,
  ResponseObject,
  ResponseRequestEcho,
  ResponsesAdapterOptions,
  ResponsesDialect,
  ResponseUsage,
  UrlCitation,
  WebSearchAction,
} from './responses/types'

const RESPONSES: WireFormat = {
  name: 'ResponsesStream',
  options: RESPONSES_OPTIONS,
  idPrefix: 'resp_',
  promptTokensOption: 'inputTokens',
  finished: 'finish(), error() or close(): create a new adapter for a new response',
}

const RESPONSES_WHOLE_OPTIONS = wholeOptions(RESPONSES_OPTIONS)

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
  /** The items of the tools the gateway runs (python, browser, MCP servers' tools). */
  private readonly builtins: BuiltinItems
  /** Results of `browser.*` calls read so far: the pages a citation may name are those they showed. */
  private browserResults = 0

  constructor(options: ResponsesAdapterOptions) {
    super(options, RESPONSES)
    this.createdAt = options.createdAt ?? nowSeconds()
    this.echo = responsesRequestEcho(options.request ?? (options.tools == null ? null : { tools: options.tools }))
    if (options.stored === true) this.echo.store = true
    if (options.background === true) this.echo.background = true
    this.reasoningEvents = REASONING_EVENTS[options.dialect ?? 'openai']
    const writer: ItemWriter = {
      add: (item) => this.add(item),
      emit: (type, fields) => this.emit(this.event(type, fields)),
      itemDone: (open) => this.itemDone(open),
      nextToolFailure: () => this.nextToolFailure(),
    }
    this.builtins = new BuiltinItems(writer, this.idStem, options)
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

  /** A Responses stream opens before the first engine step: `start`'s events. */
  openingEvents(): ResponseEvent[] {
    return this.start()
  }

  openingSse(): string {
    return this.startSse()
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

  /**
   * A failure mid-stream (`answer`: what it would be answered with before the stream): `error()`'s events with its
   * message, code and type (as `failureEvent` of http/errors.ts gives them), then the stream's last frame.
   */
  failureSse(answer: OpenAIAnswer): string {
    const { message, code, type } = answer.body.error
    return this.objectFrames(this.error(message, code ?? 'server_error', type)) + this.doneSse()
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
      else if (item.type === 'message') {
        // With citations, what went out (a marker still held back never did).
        const { cited } = open
        item.content = [{ type: 'output_text', text: cited?.text ?? text, annotations: cited?.annotations ?? [], logprobs: [] }]
      } else if (item.type === 'function_call') item.arguments = text
      else if (item.type === 'code_interpreter_call') item.code = text
    }
    this.openMessages.clear()
    this.builtins.cut()
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
      this.builtins.listMcpTools()
      return
    }
    this.emit(this.event('response.created', { response: this.snapshot('in_progress', !this.writesSse) }))
    this.emit(this.event('response.in_progress', { response: this.snapshot('in_progress', !this.writesSse) }))
    this.builtins.listMcpTools()
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
    if (open.cited !== null) this.citedText(open, text)
    else this.delta(open, text, message.route === 'content' ? this.takeLogprobs() : null)
  }

  /**
   * An answer's text with its citation markers replaced: what can go out now (a marker's start is held back
   * while it may still be one), then the annotations of the markers it replaced.
   */
  private citedText(open: OpenItem, text: string): void {
    const cited = open.cited!
    const known = cited.annotations.length
    const out = cited.feed(text)
    // Held back: its tokens' log probabilities go out with the text they made. An empty text (the base's, with
    // log probabilities whose text never came) still goes out.
    if (out === '' && text !== '') return
    this.delta(open, out, this.takeLogprobs())
    this.annotationsFrom(open, known)
  }

  /** `response.output_text.annotation.added` of a message item's annotations from `from` on. */
  private annotationsFrom(open: OpenItem, from: number): void {
    const { annotations } = open.cited!
    for (let i = from; i < annotations.length; i++) {
      this.emit(
        this.event('response.output_text.annotation.added', {
          item_id: open.item.id,
          output_index: open.outputIndex,
          content_index: 0,
          annotation_index: i,
          annotation: annotations[i],
        }),
      )
    }
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
      if (message.builtin.result && message.builtin.tool.startsWith('browser.')) this.browserResults++
      this.builtins.closed(message, close.message.content, close.message.terminator !== null)
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
    this.builtins.closing()
    const complete = reason !== 'length'
    if (complete) this.completedAt ??= this.secondsNow()
    const response = this.snapshot(complete ? 'completed' : 'incomplete', !this.writesSse)
    this.emit(this.event(complete ? 'response.completed' : 'response.incomplete', { response }))
  }

  protected textFrame(message: WireMessage<OpenItem>): FrameTemplate | null {
    // Built-in tool work goes through `text` (its events are few).
    if (message.builtin !== null) return null
    const open = message.kept
    // A reasoning delta with its summary is two frames, which one template cannot write; an answer whose
    // citations are replaced is not the text the backend writes.
    if (open === null || open.cited !== null || (open.item.type === 'reasoning' && this.options.reasoningSummary === true)) return null
    return (open.frame ??= deltaFrame(open, this.reasoningEvents.delta))
  }

  private event(type: string, fields: Record<string, unknown>): ResponseEvent {
    return { type, sequence_number: this.counter++, ...fields }
  }

  /**
   * The item of a message, added (with its events) on first sight; null for messages that are dropped, and for
   * some of the built-in tools' messages (`BuiltinItems.itemOf`).
   */
  private itemOf(message: WireMessage<OpenItem>): OpenItem | null {
    if (message.kept !== null) return message.kept
    if (message.route === 'ignore') return null
    if (message.builtin !== null) {
      const open = this.builtins.itemOf(message)
      if (open !== null) this.openMessages.set(message.index, message)
      return open
    }
    const open = this.add(newItem(`${this.idStem}_${message.index}`, message))
    const { citedPage } = this.options
    // Only with the browser's pages: without them, no answer pays for this.
    if (citedPage !== undefined && open.item.type === 'message')
      open.cited = new CitationMarkers((cursor) => citedPage(cursor, this.browserResults))
    message.kept = open
    this.openMessages.set(message.index, message)
    return open
  }

  /** A new item in the output: its added events. */
  private add(item: ResponseItem): OpenItem {
    const open: OpenItem = {
      outputIndex: this.output.length,
      item,
      released: '',
      frame: null,
      summaryFrame: null,
      logprobs: [],
      cited: null,
    }
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
      let annotations: UrlCitation[] = []
      let answer = text
      const { cited } = open
      if (cited !== null) {
        // What was held back was no marker: it goes out as it came. The item's text is what went out.
        const rest = cited.end()
        if (rest !== '') this.delta(open, rest, this.takeLogprobs())
        answer = cited.text
        annotations = cited.annotations
      }
      const part = { type: 'output_text' as const, text: answer, annotations, logprobs: open.logprobs }
      item.content = [part]
      this.emit(this.event('response.output_text.done', { ...where, content_index: 0, text: answer, logprobs: open.logprobs }))
      this.emit(this.event('response.content_part.done', { ...where, content_index: 0, part }))
    } else if (item.type === 'function_call') {
      item.arguments = text
      this.emit(this.event('response.function_call_arguments.done', { ...where, name: item.name, arguments: text }))
    }
    if ('status' in item) item.status = status
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
 * Non-streaming Responses: a whole completion (token ids, text for `input: 'text'`, or one engine step holding
 * all of it, as `collectSteps` of `harmony-stream/engines` gives) → one `response` object (the streamed one, complete).
 */
export function responseObject(
  completion: AdapterInput,
  options: ResponsesAdapterOptions & FinishOptions,
): ResponseObject & { diagnostics: AdapterDiagnostic[] } {
  return wholeAnswer(
    'responseObject',
    RESPONSES_WHOLE_OPTIONS,
    completion,
    options,
    (streamOptions) => new ResponsesStream(streamOptions),
    (stream) => stream.response(),
  )
}
