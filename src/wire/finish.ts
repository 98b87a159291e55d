/**
 * How a completion ended, the same for every wire format: Chat's `finish_reason`, and whether a Responses
 * response is `completed` or `incomplete` (incomplete exactly when the reason is `length`).
 */

export type FinishReason = 'stop' | 'length' | 'tool_calls'

/** How the engine ended the stream, when it knows more than the tokens show. */
export interface FinishOptions {
  /**
   * The engine stopped at its token limit (even right after a stop token): report `length`/`incomplete`.
   * Default: whether an engine step pushed said `finishReason: 'length'`.
   */
  truncated?: boolean
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
