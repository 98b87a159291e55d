/**
 * The base of the wire adapters: everything a wire format (Chat Completions, Responses, and any other) shares, so
 * that a format is only its own events, and what a server asks of any of them to stream it (`pipeSse`).
 *
 * The base reads the completion (token ids, Harmony text or engine steps, `input.ts`) through a
 * `MessageStream`, routes each message once (`routing.ts`), holds back text that may be a tool call written
 * as text (`recovery.ts`), counts tokens, reasoning tokens and tool calls, keeps the diagnostics, decides the
 * finish reason (`finish.ts`), and knows when the completion is finished. It gives the format its messages
 * through five hooks (`opened`, `text`, `recovered`, `closed`, `closing`), and owns both faces: every event
 * the format emits becomes an object (`push`/`finish`) or its SSE frame (`pushSse`/`finishSse`), byte for
 * byte the JSON of that object. The SSE face has a fast lane: while a message is open and a step only adds
 * ordinary tokens to it, its text is written with the frame template the format gave for that message
 * (`textFrame`), without events; `SsePool` runs the same lane for many adapters at once (the `lane.ts`
 * hooks, implemented here).
 *
 * A format subclasses `WireAdapter` with its event type and what it keeps per message, describes itself in a
 * `WireFormat` (name, option spec, id prefix), serializes its events (`frameOf`), and implements the hooks.
 */

import { type FrameTemplate, type LaneProgress, writeFrame } from '../backend/frames'
import type { BackendStream } from '../backend/protocol'
import { FIRST_SPECIAL } from '../backend/tokens'
import { HarmonyStateError, type OpenAIAnswer } from '../base/errors'
import { checkOptions } from '../base/options'
import type { HarmonyMessage, Implementation } from '../base/types'
import type { AdapterDiagnostic, AdapterOptions, ErrorAnswer, WireFormat, WireMessage } from './adapter-types'
import { type FinishOptions, type FinishReason, finishReasonOf } from './finish'
import { type AdapterInput, type EngineStepInput, engineStepOf, type StepFinishReason, type TokenIds } from './input'
import { type LaneTemplate, SILENT_FRAME } from './lane'
import { AnswerLogprobs, type OutputLogprob, type StepLogprob } from './logprobs'
import { type MessageEvent, MessageStream } from './message-stream'
import { checkAdapterOptions, FINISH_OPTIONS, parserOptionsOf } from './options'
import { recoveredDiagnostic, TextCallRecovery } from './recovery'
import { droppedDiagnostic, namespaceOf, offeredNamespaces, type RouteFields, routeOf, toolArgumentsDiagnostic, toolName } from './routing'
import { strictArgumentsDiagnostic, structuredOutputDiagnostic } from './schema-check'
import { StopStrings } from './stop-strings'
import type { HeldOutput, RecoveredCall } from './text-tool-calls'
import { missingClosers } from './unclosed-arguments'

export type { AdapterDiagnostic, AdapterOptions, ErrorAnswer, WireFormat, WireMessage } from './adapter-types'

/** A random id with `prefix` (`chatcmpl-…`): an adapter's default `id`, and the one id several choices share. */
export function randomId(prefix: string): string {
  return `${prefix}${Math.random().toString(36).slice(2, 14)}${Math.random().toString(36).slice(2, 14)}`
}

/** Unix seconds, the default of `created`/`createdAt`. */
export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000)
}

type CloseEvent = Extract<MessageEvent, { kind: 'close' }>

