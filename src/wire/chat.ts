/**
 * Chat Completions: parser output → `chat.completion.chunk` objects (streaming) or one `chat.completion`.
 *
 * Mapping (see `routing.ts`): analysis → `reasoning_content` (and/or `reasoning`, option `reasoningField`);
 * final → `content`; a preamble (commentary, no recipient) → `content` by default; recipient `functions.X`,
 * on any channel → `tool_calls` (index, id, type and name on the call's first delta, then argument deltas).
 * `finish_reason`: `tool_calls` after `<|call|>`, `stop` after `<|return|>`/`<|end|>`, `length` when the
 * stream ends without a stop token. Tool arguments are checked as JSON when the call closes; invalid JSON has
 * already been streamed raw and gets a diagnostic, never an error.
 */

import { FRAME_TEXT, type FrameTemplate, type LaneProgress, writeFrame } from '../backend/frames'
import type { BackendStream } from '../backend/protocol'
import { HarmonyStateError } from '../base/errors'
import type { HarmonyDiagnostic, HarmonyStreamParserOptions } from '../base/types'
import { type LaneTemplate, SILENT_FRAME } from './lane'
import { type InputKind, type MessageEvent, MessageStream } from './message-stream'
import { CHAT_OPTIONS, checkAdapterOptions, parserOptionsOf } from './options'
import { recoveredDiagnostic, TextCallRecovery } from './recovery'
import { droppedDiagnostic, type Route, type RoutingOptions, routeOf, toolArgumentsDiagnostic, toolName } from './routing'
import type { HeldOutput, RecoveredCall } from './text-tool-calls'

export interface ChatAdapterOptions extends RoutingOptions {
  /** `model` of every chunk. */
  model: string
  /** Completion id (`chatcmpl-…`); tool call ids derive from it. Default: a random one. */
  id?: string
  /** Unix seconds. Default: now. */
  created?: number
  /** Field for reasoning text: `reasoning_content` (default, as DeepSeek and SGLang), `reasoning` (vLLM), or both. */
  reasoningField?: 'reasoning_content' | 'reasoning' | 'both'
  /** Prompt tokens, for `usage`. Default 0. */
  promptTokens?: number
  /** Emit a final chunk with `usage` (as `stream_options.include_usage` asks). Default false. */
  includeUsage?: boolean
  /**
   * Options of the underlying parser (role, strict, toolNames, implementation…). Tool names may be bare
   * (`get_weather`): names without a namespace get `functions.`.
   */
  parser?: HarmonyStreamParserOptions
  /** The request's `tools` array as it came (Chat or Responses shape): its functions become the parser's `toolNames`. */
  tools?: readonly unknown[] | null
  /**
   * `'recover'`: a call of a declared tool that the model wrote as JSON in its final text becomes a real tool
   * call (docs/API.md "Tool calls written as text"). Default `'off'`.
   */
  textToolCalls?: 'off' | 'recover'
  /** `'text'` to feed text whose markers arrive as text (llama.cpp, Ollama) instead of token ids. */
  input?: InputKind
}

export interface ChatToolCallDelta {
  index: number
  id?: string
  type?: 'function'
  function: { name?: string; arguments: string }
}

export interface ChatDelta {
  role?: 'assistant'
  content?: string
  reasoning_content?: string
  reasoning?: string
  tool_calls?: ChatToolCallDelta[]
}

export type FinishReason = 'stop' | 'length' | 'tool_calls'

export interface ChatUsage {
  prompt_tokens: number
  completion_tokens: number
  total_tokens: number
  completion_tokens_details: { reasoning_tokens: number }
}

export interface ChatCompletionChunk {
  id: string
  object: 'chat.completion.chunk'
  created: number
  model: string
  choices: { index: 0; delta: ChatDelta; finish_reason: FinishReason | null; logprobs: null }[]
  usage?: ChatUsage | null
}

export interface ChatToolCall {
  id: string
  type: 'function'
  function: { name: string; arguments: string }
}

