/**
 * Anthropic's Messages API: parser output → its stream events or one `message`; a wire format on the adapter
 * base (`adapter.ts`), which routes, reads and finishes.
 *
 * Mapping (see `routing.ts`): analysis → a `thinking` block (its `signature` from the `signThinking` option,
 * sent as `signature_delta` just before the block's stop, as Anthropic sends it; `thinkingDisplay: 'omitted'`
 * sends the signature without the text); final and preambles → `text`
 * blocks; a call of an offered function → a `tool_use` block (its arguments in one `input_json_delta` when the
 * call closes, the JSON of its `input`: Anthropic's clients parse the deltas as JSON as they come). `stop_reason`: `tool_use` after `<|call|>`, `end_turn` after
 * `<|return|>`/`<|end|>`, `stop_sequence` at a stop string (with `stop_sequence` set), `max_tokens` when the
 * completion was cut. `usage`: `input_tokens` counts the prompt tokens the engine computed, and
 * `cache_read_input_tokens` those it took from its prefix cache (Anthropic's split).
 *
 * The event order follows Anthropic's streaming reference, and what its SDK's `MessageStream` needs of it:
 * `message_start` first (with usage), each block opened by `content_block_start` before its deltas, `message_delta`
 * with usage, then `message_stop`. Every SSE frame carries its `event:` line, which the SDK reads events by.
 */

import { FRAME_TEXT, type FrameTemplate, writeFrame } from '../backend/frames'
import type { OpenAIAnswer } from '../base/errors'
import { jsonObjectOf } from '../base/records'
import { type AdapterDiagnostic, type AdapterOptions, WireAdapter, type WireFormat, type WireMessage } from './adapter'
import type { FinishOptions, FinishReason } from './finish'
import type { AdapterInput } from './input'
import { SILENT_FRAME } from './lane'
import type { MessageEvent } from './message-stream'
import { MESSAGES_OPTIONS, wholeOptions } from './options'
import type { RecoveredCall } from './text-tool-calls'
import { wholeAnswer } from './whole-answer'

export interface MessagesAdapterOptions extends AdapterOptions {
  /** `model` of the message. */
  model: string
  /** The message's id (`msg_…`); tool_use ids derive from it. Default: a random one. */
  id?: string
  /** Prompt tokens, for `usage`. Default: what an engine step's `usage` reported, else 0. */
  inputTokens?: number
  /**
   * How the model's reasoning is shown: `'full'` (default) as `thinking` blocks with their text; `'omitted'`
   * as `thinking` blocks with an empty text and only their `signature` (Anthropic's `display: 'omitted'`); `'none'`:
   * no thinking blocks.
   */
  thinkingDisplay?: 'full' | 'omitted' | 'none'
  /** A thinking block's `signature`, from its text (a gateway seals the text in it). Default: an empty signature. */
  signThinking?: (thinking: string) => string
}

export type AnthropicStopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use'

export type AnthropicContentBlock =
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> }

export type AnthropicDelta =
  | { type: 'thinking_delta'; thinking: string }
  | { type: 'signature_delta'; signature: string }
  | { type: 'text_delta'; text: string }
  | { type: 'input_json_delta'; partial_json: string }

export interface AnthropicUsage {
  /** Prompt tokens the engine computed (those it took from its prefix cache are `cache_read_input_tokens`). */
  input_tokens: number
  output_tokens: number
  /** Always 0: engines fill their prefix caches without being asked. */
  cache_creation_input_tokens: number
  cache_read_input_tokens: number
}

export interface AnthropicMessage {
  id: string
  type: 'message'
  role: 'assistant'
  model: string
  content: AnthropicContentBlock[]
  stop_reason: AnthropicStopReason | null
  stop_sequence: string | null
  usage: AnthropicUsage
}

export type AnthropicEvent =
  | { type: 'message_start'; message: AnthropicMessage }
  | { type: 'ping' }
  | { type: 'content_block_start'; index: number; content_block: AnthropicContentBlock }
  | { type: 'content_block_delta'; index: number; delta: AnthropicDelta }
  | { type: 'content_block_stop'; index: number }
  | { type: 'message_delta'; delta: { stop_reason: AnthropicStopReason; stop_sequence: string | null }; usage: AnthropicUsage }
  | { type: 'message_stop' }
  | { type: 'error'; error: { type: string; message: string } }

