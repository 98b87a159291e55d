/**
 * Chat Completions: parser output → `chat.completion.chunk` objects (streaming) or one `chat.completion`; a
 * wire format on the adapter base (`adapter.ts`), which routes, reads and finishes.
 *
 * Mapping (see `routing.ts`): analysis → `reasoning_content` (and/or `reasoning`, option `reasoningField`);
 * final → `content`; a preamble (commentary, no recipient) → `content` by default; recipient `functions.X`,
 * on any channel → `tool_calls` (index, id, type and name on the call's first delta, then argument deltas).
 * `finish_reason`: `tool_calls` after `<|call|>`, `stop` after `<|return|>`/`<|end|>`, `length` when the
 * stream ends without a stop token. Tool arguments are checked as JSON when the call closes; invalid JSON has
 * already been streamed raw and gets a diagnostic, never an error.
 */

import { FRAME_TEXT, type FrameTemplate, writeFrame } from '../backend/frames'
import { type AdapterDiagnostic, type AdapterOptions, nowSeconds, WireAdapter, type WireFormat, type WireMessage } from './adapter'
import type { FinishOptions, FinishReason } from './finish'
import type { AdapterInput } from './input'
import { SILENT_FRAME } from './lane'
import type { OutputLogprob } from './logprobs'
import type { MessageEvent } from './message-stream'
import { CHAT_OPTIONS, wholeOptions } from './options'
import type { RecoveredCall } from './text-tool-calls'
import { wholeAnswer } from './whole-answer'

export interface ChatAdapterOptions extends AdapterOptions {
  /** `model` of every chunk. */
  model: string
  /** Completion id (`chatcmpl-…`); tool call ids derive from it. Default: a random one. */
  id?: string
  /** Unix seconds. Default: now. */
  created?: number
  /** Field for reasoning text: `reasoning_content` (default, as DeepSeek and SGLang), `reasoning` (vLLM), or both. */
  reasoningField?: 'reasoning_content' | 'reasoning' | 'both'
  /** Prompt tokens, for `usage`. Default: what an engine step's `usage` reported, else 0. */
  promptTokens?: number
  /** Emit a final chunk with `usage` (as `stream_options.include_usage` asks). Default false. */
  includeUsage?: boolean
  /**
   * The choice this completion is, of several generated for one request (`n`): every chunk's and the
   * completion's `choices[0].index`, and its tool call ids are its own (`call_<stem>_<choice>_<k>`; choice 0's
   * are `call_<stem>_<k>`), so that choices sharing one `id` never share a call id. Default 0.
   */
  choiceIndex?: number
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

export interface ChatUsage {
  prompt_tokens: number
  completion_tokens: number
  total_tokens: number
  /** `cached_tokens`: prompt tokens the engine took from its prefix cache (0 when it did not say). */
  prompt_tokens_details: { cached_tokens: number }
  completion_tokens_details: { reasoning_tokens: number }
}

export interface ChatCompletionChunk {
  id: string
  object: 'chat.completion.chunk'
  created: number
  model: string
  choices: { index: number; delta: ChatDelta; finish_reason: FinishReason | null; logprobs: ChatLogprobs | null }[]
  usage?: ChatUsage | null
}

/** With the `logprobs` option: the log probabilities of the content's tokens (a chunk's, or the whole completion's). */
export interface ChatLogprobs {
  content: OutputLogprob[]
  refusal: null
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
    index: number
    message: { role: 'assistant'; content: string | null; reasoning_content?: string; reasoning?: string; tool_calls?: ChatToolCall[] }
    finish_reason: FinishReason
    logprobs: ChatLogprobs | null
  }[]
  usage: ChatUsage
}

const CHAT: WireFormat = {
  name: 'ChatCompletionsStream',
  options: CHAT_OPTIONS,
  idPrefix: 'chatcmpl-',
  promptTokensOption: 'promptTokens',
  finished: 'finish() or close(): create a new adapter for a new completion',
}

const CHAT_WHOLE_OPTIONS = wholeOptions(CHAT_OPTIONS)

/** What Chat keeps of a tool call once it is announced (id and name sent): the frame of its argument deltas, made on first use. */
interface AnnouncedCall {
  frame: FrameTemplate | null
}

/**
 * Streaming Chat Completions for one completion: feed it tokens (or engine steps), send the chunks it
 * returns. Two faces of one mapping: `push`/`finish` return chunk objects; `pushSse`/`finishSse` return the
 * SSE bytes of the same chunks (`data: JSON\n\n` each) as one string, text deltas written from per-stream
 * templates without chunk objects.
 */