export interface ChatCompletion {
  id: string
  object: 'chat.completion'
  created: number
  model: string
  choices: {
    index: 0
    message: { role: 'assistant'; content: string | null; reasoning_content?: string; reasoning?: string; tool_calls?: ChatToolCall[] }
    finish_reason: FinishReason
    logprobs: null
  }[]
  usage: ChatUsage
}

/** A diagnostic of the adapter itself, e.g. tool arguments that are not valid JSON. */
export interface AdapterDiagnostic extends HarmonyDiagnostic {
  /** The tool call concerned, for `invalid-tool-arguments`. */
  toolCallId?: string
}

export function randomId(prefix: string): string {
  return `${prefix}${Math.random().toString(36).slice(2, 14)}${Math.random().toString(36).slice(2, 14)}`
}

/**
 * Finish reason from the terminator of the completion's last message: `length` when the stream ended
 * without one (or the engine says it was cut: `truncated`), `tool_calls` after `<|call|>` if tool calls were
 * sent (a call to a built-in tool the gateway dropped is a plain `stop`), `stop` otherwise.
 */
export function finishReasonOf(
  terminator: string | null | undefined,
  toolCalls: number,
  truncated = false,
  recoveredCalls = 0,
): FinishReason {
  if (truncated || terminator == null) return 'length'
  // A call recovered from final text ends the turn like a Harmony tool call.
  if (recoveredCalls > 0) return 'tool_calls'
  return terminator === 'call' && toolCalls > 0 ? 'tool_calls' : 'stop'
}

/** How the engine ended the stream, when it knows more than the tokens show. */
export interface FinishOptions {
  /** The engine stopped at its token limit (even right after a stop token): report `length`/`incomplete`. */
  truncated?: boolean
}

interface MessageState {
  route: Route
  /** Tool calls: the index in `tool_calls` and whether the chunk with id and name went out. */
  toolIndex?: number
  announced?: boolean
  recipient?: string
  /** SSE: the frame of the call's argument deltas, made on first use. */
  frame?: FrameTemplate
}

/**
 * The shared bookkeeping of both chat forms: routes each message once, numbers tool calls, counts
 * reasoning tokens, checks tool arguments at close.
 */
class ChatMapper {
  readonly messages = new Map<number, MessageState>()
  toolCalls = 0
  /** Calls recovered from final text (`textToolCalls: 'recover'`). */
  recoveredCalls = 0
  readonly recovery: TextCallRecovery
  reasoningTokens = 0
  lastTerminator: string | null | undefined = undefined
  readonly diagnostics: AdapterDiagnostic[] = []
  /** The fields reasoning text goes in, in order (option `reasoningField`); every face of the adapter uses these. */
  readonly reasoningFields: readonly ('reasoning_content' | 'reasoning')[]

  constructor(
    readonly options: ChatAdapterOptions,
    readonly id: string,
    toolNames: readonly string[],
  ) {
    this.recovery = new TextCallRecovery(options, toolNames)
    const field = options.reasoningField ?? 'reasoning_content'
    this.reasoningFields = field === 'both' ? ['reasoning_content', 'reasoning'] : [field]
  }

  /** A call recovered from text: the next tool index, announced whole in one delta. */
  recoveredCall(call: RecoveredCall, tokenOffset: number): ChatToolCallDelta {
    const index = this.toolCalls++
    this.recoveredCalls++
    const id = this.toolCallId(index)
    this.diagnostics.push(recoveredDiagnostic(call, id, tokenOffset))
    return { index, id, type: 'function', function: { name: call.name, arguments: call.arguments } }
  }

  stateOf(index: number, header: { role: string; channel?: string | null; recipient?: string | null }): MessageState {
    let state = this.messages.get(index)
    if (state === undefined) {
      state = { route: routeOf(header, this.options) }
      if (state.route === 'tool') {
        state.toolIndex = this.toolCalls++
        state.recipient = header.recipient!
      }
      this.messages.set(index, state)
    }
    return state
  }

