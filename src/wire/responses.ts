/**
 * Responses API: parser output → `response.*` stream events (with a monotone `sequence_number` and stable
 * item ids), or one `response` object.
 *
 * Every message becomes one output item, by the same routing as Chat Completions (`routing.ts`): reasoning
 * → a `reasoning` item (`reasoning_text`), content → a `message` item (`output_text`), a tool call → a
 * `function_call` item. Each item gets its added/delta/done events at the message's own boundaries, also
 * when a batch holds the end of one message and the start of the next, and at the end of the stream. The
 * stream ends with `response.completed`, or `response.incomplete` when it ended without a stop token.
 */

import { FRAME_COUNTER, FRAME_TEXT, type FrameTemplate, type LaneProgress, writeFrame } from '../backend/frames'
import type { BackendStream } from '../backend/protocol'
import { HarmonyStateError } from '../base/errors'
import type { HarmonyStreamParserOptions } from '../base/types'
import { type AdapterDiagnostic, type FinishOptions, randomId } from './chat'
import { type LaneTemplate, SILENT_FRAME } from './lane'
import { type InputKind, type MessageEvent, MessageStream } from './message-stream'
import { checkAdapterOptions, parserOptionsOf, RESPONSES_OPTIONS } from './options'
import { recoveredDiagnostic, TextCallRecovery } from './recovery'
import { droppedDiagnostic, type Route, type RoutingOptions, routeOf, toolArgumentsDiagnostic, toolName } from './routing'
import type { HeldOutput } from './text-tool-calls'

export interface ResponsesAdapterOptions extends RoutingOptions {
  model: string
  /** Response id (`resp_…`); item ids derive from it. Default: a random one. */
  id?: string
  /** Unix seconds. Default: now. */
  createdAt?: number
  /** Input tokens, for `usage`. Default 0. */
  inputTokens?: number
  /** As for Chat: bare tool names get `functions.`. */
  parser?: HarmonyStreamParserOptions
  /** The request's `tools` array as it came: its functions become the parser's `toolNames`. */
  tools?: readonly unknown[] | null
  /** As for Chat: `'recover'` turns calls written as JSON in final text into `function_call` items. */
  textToolCalls?: 'off' | 'recover'
  /** `'text'` to feed text whose markers arrive as text (llama.cpp, Ollama) instead of token ids. */
  input?: InputKind
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

interface OpenItem {
  route: Route
  outputIndex: number
  item: ResponseItem
  text: string
  /** SSE: the delta frame around its sequence number and delta, made on the item's first delta. */
  frame?: FrameTemplate
}

/** Events as built: objects, or (when writing SSE) delta frames already serialized. */
type Built = ResponseEvent | string

/** Streaming Responses for one completion: `start()`, then `push(tokens)` per engine step, then `finish()`. */
export class ResponsesStream {
  readonly id: string
  private readonly createdAt: number
  private readonly stream: MessageStream
  private readonly open = new Map<number, OpenItem>()
  private readonly output: ResponseItem[] = []
  private sequence = 0
  private reasoningTokens = 0
  private lastTerminator: string | null | undefined = undefined
  private started = false
  private done = false
  private truncated = false
  private readonly adapterDiagnostics: AdapterDiagnostic[] = []
  private readonly recovery: TextCallRecovery
  private recoveredCalls = 0
  /** Set by the SSE methods: deltas are then built as frames. */
  private sseMode = false
  /** `pushSse`'s hot path for the open message, set after each of its calls (`textLane`). */
  private lane: OpenItem | null | undefined = undefined

  constructor(readonly options: ResponsesAdapterOptions) {
    checkAdapterOptions(options, RESPONSES_OPTIONS, 'ResponsesStream')
    this.id = options.id ?? randomId('resp_')
    this.createdAt = options.createdAt ?? Math.floor(Date.now() / 1000)
    const parserOptions = parserOptionsOf(options as never, 'ResponsesStream')
    this.stream = new MessageStream(parserOptions, options.input)
    this.recovery = new TextCallRecovery(options, parserOptions.toolNames ?? [])
  }

  /** Abandons the response (the client went away): releases the parser at once and builds no events. */
  close(): void {
    this.done = true
    this.lane = undefined
    this.stream.close()
  }

  /** `close()`, under the name an abort handler looks for. */
  abort(): void {
    this.close()
  }