// Not declared `implements PooledAdapter`: those members are internal (stripped from the published typings),
// where such a clause would not compile. SsePool's entries hold adapters as `PooledAdapter`, which checks the shape.
export abstract class WireAdapter<Event extends object, Kept, Options extends AdapterOptions = AdapterOptions> {
  readonly id: string
  /** The id without the format's prefix: the stem of tool call and item ids. */
  protected readonly idStem: string
  protected readonly stream: MessageStream
  /** Diagnostics of the adapter (the parser's are the stream's). */
  protected readonly adapterDiagnostics: AdapterDiagnostic[] = []
  /** The format's first frame went out (Chat: the first chunk, with the role; Responses: `response.created`). */
  protected started = false
  /** `finish`, `close` (or Responses' `error`) was called: nothing more is read. */
  protected done = false
  /** The end was settled (`finish` or `settle`), and then concluded (its closing events given). */
  private settled = false
  private concluded = false
  /** The counter of the next frame: Responses' `sequence_number`. A format without one leaves it alone. */
  protected counter = 0
  /** Tool calls so far (counted at first sight; recovered ones included), and the recovered ones among them. */
  protected toolCalls = 0
  protected recoveredCalls = 0
  /** Tokens of the reasoning messages closed so far. */
  protected reasoningTokens = 0
  /** Tokens of the built-in tools' results read so far (route `builtin`): not generated, so not output. */
  private builtinResultTokens = 0
  /** The tool results that failed (their `tool-failed` diagnostics), by their place among the results: why. */
  private readonly toolFailures = new Map<number, string>()
  /** Tool results read so far (route `builtin`, the result side). */
  private toolResults = 0
  /** The terminator of the last message closed (`undefined` before the first, `null` for one cut off). */
  protected lastTerminator: string | null | undefined = undefined
  /** Set at finish: the completion was cut (`finish({ truncated })`, or an engine step's `finishReason: 'length'`). */
  protected truncated = false

  private readonly recovery: TextCallRecovery
  /** The `stop` option's matcher (null without it), and the text of the answer's open message delivered so far. */
  private readonly stops: StopStrings | null
  private answerText = ''
  /** A stop string ended the completion: in message `index`, whose text was `text` up to it. */
  private stoppedAt: { index: number; text: string } | null = null
  private readonly messages = new Map<number, WireMessage<Kept>>()
  /** The `finishReason` of the last engine step that had one, and the prompt tokens the engine reported. */
  private engineFinish: StepFinishReason | undefined = undefined
  private enginePromptTokens: number | undefined = undefined
  /** Prompt tokens the engine served from its prefix cache, as it reported them (0 when it did not). */
  protected cachedPromptTokens = 0
  /** Where events go: collected as objects (the object face), or null to write their frames into `frames`. */
  private sink: Event[] | null = null
  private frames = ''
  /** `pushSse`'s fast lane: the frame of the open message's text deltas, set after each of its calls. */
  private lane: FrameTemplate | null = null
  /** `pushSse`'s lane of a held message (`heldText`): that message, set after each of its calls. */
  private heldOpen: WireMessage<Kept> | null = null
  /** With the `logprobs` option: the log probabilities of the step being read (null: none came with it). */
  private stepLogprobs: readonly (StepLogprob | null)[] | null = null
  /** With the `logprobs` option: the answer tokens' log probabilities, until their text goes out. */
  private readonly answerLogprobs: AnswerLogprobs | null
  /** The tool namespaces besides `functions` that the parser's tool names offer. */
  private readonly namespaces: ReadonlySet<string>

  protected constructor(
    readonly options: Options,
    private readonly format: WireFormat,
  ) {
    checkAdapterOptions(options, format.options, format.name)
    this.id = options.id ?? randomId(format.idPrefix)
    this.idStem = this.id.startsWith(format.idPrefix) ? this.id.slice(format.idPrefix.length) : this.id
    const parserOptions = parserOptionsOf(options, format.name)
    this.stream = new MessageStream(parserOptions, options.input)
    this.recovery = new TextCallRecovery(options, parserOptions.toolNames ?? [])
    this.namespaces = offeredNamespaces(parserOptions.toolNames ?? [])
    this.stops = options.stop === undefined ? null : new StopStrings(options.stop)
    this.answerLogprobs = AnswerLogprobs.of(options, format.name)
  }

  // ---- What a format implements ----