  toolCallId(index: number): string {
    return `call_${this.id.replace(/^chatcmpl-/, '')}_${index}`
  }

  reasoningDelta(text: string): ChatDelta {
    const delta: ChatDelta = {}
    for (const field of this.reasoningFields) delta[field] = text
    return delta
  }

  /** Bookkeeping at a message's close (`tokenOffset`: tokens read so far); returns its state. */
  closed(event: Extract<MessageEvent, { kind: 'close' }>, tokenOffset: number): MessageState {
    const { message } = event
    const state = this.stateOf(event.index, message)
    this.messages.delete(event.index)
    this.lastTerminator = message.terminator
    if (state.route === 'reasoning') this.reasoningTokens += event.tokens
    if (state.route === 'ignore') this.diagnostics.push(droppedDiagnostic(message, tokenOffset))
    if (state.route === 'tool') {
      const call = {
        name: toolName(state.recipient!),
        id: this.toolCallId(state.toolIndex!),
        arguments: message.content,
        contentType: message.contentType,
      }
      const diagnostic = toolArgumentsDiagnostic(call, tokenOffset)
      if (diagnostic !== null) this.diagnostics.push(diagnostic)
    }
    return state
  }
}

/**
 * Streaming Chat Completions for one completion: feed it tokens, send the chunks it returns. Two faces of one
 * mapping: `push`/`finish` return chunk objects; `pushSse`/`finishSse` return the SSE bytes of the same
 * chunks (`data: JSON\n\n` each) as one string, built from per-stream templates without chunk objects.
 */
export class ChatCompletionsStream {
  readonly id: string
  readonly created: number
  private readonly stream: MessageStream
  private readonly mapper: ChatMapper
  private started = false
  private done = false
  /** Where `emit` puts chunks: objects for `push`/`finish`, else SSE text into `sse`. */
  private objects: ChatCompletionChunk[] | null = null
  private sse = ''
  /** `data: {"id":…,"choices":[{"index":0,"delta":`: every frame's start, made once. */
  private frameHead: string | null = null
  /** `pushSse`'s hot path: the frame of the open message's text deltas, set after each of its calls. */
  private lane: FrameTemplate | null = null
  /** The frames of content and reasoning deltas, made once (`textFrame`). */
  private contentFrame: FrameTemplate | null = null
  private reasoningFrame: FrameTemplate | null = null

  constructor(readonly options: ChatAdapterOptions) {
    checkAdapterOptions(options, CHAT_OPTIONS, 'ChatCompletionsStream')
    this.id = options.id ?? randomId('chatcmpl-')
    this.created = options.created ?? Math.floor(Date.now() / 1000)
    const parserOptions = parserOptionsOf(options as never, 'ChatCompletionsStream')
    this.stream = new MessageStream(parserOptions, options.input)
    this.mapper = new ChatMapper(options, this.id, parserOptions.toolNames ?? [])
  }

  /** Diagnostics of the parser and of the adapter (invalid tool arguments) so far. */
  get diagnostics(): AdapterDiagnostic[] {
    return [...this.stream.diagnostics, ...this.mapper.diagnostics]
  }

  /** The chunks for the next tokens of the completion. */
  push(input: Uint32Array | readonly number[] | string): ChatCompletionChunk[] {
    const chunks: ChatCompletionChunk[] = []
    this.objects = chunks
    this.pushInto(input)
    return chunks
  }

  /** `push`, as the SSE bytes of its chunks: what to write to the socket. */
  pushSse(input: Uint32Array | readonly number[] | string): string {
    // The hot path: tokens that only add text to the open message, written with its frame (`laneTemplate`).
    const lane = this.lane
    if (lane !== null && typeof input !== 'string') {
      const text = this.stream.pushText(input)
      if (text !== null) return text === '' || lane.slots.length === 0 ? '' : writeFrame(lane, text, 0)
    }
    this.objects = null
    this.sse = ''
    this.pushInto(input)
    this.lane = this.laneTemplate()?.template ?? null
    return this.sse
  }