export class ChatCompletionsStream extends WireAdapter<ChatCompletionChunk, AnnouncedCall, ChatAdapterOptions> {
  readonly created: number
  /** `choices[].index` of everything it writes (option `choiceIndex`). */
  private readonly choiceIndex: number
  /** The fields reasoning text goes in, in order (option `reasoningField`); every face uses these. */
  private readonly reasoningFields: readonly ('reasoning_content' | 'reasoning')[]
  /** `data: {"id":…,"choices":[{"index":I,"delta":`: every frame's start, made once. */
  private frameHead: string | null = null
  /** The frames of content and reasoning deltas, made once (`deltaFrame`). */
  private contentFrame: FrameTemplate | null = null
  private reasoningFrame: FrameTemplate | null = null
  /** The completion as one message, assembled as it streams (`completion()`, for `chatCompletion`). */
  private readonly content: string[] = []
  private readonly reasoning: string[] = []
  private readonly calls: ChatToolCall[] = []
  /** With the `logprobs` option: every content token's, for `completion()`. */
  private readonly logprobs: OutputLogprob[] = []

  constructor(options: ChatAdapterOptions) {
    super(options, CHAT)
    this.created = options.created ?? nowSeconds()
    this.choiceIndex = options.choiceIndex ?? 0
    const field = options.reasoningField ?? 'reasoning_content'
    this.reasoningFields = field === 'both' ? ['reasoning_content', 'reasoning'] : [field]
  }

  /** Chat's SSE stream ends with `data: [DONE]`, as OpenAI's does. */
  get endsWithDone(): boolean {
    return true
  }

  usage(): ChatUsage {
    const prompt = this.promptTokens
    const completion = this.completionTokens
    return {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
      prompt_tokens_details: { cached_tokens: this.cachedPromptTokens },
      completion_tokens_details: { reasoning_tokens: this.reasoningTokens },
    }
  }

  /** @internal `chatCompletion`: the completion as one `chat.completion` (whole after `finish()`). */
  completion(): ChatCompletion {
    const message: ChatCompletion['choices'][0]['message'] = {
      role: 'assistant',
      content: this.content.length > 0 ? this.content.join('') : null,
    }
    if (this.reasoning.length > 0) {
      const reasoning = this.reasoning.join('')
      for (const field of this.reasoningFields) message[field] = reasoning
    }
    if (this.calls.length > 0) message.tool_calls = this.calls
    return {
      id: this.id,
      object: 'chat.completion',
      created: this.created,
      model: this.options.model,
      choices: [
        {
          index: this.choiceIndex,
          message,
          finish_reason: this.finishReason(),
          logprobs: this.options.logprobs === true ? { content: this.logprobs, refusal: null } : null,
        },
      ],
      usage: this.usage(),
    }
  }

  protected frameOf(chunk: ChatCompletionChunk): string {
    return `data: ${JSON.stringify(chunk)}\n\n`
  }

  protected opened(message: WireMessage<AnnouncedCall>): void {
    // The model chose a tool: announce the call (id, type, name) now, arguments follow as they come.
    if (message.route === 'tool') this.emitDelta({ tool_calls: [this.toolDelta(message, '')] })
  }

  protected text(message: WireMessage<AnnouncedCall>, text: string): void {
    if (message.route === 'reasoning') this.emitText('reasoning', text)
    else if (message.route === 'content') {
      // Held text arrives as released; the rest of the content is taken whole at the message's close.
      if (message.held) this.content.push(text)
      const logprobs = this.takeLogprobs()
      if (logprobs === null) this.emitText('content', text)
      else {
        for (const entry of logprobs) this.logprobs.push(entry)
        this.emitDelta({ content: text }, null, { content: logprobs, refusal: null })
      }
    } else if (message.route === 'tool') this.emitArguments(message, text)
    // `builtin`: the gateway's own tool work is not part of a chat completion.
  }

  protected recovered(_message: WireMessage<AnnouncedCall>, call: RecoveredCall, toolIndex: number): string {
    const id = this.toolCallId(toolIndex)
    // Announced whole in one delta.
    this.emitDelta({ tool_calls: [{ index: toolIndex, id, type: 'function', function: { name: call.name, arguments: call.arguments } }] })
    this.calls.push({ id, type: 'function', function: { name: call.name, arguments: call.arguments } })
    return id
  }