  get diagnostics(): AdapterDiagnostic[] {
    return [...this.stream.diagnostics, ...this.adapterDiagnostics]
  }

  /** `response.created` and `response.in_progress`. */
  start(): ResponseEvent[] {
    return this.objects(() => this.startInto())
  }

  push(input: Uint32Array | readonly number[] | string): ResponseEvent[] {
    return this.objects(() => this.pushInto(input))
  }

  /** The events the end of the stream flushes, then `response.completed` (or `response.incomplete`). */
  finish(options: FinishOptions = {}): ResponseEvent[] {
    return this.objects(() => this.finishInto(options))
  }

  /** `start`, as SSE bytes (`event: TYPE\ndata: JSON\n\n` per event). */
  startSse(): string {
    return this.frames(() => this.startInto())
  }

  /** `push`, as the SSE bytes of its events; deltas are written from per-item templates, not objects. */
  pushSse(input: Uint32Array | readonly number[] | string): string {
    // The hot path: tokens that only add text to the open message's item (see `textLane`).
    const lane = this.lane
    if (lane !== undefined && typeof input !== 'string') {
      const text = this.stream.pushText(input)
      if (text !== null) {
        if (text === '' || lane === null) return ''
        const events: Built[] = []
        this.delta(lane, text, events)
        return events[0] as string
      }
    }
    const frames = this.frames(() => this.pushInto(input))
    this.lane = this.textLane()
    return frames
  }

  finishSse(options: FinishOptions = {}): string {
    return this.frames(() => this.finishInto(options))
  }

  /** @internal `SsePool`: the backend stream under this adapter's parser. */
  laneStream(): BackendStream | null {
    return this.done ? null : this.stream.parser.laneStream()
  }

  /** @internal `SsePool`: `response.created` and `response.in_progress` go out with the first step. */
  laneReady(): boolean {
    return this.started && !this.done
  }

  /** @internal `SsePool`: whether a message is being read. */
  readsMessage(): boolean {
    return this.stream.parser.openMessage() !== null
  }

  /** @internal `SsePool`: the frame every text delta of the open message gets from `pushSse` now. */
  laneTemplate(): LaneTemplate | null {
    const item = this.textLane()
    if (item === undefined) return null
    return { template: item === null ? SILENT_FRAME : (item.frame ??= deltaFrame(item)), counter: this.sequence }
  }

  /**
   * Where the text of the open message goes while `pushSse` writes each delta as one frame: its item, null
   * for a message whose text is dropped, undefined when a delta would be more than a frame (nothing sent
   * yet, text held back for tool-call recovery) or no message is open.
   */
  private textLane(): OpenItem | null | undefined {
    const open = this.stream.parser.openMessage()
    if (!this.started || !this.sseMode || this.done || open === null || this.readsForCalls(open.header)) return undefined
    if (routeOf(open.header, this.options) === 'ignore') return null
    return this.open.get(open.index)
  }

  /** @internal `SsePool`: what the fast lane sent of the open message (its frames used sequence numbers up to `counter`). */
  absorbLane(progress: LaneProgress): void {
    const open = this.stream.parser.openMessage()
    const item = open === null ? undefined : this.open.get(open.index)
    if (item !== undefined) item.text += progress.text
    this.stream.absorbLane(progress.text, progress.tokens)
    // Frames were written only for text; without text the counter says nothing.
    if (progress.text !== '') this.sequence = progress.counter
  }

  private objects(build: () => Built[]): ResponseEvent[] {
    this.sseMode = false
    return build() as ResponseEvent[]
  }

  private frames(build: () => Built[]): string {
    this.sseMode = true
    let out = ''
    for (const event of build()) out += typeof event === 'string' ? event : `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`
    return out
  }

  private startInto(): Built[] {
    if (this.started) return []
    this.started = true
    return [
      this.event('response.created', { response: this.response('in_progress') }),
      this.event('response.in_progress', { response: this.response('in_progress') }),
    ]
  }

  private pushInto(input: Uint32Array | readonly number[] | string): Built[] {
    this.lane = undefined
    if (this.done)
      throw new HarmonyStateError('adapter-finished', 'push() after finish(), error() or close(): create a new adapter for a new response')
    const started = this.startInto()
    const events = this.events(this.stream.pushInput(input))
    return started.length === 0 ? events : [...started, ...events]
  }