  /** The SSE frame of an event: byte for byte what a client parses back into it. */
  protected abstract frameOf(event: Event): string
  /** A message's header completed (messages whose text is held are opened by their first released text). */
  protected abstract opened(message: WireMessage<Kept>): void
  /** Text of a message that is not dropped: as it streams, or as text-call recovery releases it. */
  protected abstract text(message: WireMessage<Kept>, text: string): void
  /**
   * A call recovered from a held message's text, the completion's tool call number `toolIndex` and its
   * recovered call number `ordinal` (both from 0). Returns the call's id.
   */
  protected abstract recovered(message: WireMessage<Kept>, call: RecoveredCall, toolIndex: number, ordinal: number): string
  /** A message ended (after the base's bookkeeping). */
  protected abstract closed(message: WireMessage<Kept>, close: CloseEvent): void
  /** The id of a tool call message, for its diagnostics. */
  protected abstract callIdOf(message: WireMessage<Kept>): string
  /** The end of the completion, after its last message: the format's closing events. */
  protected abstract closing(reason: FinishReason): void
  /**
   * The frame of every text delta of an open message from now on (its counter slot, if any, takes
   * `counter`), or null when a delta would be more than one frame (e.g. a call not yet announced).
   */
  protected abstract textFrame(message: WireMessage<Kept>): FrameTemplate | null

  /** The events a format owes before anything else (Responses: `response.created`); called before every read. */
  protected opening(): void {}

  /** Whether the format still owes its opening events (a step that writes nothing would leave them unsent). */
  protected owesOpening(): boolean {
    return false
  }

  // ---- The object face and the SSE face ----

  /** The events for the next tokens of the completion. */
  push(input: AdapterInput): Event[] {
    return this.objectsOf(() => this.pushInto(input, 'push'))
  }

  /** `push`, as the SSE bytes of its events: what to write to the socket. */
  pushSse(input: AdapterInput): string {
    // The fast lane: tokens that only add text to the open message, written with its frame.
    const lane = this.lane
    const held = this.heldOpen
    if (lane !== null || held !== null) {
      const read = this.read(input, 'pushSse')
      if (typeof read !== 'string') {
        const text = this.stream.pushText(read)
        if (text !== null) {
          if (held !== null) return this.heldText(held, text)
          return text === '' || lane!.slots.length === 0 ? '' : writeFrame(lane!, text, this.counter++)
        }
      }
      input = read
    }
    this.writeSse()
    this.pushInto(input, 'pushSse')
    this.lane = this.laneFrame()
    this.heldOpen = this.lane === null ? this.heldLaneMessage() : null
    return this.takeFrames()
  }

  /**
   * The lane of a held message (text-call recovery): its tokens are read as text without events, as in the
   * lane, and the text goes through recovery as the events' text would. Prose after prose passes recovery
   * untouched, so the answer of a request with tools costs little more than the lane.
   */
  private heldText(message: WireMessage<Kept>, text: string): string {
    this.writeSse()
    if (text !== '') this.release(message, this.recovery.feed(message.index, text))
    return this.takeFrames()
  }

  /** The open message when it is held and nothing else keeps its text from a lane (stop strings, log probabilities). */
  private heldLaneMessage(): WireMessage<Kept> | null {
    if (this.done || !this.started || this.stops !== null || this.options.logprobs === true) return null
    const open = this.stream.parser.openMessage()
    const message = open === null ? undefined : this.messages.get(open.index)
    return message?.held === true ? message : null
  }

  /** The last events: what the end of the stream flushes, and the format's closing events. */
  finish(options: FinishOptions = {}): Event[] {
    return this.objectsOf(() => this.finishInto(options, 'finish'))
  }

  /** `finish`, as SSE bytes. */
  finishSse(options: FinishOptions = {}): string {
    return this.sseOf(() => this.finishInto(options, 'finishSse'))
  }

  /**
   * `finish` in two steps, for a caller with something to do between the completion's end and the events that
   * announce it (a gateway keeping a response before telling the client it is kept): `settle` gives what the
   * end of the stream flushes (every message closed), `conclude` the format's closing events.
   */
  settle(options: FinishOptions = {}): Event[] {
    return this.objectsOf(() => this.settleInto(options, 'settle'))
  }

  /** `settle`, as SSE bytes. */
  settleSse(options: FinishOptions = {}): string {
    return this.sseOf(() => this.settleInto(options, 'settleSse'))
  }

  /** The closing events, after `settle` (nothing before it, or a second time). */
  conclude(): Event[] {
    return this.objectsOf(() => this.concludeInto())
  }

  /** `conclude`, as SSE bytes. */
  concludeSse(): string {
    return this.sseOf(() => this.concludeInto())
  }