  protected closed(message: WireMessage<AnnouncedCall>, close: Extract<MessageEvent, { kind: 'close' }>): void {
    const { content } = close.message
    if (message.route === 'tool') {
      // A call whose header was never reported (recovered at the end of the stream) is announced at its close.
      if (message.kept === null) this.emitDelta({ tool_calls: [this.toolDelta(message, '')] })
      this.calls.push({ id: this.callIdOf(message), type: 'function', function: { name: message.toolName!, arguments: content } })
    } else if (message.route === 'content' && !message.held) this.content.push(content)
    else if (message.route === 'reasoning') this.reasoning.push(content)
  }

  protected callIdOf(message: WireMessage<AnnouncedCall>): string {
    return this.toolCallId(message.toolIndex)
  }

  protected closing(reason: FinishReason): void {
    if (!this.started) this.emitDelta({ role: 'assistant', content: '' })
    this.emitDelta({}, reason)
    if (this.options.includeUsage) this.emit({ ...this.chunkOf({}, null), choices: [], usage: this.usage() })
  }

  protected textFrame(message: WireMessage<AnnouncedCall>): FrameTemplate | null {
    if (message.route === 'reasoning') return this.deltaFrame('reasoning')
    if (message.route === 'content') return this.deltaFrame('content')
    if (message.route === 'tool' && message.kept !== null) return this.argumentsFrame(message.kept, message.toolIndex)
    return message.route === 'builtin' ? SILENT_FRAME : null
  }

  private toolCallId(index: number): string {
    return this.choiceIndex === 0 ? `call_${this.idStem}_${index}` : `call_${this.idStem}_${this.choiceIndex}_${index}`
  }

  private chunkOf(delta: ChatDelta, finishReason: FinishReason | null, logprobs: ChatLogprobs | null = null): ChatCompletionChunk {
    return {
      id: this.id,
      object: 'chat.completion.chunk',
      created: this.created,
      model: this.options.model,
      choices: [{ index: this.choiceIndex, delta, finish_reason: finishReason, logprobs }],
    }
  }

  /** One chunk around `delta`; the first gets the role. Its SSE frame is written without the chunk object. */
  private emitDelta(delta: ChatDelta, finishReason: FinishReason | null = null, logprobs: ChatLogprobs | null = null): void {
    if (!this.started) {
      this.started = true
      delta = { role: 'assistant', ...delta }
    }
    if (!this.writesSse) {
      this.emit(this.chunkOf(delta, finishReason, logprobs))
      return
    }
    // Byte for byte `frameOf(chunkOf(delta, finishReason, logprobs))`.
    this.write(
      `${this.head()}${JSON.stringify(delta)},"finish_reason":${finishReason === null ? 'null' : JSON.stringify(finishReason)},"logprobs":${logprobs === null ? 'null' : JSON.stringify(logprobs)}}]}\n\n`,
    )
  }

  /** A text delta (the hot path of slow steps): as `emitDelta({ [field]: text })`, without the delta object when writing SSE. */
  private emitText(field: 'content' | 'reasoning', text: string): void {
    if (!this.writesSse || !this.started) {
      this.emitDelta(field === 'content' ? { content: text } : this.reasoningDelta(text))
      return
    }
    this.write(writeFrame(this.deltaFrame(field), text, 0))
  }

  /** An argument delta of a call: as `emitDelta`, from the call's frame once it is announced. */
  private emitArguments(message: WireMessage<AnnouncedCall>, text: string): void {
    if (!this.writesSse || message.kept === null || !this.started) {
      this.emitDelta({ tool_calls: [this.toolDelta(message, text)] })
      return
    }
    this.write(writeFrame(this.argumentsFrame(message.kept, message.toolIndex), text, 0))
  }

  /** A call's delta: the first announces it (id, type, name), the others carry arguments only. */
  private toolDelta(message: WireMessage<AnnouncedCall>, text: string): ChatToolCallDelta {
    const index = message.toolIndex
    if (message.kept !== null) return { index, function: { arguments: text } }
    message.kept = { frame: null }
    return { index, id: this.toolCallId(index), type: 'function', function: { name: message.toolName!, arguments: text } }
  }

  private reasoningDelta(text: string): ChatDelta {
    const delta: ChatDelta = {}
    for (const field of this.reasoningFields) delta[field] = text
    return delta
  }