  private finishInto(options: FinishOptions): Built[] {
    this.lane = undefined
    if (this.done) return []
    this.done = true
    this.truncated = options.truncated === true
    const events = [...this.startInto(), ...this.events(this.stream.finish())]
    const complete = this.lastTerminator != null && !this.truncated
    const response = this.response(complete ? 'completed' : 'incomplete')
    events.push(this.event(complete ? 'response.completed' : 'response.incomplete', { response }))
    return events
  }

  /** The `error` event to send when the stream cannot go on (the engine failed, a strict parse error). */
  error(message: string, code = 'server_error'): ResponseEvent {
    this.done = true
    return this.event('error', { code, message, param: null })
  }

  /** The response as it stands (complete after `finish()`). */
  response(
    status: ResponseObject['status'] = this.done
      ? this.lastTerminator != null && !this.truncated
        ? 'completed'
        : 'incomplete'
      : 'in_progress',
  ): ResponseObject {
    const input = this.options.inputTokens ?? 0
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
              input_tokens_details: { cached_tokens: 0 },
              output_tokens: this.stream.tokens,
              output_tokens_details: { reasoning_tokens: this.reasoningTokens },
              total_tokens: input + this.stream.tokens,
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

  private event(type: string, fields: Record<string, unknown>): ResponseEvent {
    return { type, sequence_number: this.sequence++, ...fields }
  }

  private events(messageEvents: MessageEvent[]): Built[] {
    const events: Built[] = []
    for (const event of messageEvents) {
      if (event.kind === 'open') {
        // Every item is added when its header completes, before any delta; final text that may still turn
        // out to be a tool call (textToolCalls: 'recover') gets its item with the first text released.
        if (!this.readsForCalls(event.opened)) this.itemOf(event.opened.messageIndex, event.opened, events)
      } else if (event.kind === 'text') {
        const { segment } = event
        if (this.readsForCalls(segment))
          this.held(segment.messageIndex, segment, this.recovery.feed(segment.messageIndex, segment.text), events)
        else {
          const item = this.itemOf(segment.messageIndex, segment, events)
          if (item !== null) this.delta(item, segment.text, events)
        }
      } else {
        const recovering = this.readsForCalls(event.message)
        if (recovering) this.held(event.index, event.message, this.recovery.end(event.index), events)
        // A message whose text all became tool calls has no item of its own.
        const item = recovering ? (this.open.get(event.index) ?? null) : this.itemOf(event.index, event.message, events)
        this.lastTerminator = event.message.terminator
        if (item === null) {
          if (routeOf(event.message, this.options) === 'ignore')
            this.adapterDiagnostics.push(droppedDiagnostic(event.message, this.stream.tokens))
          continue
        }
        if (item.route === 'reasoning') this.reasoningTokens += event.tokens
        this.closeItem(item, event.message.terminator === null ? 'incomplete' : 'completed', events)
        this.open.delete(event.index)
        if (item.item.type === 'function_call') {
          const call = { name: item.item.name, id: item.item.call_id, arguments: item.text, contentType: event.message.contentType }
          const diagnostic = toolArgumentsDiagnostic(call, this.stream.tokens)
          if (diagnostic !== null) this.adapterDiagnostics.push(diagnostic)
        }
      }
    }
    return events
  }

  /** Whether a message's text goes through the text-call holder: content routed, and recovery on for it. */
  private readsForCalls(header: { role: string; channel?: string | null; recipient?: string | null }): boolean {
    // applies() first: with recovery off (the default) no route is worked out per text segment.
    return this.recovery.applies(header) && routeOf(header, this.options) === 'content'
  }

  /** What the holder released: text into the message's item, recovered calls as whole function_call items. */
  private held(
    index: number,
    header: { role: string; channel?: string | null; recipient?: string | null },
    outputs: HeldOutput[],
    events: Built[],
  ): void {
    for (const output of outputs) {
      if ('text' in output) {
        const item = this.itemOf(index, header, events)
        if (item !== null) this.delta(item, output.text, events)
        continue
      }
      const { call } = output
      const base = `${this.id.replace(/^resp_/, '')}_${index}_t${this.recoveredCalls++}`
      const item: ResponseItem = {
        id: `fc_${base}`,
        type: 'function_call',
        call_id: `call_${base}`,
        name: call.name,
        arguments: '',
        status: 'in_progress',
      }
      const open: OpenItem = { route: 'tool', outputIndex: this.output.length, item, text: '' }
      this.output.push(item)
      events.push(this.event('response.output_item.added', { output_index: open.outputIndex, item: structuredClone(item) }))
      this.delta(open, call.arguments, events)
      this.closeItem(open, 'completed', events)
      this.adapterDiagnostics.push(recoveredDiagnostic(call, item.call_id, this.stream.tokens))
    }
  }

  /** The item of message `index`, added (with its events) on first sight; null for ignored messages. */
  private itemOf(
    index: number,
    header: { role: string; channel?: string | null; recipient?: string | null },
    events: Built[],
  ): OpenItem | null {
    const known = this.open.get(index)
    if (known) return known
    const route = routeOf(header, this.options)
    if (route === 'ignore') return null
    const base = `${this.id.replace(/^resp_/, '')}_${index}`
    let item: ResponseItem
    if (route === 'reasoning') item = { id: `rs_${base}`, type: 'reasoning', summary: [], content: [], status: 'in_progress' }
    else if (route === 'content') item = { id: `msg_${base}`, type: 'message', role: 'assistant', status: 'in_progress', content: [] }
    else
      item = {
        id: `fc_${base}`,
        type: 'function_call',
        call_id: `call_${base}`,
        name: toolName(header.recipient!),
        arguments: '',
        status: 'in_progress',
      }
    const open: OpenItem = { route, outputIndex: this.output.length, item, text: '' }
    this.output.push(item)
    this.open.set(index, open)
    events.push(this.event('response.output_item.added', { output_index: open.outputIndex, item: structuredClone(item) }))
    if (item.type === 'reasoning') {
      events.push(
        this.event('response.content_part.added', {
          item_id: item.id,
          output_index: open.outputIndex,
          content_index: 0,
          part: { type: 'reasoning_text', text: '' },
        }),
      )
    } else if (item.type === 'message') {
      events.push(
        this.event('response.content_part.added', {
          item_id: item.id,
          output_index: open.outputIndex,
          content_index: 0,
          part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
        }),
      )
    }
    return open
  }

  private delta(open: OpenItem, delta: string, events: Built[]): void {
    open.text += delta
    if (this.sseMode) {
      // Byte for byte the frame of the event object below, without making it.
      events.push(writeFrame((open.frame ??= deltaFrame(open)), delta, this.sequence++))
      return
    }
    const where = { item_id: open.item.id, output_index: open.outputIndex }
    if (open.item.type === 'reasoning') events.push(this.event('response.reasoning_text.delta', { ...where, content_index: 0, delta }))
    else if (open.item.type === 'message')
      events.push(this.event('response.output_text.delta', { ...where, content_index: 0, delta, logprobs: [] }))
    else events.push(this.event('response.function_call_arguments.delta', { ...where, delta }))
  }

  private closeItem(open: OpenItem, status: ItemStatus, events: Built[]): void {
    const { item, text } = open
    const where = { item_id: item.id, output_index: open.outputIndex }
    if (item.type === 'reasoning') {
      const part = { type: 'reasoning_text' as const, text }
      item.content = [part]
      events.push(this.event('response.reasoning_text.done', { ...where, content_index: 0, text }))
      events.push(this.event('response.content_part.done', { ...where, content_index: 0, part }))
    } else if (item.type === 'message') {
      const part = { type: 'output_text' as const, text, annotations: [] as [], logprobs: [] as [] }
      item.content = [part]
      events.push(this.event('response.output_text.done', { ...where, content_index: 0, text, logprobs: [] }))
      events.push(this.event('response.content_part.done', { ...where, content_index: 0, part }))
    } else {
      item.arguments = text
      events.push(this.event('response.function_call_arguments.done', { ...where, name: item.name, arguments: text }))
    }
    item.status = status
    events.push(this.event('response.output_item.done', { output_index: open.outputIndex, item: structuredClone(item) }))
  }
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

/** Non-streaming Responses: a whole completion's tokens → one `response` object (the streamed one, complete). */
export function responseObject(
  tokens: Uint32Array | readonly number[] | string,
  options: ResponsesAdapterOptions & FinishOptions,
): ResponseObject & { diagnostics: AdapterDiagnostic[] } {
  const stream = new ResponsesStream(options)
  stream.push(tokens)
  stream.finish(options)
  return { ...stream.response(), diagnostics: stream.diagnostics }
}