  /** The last chunks: what the end of the stream flushes, the finish reason, and usage if asked for. */
  finish(options: FinishOptions = {}): ChatCompletionChunk[] {
    const chunks: ChatCompletionChunk[] = []
    this.objects = chunks
    this.finishInto(options)
    return chunks
  }

  /** `finish`, as SSE bytes; `[DONE]` is not included (`pipeSse` adds it). */
  finishSse(options: FinishOptions = {}): string {
    this.objects = null
    this.sse = ''
    this.finishInto(options)
    return this.sse
  }

  /**
   * Abandons the completion (the client went away): releases the parser at once and builds no events.
   * `push` then throws; `finish` returns nothing.
   */
  close(): void {
    this.done = true
    this.lane = null
    this.stream.close()
  }

  /** `close()`, under the name an abort handler looks for. */
  abort(): void {
    this.close()
  }

  usage(): ChatUsage {
    const prompt = this.options.promptTokens ?? 0
    return {
      prompt_tokens: prompt,
      completion_tokens: this.stream.tokens,
      total_tokens: prompt + this.stream.tokens,
      completion_tokens_details: { reasoning_tokens: this.mapper.reasoningTokens },
    }
  }

  private pushInto(input: Uint32Array | readonly number[] | string): void {
    this.lane = null
    if (this.done)
      throw new HarmonyStateError('adapter-finished', 'push() after finish() or close(): create a new adapter for a new completion')
    this.chunks(this.stream.pushInput(input))
  }

  private finishInto(options: FinishOptions): void {
    this.lane = null
    if (this.done) return
    this.done = true
    this.chunks(this.stream.finish())
    if (!this.started) this.emit({ role: 'assistant', content: '' })
    this.emit({}, finishReasonOf(this.mapper.lastTerminator, this.mapper.toolCalls, options.truncated, this.mapper.recoveredCalls))
    if (this.options.includeUsage) {
      const chunk: ChatCompletionChunk = { ...this.chunkOf({}, null), choices: [], usage: this.usage() }
      if (this.objects !== null) this.objects.push(chunk)
      else this.sse += `data: ${JSON.stringify(chunk)}\n\n`
    }
  }