  // ---- What a server asks of the format to stream it (http/sse.ts's pipeSse knows no format by name) ----

  /**
   * The events a format sends before the completion's first tokens (Responses' `start()`); none by default
   * (a format whose opening event carries the usage an engine step may report sends it with the first step).
   */
  openingEvents(): Event[] {
    return []
  }

  /** `openingEvents`, as SSE bytes. */
  openingSse(): string {
    return ''
  }

  /** Events of the object face as SSE bytes: what the SSE face writes for them. */
  objectFrames(events: readonly Event[]): string {
    return events.map((event) => this.frameOf(event)).join('')
  }

  /** Whether its SSE stream ends with `data: [DONE]` after the last event (Chat; Responses in Open Responses' dialect). */
  get endsWithDone(): boolean {
    return false
  }

  /** The SSE stream's last frame, after its closing events: `data: [DONE]` where the format has one, else ''. */
  doneSse(): string {
    return this.endsWithDone ? 'data: [DONE]\n\n' : ''
  }

  /**
   * The SSE bytes that end a stream that failed after it started, given the answer the failure would get before
   * it (`errorResponse` of harmony-stream/http). By default OpenAI's error object as a frame, which its clients raise.
   */
  failureSse(answer: OpenAIAnswer): string {
    return `data: ${JSON.stringify(answer.body)}\n\n`
  }

  /** The HTTP answer to a failure before the stream started, in the shape of the format's API (OpenAI's by default). */
  errorAnswer(answer: OpenAIAnswer): ErrorAnswer {
    return answer
  }

  /**
   * Abandons the completion (the client went away): releases the parser at once and builds no events.
   * `push` then throws; `finish` returns nothing.
   */
  close(): void {
    this.end()
    this.stream.close()
  }

  /** `close()`, under the name an abort handler looks for. */
  abort(): void {
    this.close()
  }

  /** A stop string ended the completion: nothing more is read (the caller may stop reading the engine). */
  get stopped(): boolean {
    return this.stoppedAt !== null
  }

  /** The next tool result's failure (what its `tool-failed` diagnostic said), or null: call once per result read. */
  protected nextToolFailure(): string | null {
    return this.toolFailures.get(this.toolResults++) ?? null
  }

  /** The stop string that ended the completion, or null. */
  protected get stopSequence(): string | null {
    return this.stoppedAt === null ? null : (this.stops?.matched ?? null)
  }

  /** Diagnostics of the parser and of the adapter (invalid tool arguments, dropped messages, …) so far. */
  get diagnostics(): AdapterDiagnostic[] {
    return [...this.stream.diagnostics, ...this.adapterDiagnostics]
  }

  /** Ends the completion where it stands (Responses' `error`): nothing more is read or written. */
  protected end(): void {
    this.done = true
    this.lane = null
    this.heldOpen = null
  }

  /** For a format's own calls (Responses' `start`): `build`'s events as objects. */
  protected objectsOf(build: () => void): Event[] {
    const events: Event[] = []
    this.sink = events
    build()
    return events
  }

  /** For a format's own calls: `build`'s events as SSE bytes. */
  protected sseOf(build: () => void): string {
    this.writeSse()
    build()
    return this.takeFrames()
  }

  /** One event: kept as an object, or written as its frame. */
  protected emit(event: Event): void {
    if (this.sink !== null) this.sink.push(event)
    else this.frames += this.frameOf(event)
  }

  /** Whether events are being written as SSE: a format may then write a frame itself (`write`) without the object. */
  protected get writesSse(): boolean {
    return this.sink === null
  }

  /** A frame the format wrote itself, byte for byte `frameOf` of the event it stands for (SSE face only). */
  protected write(frame: string): void {
    this.frames += frame
  }

  /** Events from now on are written as frames, from none (a call that threw left its frames unsent). */
  private writeSse(): void {
    this.sink = null
    this.frames = ''
  }

  private takeFrames(): string {
    const frames = this.frames
    this.frames = ''
    return frames
  }

  // ---- Usage, finish ----

  /** Tokens of the prompt: the format's option, else what the engine reported, else 0. */
  protected get promptTokens(): number {
    return (this.options as unknown as Record<string, number | undefined>)[this.format.promptTokensOption] ?? this.enginePromptTokens ?? 0
  }