const MESSAGES: WireFormat = {
  name: 'AnthropicMessagesStream',
  options: MESSAGES_OPTIONS,
  idPrefix: 'msg_',
  promptTokensOption: 'inputTokens',
  finished: 'finish() or close(): create a new adapter for a new message',
}

const MESSAGES_WHOLE_OPTIONS = wholeOptions(MESSAGES_OPTIONS)

/** A message's block: its place in `content`, and the frame of its deltas (made on first use). */
interface OpenBlock {
  index: number
  frame: FrameTemplate | null
}

/** The delta type of each kind of block, and the field its text goes in. */
const DELTA_OF = {
  thinking: ['thinking_delta', 'thinking'],
  text: ['text_delta', 'text'],
  tool_use: ['input_json_delta', 'partial_json'],
} as const

/**
 * Streaming Messages for one completion: feed it tokens (or engine steps), send the events it returns. Two faces
 * of one mapping: `push`/`finish` return event objects; `pushSse`/`finishSse` return their SSE bytes
 * (`event: TYPE\ndata: JSON\n\n` each), text deltas written from per-block templates without event objects.
 */
export class AnthropicMessagesStream extends WireAdapter<AnthropicEvent, OpenBlock, MessagesAdapterOptions> {
  /** The message as it grows: its blocks, in order (`message()`, for `anthropicMessage`). */
  private readonly content: AnthropicContentBlock[] = []

  constructor(options: MessagesAdapterOptions) {
    super(options, MESSAGES)
  }

  /** The usage so far (whole at the end): the prompt split into computed and cached tokens. */
  usage(): AnthropicUsage {
    const cached = Math.min(this.cachedPromptTokens, this.promptTokens)
    return {
      input_tokens: this.promptTokens - cached,
      output_tokens: this.completionTokens,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: cached,
    }
  }

  /** The message as it stands (whole after `finish()`): what `anthropicMessage` gives, and a gateway keeps. */
  message(): AnthropicMessage {
    return this.messageWith(this.content, this.settledReason())
  }

  /**
   * The event to send when the stream cannot go on (the engine failed mid-stream): Anthropic's `error` event.
   * Nothing more is read or written.
   */
  error(type: string, message: string): AnthropicEvent[] {
    this.end()
    return [{ type: 'error', error: { type, message } }]
  }

  /** A failure mid-stream: Anthropic's `error` event, with the type and message its HTTP answer would carry. */
  failureSse(answer: OpenAIAnswer): string {
    const { type, message } = anthropicAnswer(answer).body.error
    return this.objectFrames(this.error(type, message))
  }

  /** A failure before the stream: Anthropic's error answer (`anthropicAnswer`). */
  errorAnswer(answer: OpenAIAnswer): AnthropicErrorAnswer {
    return anthropicAnswer(answer)
  }

