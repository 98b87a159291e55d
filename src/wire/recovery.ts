/**
 * The adapters' side of tool calls written as text: which messages are read for them (the answer and the
 * preambles of a request that declared tools), one holder per such message, and the diagnostic each recovered
 * call leaves.
 *
 * On by default where tools are declared: an agent whose model wrote its call as text otherwise gets prose and
 * loops. Off by default when the request asks for log probabilities (a recovered call would take its tokens'
 * log probabilities with it) or for structured output (a JSON answer would be held until it could no longer be a
 * call, and such an answer is JSON by request).
 */
import type { HarmonyDiagnostic } from '../base/types'
import type { RouteFields } from './routing'
import {
  type DeclaredTool,
  declaredTools,
  type HeldOutput,
  PreambleCallHolder,
  type RecoveredCall,
  TextCallHolder,
} from './text-tool-calls'

interface RecoveryOptions {
  textToolCalls?: 'off' | 'recover'
  tools?: readonly unknown[] | null
  logprobs?: boolean
  responseFormat?: object
}

/** `textToolCalls` as given, or its default for these options. */
function textToolCallsMode(options: RecoveryOptions): 'off' | 'recover' {
  if (options.textToolCalls !== undefined) return options.textToolCalls
  return options.logprobs === true || options.responseFormat !== undefined ? 'off' : 'recover'
}

export class TextCallRecovery {
  private readonly declared: Map<string, DeclaredTool>
  private readonly enabled: boolean
  private readonly holders = new Map<number, TextCallHolder | PreambleCallHolder>()
  /** The messages that are preambles (read for arguments alone), by index, until their first text. */
  private readonly preambles = new Set<number>()

  constructor(options: RecoveryOptions, toolNames: readonly string[]) {
    this.declared = declaredTools(options.tools, toolNames)
    this.enabled = textToolCallsMode(options) === 'recover' && this.declared.size > 0
  }

  /** Whether content message `index` is read for calls: the answer (any channel but commentary), and preambles. */
  applies(index: number, header: RouteFields): boolean {
    if (!this.enabled) return false
    if (header.channel === 'commentary') this.preambles.add(index)
    return true
  }

  holds(index: number): boolean {
    return this.holders.has(index)
  }

  feed(index: number, text: string): HeldOutput[] {
    let holder = this.holders.get(index)
    if (holder === undefined) {
      holder = this.preambles.delete(index) ? new PreambleCallHolder(this.declared) : new TextCallHolder(this.declared)
      this.holders.set(index, holder)
    }
    return holder.feed(text)
  }

  /** The message ended: everything still held, and the holder is forgotten. */
  end(index: number): HeldOutput[] {
    const holder = this.holders.get(index)
    this.holders.delete(index)
    this.preambles.delete(index)
    return holder === undefined ? [] : holder.end()
  }
}

export function recoveredDiagnostic(
  call: RecoveredCall,
  toolCallId: string,
  tokenOffset: number,
): HarmonyDiagnostic & { toolCallId: string } {
  return {
    code: 'text-tool-call',
    message: `the model wrote a call of ${call.name} as text, not addressed to the tool; sent as a tool call`,
    tokenOffset,
    text: call.source,
    toolCallId,
  }
}