  private chunkOf(delta: ChatDelta, finishReason: FinishReason | null): ChatCompletionChunk {
    return {
      id: this.id,
      object: 'chat.completion.chunk',
      created: this.created,
      model: this.options.model,
      choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null }],
    }
  }

  /** One chunk, as an object or as its SSE frame (byte for byte `data: ${JSON.stringify(chunk)}\n\n`). */
  private emit(delta: ChatDelta, finishReason: FinishReason | null = null): void {
    if (!this.started) {
      this.started = true
      delta = { role: 'assistant', ...delta }
    }
    if (this.objects !== null) {
      this.objects.push(this.chunkOf(delta, finishReason))
      return
    }
    this.sse += `${this.head()}${JSON.stringify(delta)},"finish_reason":${finishReason === null ? 'null' : JSON.stringify(finishReason)},"logprobs":null}]}\n\n`
  }

  /** A text delta (the hot path): as `emit({ [field]: text })`, without the delta object when writing SSE. */
  private emitText(field: 'content' | 'reasoning', text: string): void {
    if (this.objects !== null || !this.started) {
      this.emit(field === 'content' ? { content: text } : this.mapper.reasoningDelta(text))
      return
    }
    this.sse += writeFrame(this.textFrame(field), text, 0)
  }

  /** An argument delta of an announced call (the hot path of tool calls), as `emit` would write it. */
  private emitArguments(state: MessageState, text: string): void {
    if (this.objects !== null || !state.announced || !this.started) {
      this.emit({ tool_calls: [this.toolDelta(state, text)] })
      return
    }
    this.sse += writeFrame(this.argumentsFrame(state), text, 0)
  }

  /** The frame of a content or reasoning delta once the first chunk went out: `emit`'s bytes around the text. */
  private textFrame(field: 'content' | 'reasoning'): FrameTemplate {
    if (field === 'content') return (this.contentFrame ??= this.deltaFrame(['{"content":', '}'], [FRAME_TEXT]))
    const names = this.mapper.reasoningFields
    // One field, or both with the text twice: {"reasoning_content":T,"reasoning":T}.
    this.reasoningFrame ??= this.deltaFrame(
      [`{"${names[0]}":`, ...names.slice(1).map((name) => `,"${name}":`), '}'],
      names.map(() => FRAME_TEXT),
    )
    return this.reasoningFrame
  }

  /** The frame of an argument delta of an announced call. */
  private argumentsFrame(state: MessageState): FrameTemplate {
    state.frame ??= this.deltaFrame([`{"tool_calls":[{"index":${state.toolIndex},"function":{"arguments":`, '}}]}'], [FRAME_TEXT])
    return state.frame
  }

  /** A chunk's frame around a delta whose JSON is `delta` (literals and slots of the delta object alone). */
  private deltaFrame(delta: string[], slots: number[]): FrameTemplate {
    const literals = [this.head() + delta[0], ...delta.slice(1)]
    literals[literals.length - 1] += ',"finish_reason":null,"logprobs":null}]}\n\n'
    return { literals, slots }
  }

  private head(): string {
    this.frameHead ??= `data: {"id":${JSON.stringify(this.id)},"object":"chat.completion.chunk","created":${JSON.stringify(this.created)},"model":${JSON.stringify(this.options.model)},"choices":[{"index":0,"delta":`
    return this.frameHead
  }

  /** @internal `SsePool`: the backend stream under this adapter's parser. */
  laneStream(): BackendStream | null {
    return this.done ? null : this.stream.parser.laneStream()
  }

  /** @internal `SsePool`: a chat stream has nothing to send before its first text or call. */
  laneReady(): boolean {
    return !this.done
  }

  /** @internal `SsePool`: whether a message is being read. */
  readsMessage(): boolean {
    return this.stream.parser.openMessage() !== null
  }

  /** @internal `SsePool`: the frame every text delta of the open message gets from `pushSse` now. */
  laneTemplate(): LaneTemplate | null {
    const open = this.stream.parser.openMessage()
    if (!this.started || this.done || open === null) return null
    const state = this.mapper.messages.get(open.index)
    switch (state?.route) {
      case 'reasoning':
        return { template: this.textFrame('reasoning'), counter: 0 }
      case 'content':
        return this.mapper.recovery.applies(open.header) ? null : { template: this.textFrame('content'), counter: 0 }
      case 'tool':
        return state!.announced ? { template: this.argumentsFrame(state!), counter: 0 } : null
      case 'ignore':
        return { template: SILENT_FRAME, counter: 0 }
      default:
        return null
    }
  }

  /** @internal `SsePool`: what the fast lane sent of the open message. */
  absorbLane(progress: LaneProgress): void {
    this.stream.absorbLane(progress.text, progress.tokens)
  }

  private chunks(events: MessageEvent[]): void {
    const mapper = this.mapper
    for (const event of events) {
      if (event.kind === 'open') {
        // The model chose a tool: announce the call (id, type, name) now, arguments follow as they come.
        const state = mapper.stateOf(event.opened.messageIndex, event.opened)
        if (state.route === 'tool') this.emit({ tool_calls: [this.toolDelta(state, '')] })
      } else if (event.kind === 'text') {
        const { segment } = event
        const state = mapper.stateOf(segment.messageIndex, segment)
        if (state.route === 'reasoning') this.emitText('reasoning', segment.text)
        else if (state.route === 'content' && mapper.recovery.applies(segment))
          this.held(mapper.recovery.feed(segment.messageIndex, segment.text))
        else if (state.route === 'content') this.emitText('content', segment.text)
        else if (state.route === 'tool') this.emitArguments(state, segment.text)
      } else {
        if (mapper.recovery.holds(event.index)) this.held(mapper.recovery.end(event.index))
        const state = mapper.closed(event, this.stream.tokens)
        // A call whose header was never reported (recovered at the end of the stream) is announced at its close.
        if (state.route === 'tool' && !state.announced) this.emit({ tool_calls: [this.toolDelta(state, '')] })
      }
    }
  }

  /** What the text-call holder released: content, or recovered calls. */
  private held(outputs: HeldOutput[]): void {
    for (const output of outputs) {
      if ('text' in output) this.emitText('content', output.text)
      else this.emit({ tool_calls: [this.mapper.recoveredCall(output.call, this.stream.tokens)] })
    }
  }

  private toolDelta(state: MessageState, text: string): ChatToolCallDelta {
    const index = state.toolIndex!
    if (state.announced) return { index, function: { arguments: text } }
    state.announced = true
    return { index, id: this.mapper.toolCallId(index), type: 'function', function: { name: toolName(state.recipient!), arguments: text } }
  }
}