  /** The frame of a content or reasoning delta once the first chunk went out: `emitDelta`'s bytes around the text. */
  private deltaFrame(field: 'content' | 'reasoning'): FrameTemplate {
    if (field === 'content') return (this.contentFrame ??= this.chunkFrame(['{"content":', '}'], [FRAME_TEXT]))
    const names = this.reasoningFields
    // One field, or both with the text twice: {"reasoning_content":T,"reasoning":T}.
    this.reasoningFrame ??= this.chunkFrame(
      [`{"${names[0]}":`, ...names.slice(1).map((name) => `,"${name}":`), '}'],
      names.map(() => FRAME_TEXT),
    )
    return this.reasoningFrame
  }

  /** The frame of an argument delta of an announced call. */
  private argumentsFrame(call: AnnouncedCall, index: number): FrameTemplate {
    call.frame ??= this.chunkFrame([`{"tool_calls":[{"index":${index},"function":{"arguments":`, '}}]}'], [FRAME_TEXT])
    return call.frame
  }

  /** A chunk's frame around a delta whose JSON is `delta` (literals and slots of the delta object alone). */
  private chunkFrame(delta: string[], slots: number[]): FrameTemplate {
    const literals = [this.head() + delta[0], ...delta.slice(1)]
    literals[literals.length - 1] += ',"finish_reason":null,"logprobs":null}]}\n\n'
    return { literals, slots }
  }

  private head(): string {
    this.frameHead ??= `data: {"id":${JSON.stringify(this.id)},"object":"chat.completion.chunk","created":${JSON.stringify(this.created)},"model":${JSON.stringify(this.options.model)},"choices":[{"index":${this.choiceIndex},"delta":`
    return this.frameHead
  }
}

/**
 * Non-streaming Chat Completions: a whole completion (its token ids, its text for `input: 'text'`, or one
 * engine step holding all of it, as `collectSteps` of `harmony-stream/engines` gives) → one `chat.completion`
 * (the streamed one, whole).
 */
export function chatCompletion(
  completion: AdapterInput,
  options: ChatAdapterOptions & FinishOptions,
): ChatCompletion & { diagnostics: AdapterDiagnostic[] } {
  return wholeAnswer(
    'chatCompletion',
    CHAT_WHOLE_OPTIONS,
    completion,
    options,
    (streamOptions) => new ChatCompletionsStream(streamOptions),
    (chat) => chat.completion(),
  )
}

/**
 * Usage over several choices of one request (`n`), as OpenAI counts it and vLLM does
 * (vllm/entrypoints/openai/chat_completion/serving.py, `chat_completion_stream_generator`: `prompt_tokens`
 * once, `completion_tokens` the sum over the choices): the prompt is one, read once; what each choice generated
 * is added. Its cached tokens are the first choice's (the prompt's, once).
 */
function summedUsage(usages: readonly ChatUsage[]): ChatUsage {
  const first = usages[0]!
  let completion = 0
  let reasoning = 0
  for (const usage of usages) {
    completion += usage.completion_tokens
    reasoning += usage.completion_tokens_details.reasoning_tokens
  }
  return {
    prompt_tokens: first.prompt_tokens,
    completion_tokens: completion,
    total_tokens: first.prompt_tokens + completion,
    prompt_tokens_details: { cached_tokens: first.prompt_tokens_details.cached_tokens },
    completion_tokens_details: { reasoning_tokens: reasoning },
  }
}

/**
 * Several choices of one request (`n`, each the `chat.completion` of its own adapter, option `choiceIndex`) as
 * the one `chat.completion` OpenAI answers: every choice, in index order, under the first's id and time; usage
 * summed (`summedUsage`).
 */
export function chatChoices(completions: readonly ChatCompletion[]): ChatCompletion {
  if (completions.length === 0) throw new TypeError('chatChoices: no completions')
  const choices = completions.flatMap((completion) => completion.choices).sort((a, b) => a.index - b.index)
  return { ...completions[0]!, choices, usage: summedUsage(completions.map((completion) => completion.usage)) }
}

/**
 * The usage chunk of a stream of several choices (`n`, with `stream_options.include_usage`): one, after every
 * choice's last chunk, `choices` empty, usage summed over the choices' adapters (`summedUsage`); each adapter
 * then writes none of its own (`includeUsage` false).
 */
export function chatUsageChunk(adapters: readonly ChatCompletionsStream[]): ChatCompletionChunk {
  const first = adapters[0]
  if (first === undefined) throw new TypeError('chatUsageChunk: no adapters')
  return {
    id: first.id,
    object: 'chat.completion.chunk',
    created: first.created,
    model: first.options.model,
    choices: [],
    usage: summedUsage(adapters.map((adapter) => adapter.usage())),
  }
}