  /** Tokens of the completion so far. */
  protected get completionTokens(): number {
    // The results of built-in tools were the gateway's input to the model, not its output.
    return this.stream.tokens - this.builtinResultTokens
  }

  /** How the completion ended (as it stands: `length` until a last message closes). */
  protected finishReason(): FinishReason {
    if (this.stoppedAt !== null) return 'stop'
    // A completion the model ended with <|endoftext|> before any message closed ended as at <|return|>
    // (MessageStream); one that ended inside a message closed it that way already.
    const terminator = this.lastTerminator === undefined && this.stream.endedAtEndOfText ? 'return' : this.lastTerminator
    return finishReasonOf(terminator, this.toolCalls, this.truncated, this.recoveredCalls)
  }

  // ---- Reading ----

  /** Token ids or text from what was pushed; an engine step's finish reason and usage are kept. */
  private read(input: unknown, method: string): TokenIds | string {
    if (input instanceof Uint32Array || typeof input === 'string' || Array.isArray(input)) return input
    const step: EngineStepInput | null = engineStepOf(input, `${this.format.name}.${method}`)
    if (step === null) return input as TokenIds
    if (step.finishReason !== undefined) this.engineFinish = step.finishReason
    if (step.usage !== undefined) {
      this.enginePromptTokens = step.usage.promptTokens
      if (step.usage.cachedPromptTokens !== undefined) this.cachedPromptTokens = step.usage.cachedPromptTokens
    }
    if (step.diagnostics !== undefined) {
      for (const diagnostic of step.diagnostics) {
        const { code, message } = diagnostic
        this.adapterDiagnostics.push({ code, message, tokenOffset: this.stream.tokens })
        const { result } = diagnostic as { result?: unknown }
        if (code === 'tool-failed' && typeof result === 'number') this.toolFailures.set(result, message)
      }
    }
    if (this.options.logprobs === true) this.stepLogprobs = step.logprobs ?? null
    return step.tokens
  }

  private pushInto(input: AdapterInput, method: string): void {
    this.lane = null
    this.heldOpen = null
    if (this.done) throw new HarmonyStateError('adapter-finished', `push() after ${this.format.finished}`)
    this.stepLogprobs = null
    const read = this.read(input, method)
    this.opening()
    if (this.options.logprobs !== true || typeof read === 'string') this.handle(this.stream.pushInput(read))
    else this.pushWithLogprobs(read)
  }

  /**
   * One id at a time, so that each answer token's log probability goes out with the text it makes: after an
   * id is read (before its events are handled), an ordinary id inside an open answer message is an answer
   * token; the message was opened by an earlier id (`<|message|>`), so its route is known by then.
   */
  private pushWithLogprobs(read: TokenIds): void {
    const logprobs = this.stepLogprobs
    for (let i = 0; i < read.length; i++) {
      const id = read[i]!
      const events = this.stream.pushInput(read.slice(i, i + 1))
      const open = id < FIRST_SPECIAL ? this.stream.parser.openMessage() : null
      if (open !== null && this.messages.get(open.index)?.route === 'content') this.answerLogprobs!.read(id, logprobs, i)
      this.handle(events)
    }
  }

  /** The log probabilities of the answer text being delivered (null without the `logprobs` option). */
  protected takeLogprobs(): OutputLogprob[] | null {
    return this.answerLogprobs?.take() ?? null
  }

  private finishInto(options: FinishOptions, method: string): void {
    this.settleInto(options, method)
    this.concludeInto()
  }

  /** The format's closing events, once, after the end was settled. */
  private concludeInto(): void {
    if (!this.settled || this.concluded) return
    this.concluded = true
    this.closing(this.finishReason())
  }

  private settleInto(options: FinishOptions, method: string): void {
    checkOptions(options, FINISH_OPTIONS, `${this.format.name}.${method}`)
    this.lane = null
    this.heldOpen = null
    if (this.done) return
    this.done = true
    this.settled = true
    // An explicit `truncated` wins over what the engine said.
    this.truncated = options.truncated ?? this.engineFinish === 'length'
    this.opening()
    this.handle(this.stream.finish())
    const missing = this.answerLogprobs?.missingDiagnostic(this.stream.tokens) ?? null
    if (missing !== null) this.adapterDiagnostics.push(missing)
  }