/** Non-streaming Chat Completions: a whole completion's tokens → one `chat.completion`. */
export function chatCompletion(
  tokens: Uint32Array | readonly number[] | string,
  options: ChatAdapterOptions & FinishOptions,
): ChatCompletion & { diagnostics: AdapterDiagnostic[] } {
  checkAdapterOptions(options, CHAT_OPTIONS, 'chatCompletion')
  const id = options.id ?? randomId('chatcmpl-')
  const parserOptions = parserOptionsOf(options as never, 'chatCompletion')
  const stream = new MessageStream(parserOptions, options.input)
  const mapper = new ChatMapper(options, id, parserOptions.toolNames ?? [])
  const content: string[] = []
  const reasoning: string[] = []
  const toolCalls: ChatToolCall[] = []
  for (const event of [...stream.pushInput(tokens), ...stream.finish()]) {
    if (event.kind !== 'close') continue
    const { message } = event
    const state = mapper.closed(event, stream.tokens)
    if (state.route === 'content' && mapper.recovery.applies(message)) {
      for (const output of [...mapper.recovery.feed(event.index, message.content), ...mapper.recovery.end(event.index)]) {
        if ('text' in output) content.push(output.text)
        else {
          const call = mapper.recoveredCall(output.call, stream.tokens)
          toolCalls.push({ id: call.id!, type: 'function', function: { name: call.function.name!, arguments: call.function.arguments } })
        }
      }
    } else if (state.route === 'content') content.push(message.content)
    else if (state.route === 'reasoning') reasoning.push(message.content)
    else if (state.route === 'tool') {
      toolCalls.push({
        id: mapper.toolCallId(state.toolIndex!),
        type: 'function',
        function: { name: toolName(state.recipient!), arguments: message.content },
      })
    }
  }
  const message: ChatCompletion['choices'][0]['message'] = { role: 'assistant', content: content.length > 0 ? content.join('') : null }
  const reasoningText = reasoning.join('')
  if (reasoning.length > 0) for (const field of mapper.reasoningFields) message[field] = reasoningText
  if (toolCalls.length > 0) message.tool_calls = toolCalls
  const prompt = options.promptTokens ?? 0
  return {
    id,
    object: 'chat.completion',
    created: options.created ?? Math.floor(Date.now() / 1000),
    model: options.model,
    choices: [
      {
        index: 0,
        message,
        finish_reason: finishReasonOf(mapper.lastTerminator, mapper.toolCalls, options.truncated, mapper.recoveredCalls),
        logprobs: null,
      },
    ],
    usage: {
      prompt_tokens: prompt,
      completion_tokens: stream.tokens,
      total_tokens: prompt + stream.tokens,
      completion_tokens_details: { reasoning_tokens: mapper.reasoningTokens },
    },
    diagnostics: [...stream.diagnostics, ...mapper.diagnostics],
  }
}
