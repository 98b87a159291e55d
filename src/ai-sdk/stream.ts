/**
 * The AI SDK's stream parts as a wire format: a third `WireAdapter` beside Chat Completions and Responses, so
 * that everything the adapters share (routing, tool names, stop strings, text-call recovery, structured-output
 * checks, finish reasons, token counts, diagnostics) is the same here. Each Harmony message becomes one block
 * of parts: analysis → `reasoning-start`/`-delta`/`-end`, the answer → `text-start`/`-delta`/`-end`, a tool
 * call → `tool-input-start`/`-delta`/`-end` (its arguments as they stream) then `tool-call`; the completion
 * ends with `finish` (usage, the finish reason unified and raw, the diagnostics as provider metadata).
 */
import type { LanguageModelV3FinishReason, LanguageModelV3StreamPart, LanguageModelV3Usage } from '@ai-sdk/provider'
import type { FrameTemplate } from '../backend/frames'
import { is, type OptionSpec } from '../base/options'
import { type AdapterOptions, WireAdapter, type WireFormat, type WireMessage } from '../wire/adapter'
import type { FinishReason } from '../wire/finish'
import type { MessageEvent } from '../wire/message-stream'
import { ADAPTER_OPTIONS } from '../wire/options'
import type { RecoveredCall } from '../wire/text-tool-calls'

export interface AiSdkStreamOptions extends AdapterOptions {
  /** Tokens of the prompt, for usage (default: what the engine reports, else 0). */
  promptTokens?: number
  /** The provider's name: the key of the diagnostics in `finish`'s provider metadata. Default `harmony`. */
  provider?: string
}

const FORMAT: WireFormat = {
  name: 'AiSdkStream',
  options: { ...ADAPTER_OPTIONS, promptTokens: is.integer(0), provider: is.nonEmptyString } satisfies OptionSpec,
  idPrefix: 'harmony-',
  promptTokensOption: 'promptTokens',
  finished: 'finish() or close(): create a new adapter for a new completion',
}

/** The AI SDK's finish reasons for the adapters' (`tool_calls` must be `tool-calls`: only then does the SDK run tools). */
const UNIFIED: Record<FinishReason, LanguageModelV3FinishReason['unified']> = {
  stop: 'stop',
  length: 'length',
  tool_calls: 'tool-calls',
}

/**
 * The AI SDK's stream parts of one completion: feed it engine steps (or ids), send the parts it returns. What it
 * keeps per message (`WireMessage.kept`) is the id of the message's block of parts once it started.
 */
export class AiSdkStream extends WireAdapter<LanguageModelV3StreamPart, string, AiSdkStreamOptions> {
  constructor(options: AiSdkStreamOptions) {
    super(options, FORMAT)
  }

  /** Tokens as the AI SDK counts them (after `finish`, the whole completion's). */
  usage(): LanguageModelV3Usage {
    const prompt = this.promptTokens
    const output = this.completionTokens
    return {
      inputTokens: { total: prompt, noCache: prompt - this.cachedPromptTokens, cacheRead: this.cachedPromptTokens, cacheWrite: undefined },
      outputTokens: { total: output, text: output - this.reasoningTokens, reasoning: this.reasoningTokens },
    }
  }

  protected frameOf(part: LanguageModelV3StreamPart): string {
    return `data: ${JSON.stringify(part)}\n\n`
  }

  protected opened(message: WireMessage<string>): void {
    this.start(message)
  }

  protected text(message: WireMessage<string>, text: string): void {
    if (message.route === 'ignore' || text === '') return
    // Held text (text-call recovery) opens its block with its first release.
    const id = message.kept ?? this.start(message)
    if (message.route === 'reasoning') this.emit({ type: 'reasoning-delta', id, delta: text })
    else if (message.route === 'content') this.emit({ type: 'text-delta', id, delta: text })
    else this.emit({ type: 'tool-input-delta', id, delta: text })
  }

  protected recovered(_message: WireMessage<string>, call: RecoveredCall, toolIndex: number): string {
    const id = this.toolCallId(toolIndex)
    this.emit({ type: 'tool-input-start', id, toolName: call.name })
    this.emit({ type: 'tool-input-delta', id, delta: call.arguments })
    this.emit({ type: 'tool-input-end', id })
    this.emit({ type: 'tool-call', toolCallId: id, toolName: call.name, input: call.arguments })
    return id
  }

  protected closed(message: WireMessage<string>, close: Extract<MessageEvent, { kind: 'close' }>): void {
    if (message.route === 'tool') {
      // A call whose header was never reported (recovered at the end of the stream) starts at its close.
      const id = message.kept ?? this.start(message)
      this.emit({ type: 'tool-input-end', id })
      this.emit({ type: 'tool-call', toolCallId: id, toolName: message.toolName!, input: close.message.content })
    } else if (message.kept !== null) {
      this.emit({ type: message.route === 'reasoning' ? 'reasoning-end' : 'text-end', id: message.kept })
    }
  }

  protected callIdOf(message: WireMessage<string>): string {
    return this.toolCallId(message.toolIndex)
  }

  protected closing(reason: FinishReason): void {
    const diagnostics = this.diagnostics.map((diagnostic) => ({ ...diagnostic }))
    this.emit({
      type: 'finish',
      usage: this.usage(),
      finishReason: { unified: UNIFIED[reason], raw: reason },
      providerMetadata: { [this.options.provider ?? 'harmony']: { diagnostics } },
    })
  }

  /** No fast lane: the SDK takes part objects, not frames. */
  protected textFrame(): FrameTemplate | null {
    return null
  }

  /** A message's block of parts begins; its id (a tool call's is the call's id). */
  private start(message: WireMessage<string>): string {
    if (message.route === 'ignore') return ''
    if (message.route === 'tool') {
      const id = this.callIdOf(message)
      this.emit({ type: 'tool-input-start', id, toolName: message.toolName! })
      message.kept = id
      return id
    }
    const id = `${this.idStem}-${message.index}`
    this.emit({ type: message.route === 'reasoning' ? 'reasoning-start' : 'text-start', id })
    message.kept = id
    return id
  }

  private toolCallId(index: number): string {
    return `call_${this.idStem}_${index}`
  }
}
