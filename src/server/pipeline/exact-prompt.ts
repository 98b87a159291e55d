/**
 * A prompt made of the ids the engine already saw and generated, with only what is new rendered after them: the
 * token-exact continuation every API that carries a tool loop uses (Responses within a turn, the Chat id cache
 * and the APIs prepared as Chat), so that an engine's prefix cache serves the whole history.
 */
import { CALL, START } from '../../backend/tokens'
import type { RenderedPrompt } from '../../render/index'
import type { StoredResponse } from '../stores/store'

/**
 * The prompt made of `ids` (what the engine saw and generated for a turn that ended with a tool call) and the
 * tokens a re-render has after them, checked as responses/conversation.ts `exactContinuation` says; null where the check fails.
 * `rendered`: the re-render of the whole request; `renderWithout`: of the request without what follows the
 * call (it ends with `<|start|>assistant` where the new messages begin).
 */
export async function exactPrompt(
  ids: Pick<StoredResponse, 'promptTokens' | 'outputTokens' | 'renderedPromptTokens'>,
  rendered: RenderedPrompt,
  renderWithout: () => RenderedPrompt | Promise<RenderedPrompt>,
): Promise<RenderedPrompt | null> {
  const { promptTokens, outputTokens } = ids
  if (promptTokens === undefined || outputTokens === undefined || outputTokens[outputTokens.length - 1] !== CALL) return null
  const full = rendered.tokens
  if (!startsWith(full, ids.renderedPromptTokens ?? promptTokens)) return null
  const before = (await renderWithout()).tokens
  // `before` ends with `<|start|>assistant`: the new items start at its `<|start|>`.
  const cut = before.length - 2
  if (before[cut] !== START || !startsWith(full, before.subarray(0, cut))) return null
  const tokens = new Uint32Array(promptTokens.length + outputTokens.length + full.length - cut)
  tokens.set(promptTokens)
  tokens.set(outputTokens, promptTokens.length)
  tokens.set(full.subarray(cut), promptTokens.length + outputTokens.length)
  return { ...rendered, tokens, promptTokens: tokens.length }
}

/** Whether `tokens` begins with `prefix`. */
export function startsWith(tokens: ArrayLike<number>, prefix: ArrayLike<number>): boolean {
  if (prefix.length > tokens.length) return false
  for (let i = 0; i < prefix.length; i++) if (tokens[i] !== prefix[i]) return false
  return true
}