  /** The message stream's events, in order, to the format's hooks. */
  private handle(events: MessageEvent[]): void {
    for (const event of events) {
      if (this.stoppedAt !== null) {
        // After a stop string only the close of the message it was found in counts, with the text up to it.
        if (event.kind === 'close' && event.index === this.stoppedAt.index) {
          this.closeMessage({ ...event, message: { ...event.message, content: this.stoppedAt.text } })
        }
        continue
      }
      if (event.kind === 'open') {
        const message = this.messageOf(event.opened.messageIndex, event.opened)
        if (!message.held) this.opened(message)
      } else if (event.kind === 'text') {
        const { segment } = event
        const message = this.messageOf(segment.messageIndex, segment)
        if (message.held) this.release(message, this.recovery.feed(message.index, segment.text))
        else if (message.route !== 'ignore') this.deliver(message, segment.text)
      } else this.closeMessage(event)
    }
  }

  /** A message on first sight (its open, or its text or close when the header was never reported): routed once. */
  private messageOf(index: number, header: RouteFields): WireMessage<Kept> {
    let message = this.messages.get(index)
    if (message === undefined) {
      const route = routeOf(header, this.options, this.namespaces)
      const tool = route === 'tool'
      const namespace = tool ? namespaceOf(header.recipient!) : null
      message = {
        index,
        route,
        held: route === 'content' && this.recovery.applies(index, header),
        toolName: tool ? toolName(header.recipient!) : null,
        toolNamespace: namespace !== null && this.namespaces.has(namespace) ? namespace : null,
        toolIndex: tool ? this.toolCalls++ : -1,
        builtin:
          route !== 'builtin'
            ? null
            : header.role === 'assistant'
              ? { tool: header.recipient!, result: false }
              : { tool: header.name ?? header.role, result: true },
        kept: null,
      }
      this.messages.set(index, message)
    }
    return message
  }

  /** Text of a message to the format; the answer's text through the stop strings, when there are any. */
  private deliver(message: WireMessage<Kept>, text: string): void {
    if (this.stops === null || message.route !== 'content') {
      this.text(message, text)
      return
    }
    const { text: released, stopped } = this.stops.feed(text)
    if (released !== '') this.text(message, released)
    this.answerText += released
    if (stopped) {
      this.stoppedAt = { index: message.index, text: this.answerText }
      this.stream.stopReading()
    }
  }

  private closeMessage(event: CloseEvent): void {
    const message = this.messageOf(event.index, event.message)
    if (message.held) this.release(message, this.recovery.end(message.index))
    if (this.stops !== null && message.route === 'content' && this.stoppedAt === null) {
      // The answer's message ended without a stop string: what was held back is its end.
      const rest = this.stops.flush()
      if (rest !== '') this.text(message, rest)
      this.answerText = ''
    }
    // Log probabilities of tokens whose text never came (a character cut by the end): with an empty delta.
    if (this.answerLogprobs?.waiting === true && message.route === 'content') this.text(message, '')
    this.messages.delete(event.index)
    this.lastTerminator = event.message.terminator
    if (message.route === 'reasoning') this.reasoningTokens += event.tokens
    else if (message.builtin?.result === true) this.builtinResultTokens += event.tokens
    else if (message.route === 'ignore') this.adapterDiagnostics.push(droppedDiagnostic(event.message, this.stream.tokens))
    if (message.route === 'tool') event = this.closeArguments(message, event)
    this.closed(message, event)
    if (message.route === 'tool') this.checkArguments(message, event.message)
    else if (this.options.responseFormat !== undefined && event.message.channel === 'final') this.checkAnswer(event.message)
  }

