/**
 * The adapters' side of tool calls written as text: which messages are read for them (final text of a
 * request that declared tools, with `textToolCalls: 'recover'`), one holder per such message, and the
 * diagnostic each recovered call leaves.
 */
import type { HarmonyDiagnostic } from '../base/types'
import type { RouteFields } from './routing'
import { type DeclaredTool, declaredTools, type HeldOutput, type RecoveredCall, TextCallHolder } from './text-tool-calls'

export class TextCallRecovery {
  private readonly declared: Map<string, DeclaredTool>
  private readonly enabled: boolean
  private readonly holders = new Map<number, TextCallHolder>()

  constructor(options: { textToolCalls?: 'off' | 'recover'; tools?: readonly unknown[] | null }, toolNames: readonly string[]) {
    this.declared = declaredTools(options.tools, toolNames)
    this.enabled = options.textToolCalls === 'recover' && this.declared.size > 0
  }

  /** Whether a content message is read for calls: final (or unknown) channel, never a commentary preamble. */
  applies(header: RouteFields): boolean {
    return this.enabled && header.channel !== 'commentary'
  }

  holds(index: number): boolean {
    return this.holders.has(index)
  }

  feed(index: number, text: string): HeldOutput[] {
    let holder = this.holders.get(index)
    if (holder === undefined) {
      holder = new TextCallHolder(this.declared)
      this.holders.set(index, holder)
    }
    return holder.feed(text)
  }

  /** The message ended: everything still held, and the holder is forgotten. */
  end(index: number): HeldOutput[] {
    const holder = this.holders.get(index)
    this.holders.delete(index)
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
    message: `the model wrote a call of ${call.name} as text in its final message; sent as a tool call`,
    tokenOffset,
    text: call.source,
    toolCallId,
  }
}