  protected frameOf(event: AnthropicEvent): string {
    return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`
  }

  protected opening(): void {
    if (this.started) return
    this.started = true
    this.emit({ type: 'message_start', message: this.messageWith([], null) })
    this.emit({ type: 'ping' })
  }

  protected owesOpening(): boolean {
    return !this.started
  }

  protected opened(message: WireMessage<OpenBlock>): void {
    if (message.route === 'tool')
      this.openBlock(message, { type: 'tool_use', id: this.callIdOf(message), name: message.toolName!, input: {} })
    else if (message.route === 'reasoning' && this.display !== 'none')
      this.openBlock(message, { type: 'thinking', thinking: '', signature: '' })
    else if (message.route === 'content') this.openBlock(message, { type: 'text', text: '' })
  }

  protected text(message: WireMessage<OpenBlock>, text: string): void {
    // A held text message opens with its first released text; dropped work and hidden thinking send nothing.
    if (message.kept === null) this.opened(message)
    const block = message.kept
    if (block === null || text === '') return
    const kept = this.content[block.index]!
    // Omitted thinking sends no text; a call's arguments go out whole at its close (see `closed`).
    if ((kept.type === 'thinking' && this.display === 'omitted') || kept.type === 'tool_use') return
    // A held message's text is what recovery released (its calls taken out), not its content at the close.
    if (message.held && kept.type === 'text') kept.text += text
    if (this.writesSse) {
      this.write(writeFrame(this.deltaFrame(block), text, 0))
      return
    }
    const [type, field] = DELTA_OF[kept.type]
    this.emit({ type: 'content_block_delta', index: block.index, delta: { type, [field]: text } as AnthropicDelta })
  }

  protected recovered(message: WireMessage<OpenBlock>, call: RecoveredCall, toolIndex: number): string {
    // The text block before the call ends there: text after it is a block of its own, after the call's.
    if (message.kept !== null) {
      this.closeBlock(message.kept.index, null)
      message.kept = null
    }
    const id = this.toolUseId(toolIndex)
    const index = this.content.length
    const input = argumentsObject(call.arguments)
    this.content.push({ type: 'tool_use', id, name: call.name, input })
    this.emit({ type: 'content_block_start', index, content_block: { type: 'tool_use', id, name: call.name, input: {} } })
    this.emit({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(input) } })
    this.emit({ type: 'content_block_stop', index })
    return id
  }

  protected closed(message: WireMessage<OpenBlock>, close: Extract<MessageEvent, { kind: 'close' }>): void {
    // A message whose header was never reported (a call recovered at the end of the stream) opens at its close.
    if (message.kept === null && !message.held) {
      this.opened(message)
      if (message.kept !== null && close.message.content !== '') this.text(message, close.message.content)
    }
    const block = message.kept
    if (block === null) return
    const kept = this.content[block.index]!
    if (kept.type === 'thinking') {
      kept.signature = this.options.signThinking?.(close.message.content) ?? ''
      if (this.display === 'full') kept.thinking = close.message.content
      this.emit({ type: 'content_block_delta', index: block.index, delta: { type: 'signature_delta', signature: kept.signature } })
    } else if (kept.type === 'tool_use') {
      // Anthropic's clients parse `input_json_delta` as it comes (the SDK's MessageStream throws on text that is
      // not JSON): the arguments go out once, whole, as the object `input` is (`{}` for arguments that are not
      // one, with the base's diagnostic).
      kept.input = argumentsObject(close.message.content)
      const partial_json = JSON.stringify(kept.input)
      this.emit({ type: 'content_block_delta', index: block.index, delta: { type: 'input_json_delta', partial_json } })
    }
    this.closeBlock(block.index, message.held ? null : close.message.content)
  }

  protected callIdOf(message: WireMessage<OpenBlock>): string {
    return this.toolUseId(message.toolIndex)
  }

  protected closing(reason: FinishReason): void {
    this.emit({
      type: 'message_delta',
      delta: { stop_reason: this.stopReasonOf(reason), stop_sequence: this.stopSequence },
      usage: this.usage(),
    })
    this.emit({ type: 'message_stop' })
  }

  protected textFrame(message: WireMessage<OpenBlock>): FrameTemplate | null {
    if (message.kept !== null)
      return (message.route === 'reasoning' && this.display === 'omitted') || message.route === 'tool'
        ? SILENT_FRAME
        : this.deltaFrame(message.kept)
    // Work that is not shown: hidden thinking, the gateway's own tools, dropped messages.
    return message.route === 'reasoning' || message.route === 'builtin' ? SILENT_FRAME : null
  }

  private get display(): 'full' | 'omitted' | 'none' {
    return this.options.thinkingDisplay ?? 'full'
  }

  private toolUseId(index: number): string {
    return `toolu_${this.idStem}_${index}`
  }

  private openBlock(message: WireMessage<OpenBlock>, block: AnthropicContentBlock): void {
    const index = this.content.length
    this.content.push(block)
    message.kept = { index, frame: null }
    this.emit({ type: 'content_block_start', index, content_block: { ...block } })
  }

  /** A block ends: a text block's whole text kept (`text`: null when it was kept as it was released), then its stop. */
  private closeBlock(index: number, text: string | null): void {
    const block = this.content[index]!
    if (block.type === 'text' && text !== null) block.text = text
    this.emit({ type: 'content_block_stop', index })
  }

  /** Stop reason and sequence of a message as it stands (null before the end). */
  private settledReason(): FinishReason | null {
    return this.done ? this.finishReason() : null
  }

  private stopReasonOf(reason: FinishReason): AnthropicStopReason {
    if (this.stopSequence !== null) return 'stop_sequence'
    return reason === 'tool_calls' ? 'tool_use' : reason === 'length' ? 'max_tokens' : 'end_turn'
  }

  private messageWith(content: AnthropicContentBlock[], reason: FinishReason | null): AnthropicMessage {
    return {
      id: this.id,
      type: 'message',
      role: 'assistant',
      model: this.options.model,
      content,
      stop_reason: reason === null ? null : this.stopReasonOf(reason),
      stop_sequence: reason === null ? null : this.stopSequence,
      usage: this.usage(),
    }
  }

  /** The frame of a block's deltas: `text`'s event, byte for byte, around the text. */
  private deltaFrame(block: OpenBlock): FrameTemplate {
    if (block.frame !== null) return block.frame
    const [type, field] = DELTA_OF[this.content[block.index]!.type]
    block.frame = {
      literals: [
        `event: content_block_delta\ndata: {"type":"content_block_delta","index":${block.index},"delta":{"type":"${type}","${field}":`,
        '}}\n\n',
      ],
      slots: [FRAME_TEXT],
    }
    return block.frame
  }
}

/** A call's arguments as `tool_use.input`: the JSON object they are, or `{}` (the base's diagnostic says why). */
function argumentsObject(text: string): Record<string, unknown> {
  return jsonObjectOf(text) ?? {}
}

/**
 * Non-streaming Messages: a whole completion (its token ids, its text for `input: 'text'`, or one engine step
 * holding all of it, as `collectSteps` of `harmony-stream/engines` gives) → one `message` (the streamed one, whole).
 */
export function anthropicMessage(
  completion: AdapterInput,
  options: MessagesAdapterOptions & FinishOptions,
): AnthropicMessage & { diagnostics: AdapterDiagnostic[] } {
  return wholeAnswer(
    'anthropicMessage',
    MESSAGES_WHOLE_OPTIONS,
    completion,
    options,
    (streamOptions) => new AnthropicMessagesStream(streamOptions),
    (stream) => stream.message(),
  )
}

/** Anthropic's error body. */
interface AnthropicErrorBody {
  type: 'error'
  error: { type: string; message: string }
}

/** An answer in Anthropic's error shape. */
interface AnthropicErrorAnswer {
  status: number
  body: AnthropicErrorBody
  headers?: Record<string, string>
}

/** Anthropic's error type for an HTTP status (its API reference's table of errors). */
function anthropicErrorType(status: number): string {
  const types: Record<number, string> = {
    400: 'invalid_request_error',
    401: 'authentication_error',
    402: 'billing_error',
    403: 'permission_error',
    404: 'not_found_error',
    413: 'request_too_large',
    429: 'rate_limit_error',
    504: 'timeout_error',
    529: 'overloaded_error',
  }
  return types[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error')
}

/**
 * The answer to an Anthropic Messages request for a failure whose OpenAI answer is `answer` (`errorResponse` of
 * harmony-stream/http): its status, message and headers in Anthropic's shape (`{ type: 'error', error: { type,
 * message } }`), which its clients raise typed errors from. The field the message names stays in the message. An
 * engine or store that cannot take the request now (503) is Anthropic's 529 `overloaded_error`, which its
 * clients retry as overload.
 */
export function anthropicAnswer(answer: OpenAIAnswer): AnthropicErrorAnswer {
  const { body, headers } = answer
  const status = answer.status === 503 ? 529 : answer.status
  return {
    status,
    body: { type: 'error', error: { type: anthropicErrorType(status), message: body.error.message } },
    ...(headers === undefined ? {} : { headers }),
  }
}