  /**
   * A call whose JSON arguments the model ended short of their closing brackets, and did not stop for the
   * length limit (a cut call is no call the model finished): the brackets go out as the arguments' last
   * delta, and the call closes with them, said by a `closed-tool-arguments` diagnostic.
   */
  private closeArguments(message: WireMessage<Kept>, event: CloseEvent): CloseEvent {
    const { content, contentType, terminator } = event.message
    if ((terminator === null && this.truncated) || (contentType != null && !contentType.includes('json'))) return event
    const closers = missingClosers(content)
    if (closers === null) return event
    // A call announced only at its close (recovered at the end) takes its arguments from the close alone.
    if (message.kept !== null) this.text(message, closers)
    this.adapterDiagnostics.push({
      code: 'closed-tool-arguments',
      message: `the arguments of tool call ${message.toolName} ended without their closing brackets; ${closers} added`,
      tokenOffset: this.stream.tokens,
      text: closers,
      toolCallId: this.callIdOf(message),
    })
    return { ...event, message: { ...event.message, content: content + closers } }
  }

  /** A final answer that is not the JSON the response format asks for: a diagnostic says so. */
  private checkAnswer(closed: HarmonyMessage): void {
    const diagnostic = structuredOutputDiagnostic(closed.content, this.options.responseFormat!, this.stream.tokens)
    if (diagnostic !== null) this.adapterDiagnostics.push(diagnostic)
  }

  /** Tool arguments that are not JSON, or not what a strict tool's schema says, were streamed as they are: a diagnostic says so. */
  private checkArguments(message: WireMessage<Kept>, closed: HarmonyMessage): void {
    const call = { name: message.toolName!, id: this.callIdOf(message), arguments: closed.content, contentType: closed.contentType }
    const diagnostic =
      toolArgumentsDiagnostic(call, this.stream.tokens) ?? strictArgumentsDiagnostic(call, this.options.argumentSchemas, this.stream.tokens)
    if (diagnostic !== null) this.adapterDiagnostics.push(diagnostic)
  }

  /** What text-call recovery released: text, or calls (each the next tool call). */
  private release(message: WireMessage<Kept>, outputs: HeldOutput[]): void {
    for (const output of outputs) {
      if (this.stoppedAt !== null) return
      if ('text' in output) {
        this.deliver(message, output.text)
        continue
      }
      const id = this.recovered(message, output.call, this.toolCalls++, this.recoveredCalls++)
      this.adapterDiagnostics.push(recoveredDiagnostic(output.call, id, this.stream.tokens))
    }
  }

  // ---- The lane (SsePool's hooks, and pushSse's own fast lane) ----

  /** The frame every text delta of the open message gets now, or null when there is no such frame. */
  private laneFrame(): FrameTemplate | null {
    // With stop strings every text goes through `deliver`, and with log probabilities each token's text goes
    // with its own: no lane writes text past them.
    if (this.done || !this.started || this.stops !== null || this.options.logprobs === true) return null
    const open = this.stream.parser.openMessage()
    const message = open === null ? undefined : this.messages.get(open.index)
    if (message === undefined || message.held) return null
    return message.route === 'ignore' ? SILENT_FRAME : this.textFrame(message)
  }

  /** @internal `SsePool`: the backend stream under this adapter's parser. */
  laneStream(): BackendStream | null {
    return this.done ? null : this.stream.parser.laneStream()
  }

  /**
   * @internal `SsePool`: runs the adapter's parser on the pool's implementation when it can (made without one,
   * nothing fed yet); false if it runs on the other and cannot move.
   */
  laneOn(implementation: Implementation): boolean {
    return !this.done && this.stream.moveTo(implementation)
  }

  /** @internal `SsePool`: whether the lane may take steps that write nothing. */
  laneReady(): boolean {
    return !this.done && !this.owesOpening()
  }

  /** @internal `SsePool`: whether a message is being read. */
  readsMessage(): boolean {
    return this.stream.parser.openMessage() !== null
  }

  /** @internal `SsePool`: the frame every text delta of the open message gets from `pushSse` now. */
  laneTemplate(): LaneTemplate | null {
    const template = this.laneFrame()
    return template === null ? null : { template, counter: this.counter }
  }

  /** @internal `SsePool`: what the fast lane sent of the open message (its frames used counters up to `counter`). */
  absorbLane(progress: LaneProgress): void {
    this.stream.absorbLane(progress.text, progress.tokens)
    // Frames were written only for text; without text the counter says nothing.
    if (progress.text !== '') this.counter = progress.counter
  }
}
