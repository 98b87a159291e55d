/**
 * A prompt made of the ids the engine already saw and generated, with only what is new rendered after them: the
 * token-exact continuation every API that carries a tool loop uses (Responses within a turn, the Chat id cache
 * and the APIs prepared as Chat), so that an engine's prefix cache serves the whole history.
 */
import { sharedVocabulary } from '../../backend/js/vocabulary'
import { CALL, END, FIRST_SPECIAL, MESSAGE, RETURN, START } from '../../backend/tokens'
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
  const stem = ids.renderedPromptTokens ?? promptTokens
  if (!startsWith(full, stem)) return null
  const before = (await renderWithout()).tokens
  // `before` ends with `<|start|>assistant`: the new items start at its `<|start|>`.
  const cut = before.length - 2
  if (before[cut] !== START || cut < stem.length || !startsWith(full, before.subarray(0, cut))) return null
  // What the client sent back of the answer the ids stand for: its texts must be the model's (or left out).
  if (!isSubsequence(texts(full.subarray(stem.length, cut)), texts(outputTokens))) return null
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

/**
 * The texts of the messages in `tokens` (an answer's ids, or its re-render; both begin inside the first
 * message's header) that are not tool calls: a call's arguments may come back re-serialised (its header names
 * a recipient, ` to=`), every other text must come back as the model wrote it. Compared as text, not ids: a
 * re-render tokenizes a text its own way.
 */
function texts(tokens: ArrayLike<number>): string[] {
  const vocabulary = sharedVocabulary()
  const found: string[] = []
  let header: number[] = []
  let body: number[] | null = null
  const bytesOf = (ids: number[]) => Buffer.concat(ids.map((id) => vocabulary.tokenBytes(id))).toString('utf8')
  for (let i = 0; i < tokens.length; i++) {
    const id = tokens[i]!
    if (body === null) {
      if (id === MESSAGE) body = []
      else if (id === START) header = []
      else header.push(id)
    } else if (id === END || id === CALL || id === RETURN) {
      if (!bytesOf(header.filter((h) => h < FIRST_SPECIAL)).includes('to=')) found.push(bytesOf(body))
      header = []
      body = null
    } else body.push(id)
  }
  return found
}

/** Whether `some` is `all` with some entries left out (none changed, none added, the order kept). */
function isSubsequence(some: readonly string[], all: readonly string[]): boolean {
  let at = 0
  for (const text of some) {
    while (at < all.length && all[at] !== text) at++
    if (at === all.length) return false
    at++
  }
  return true
}
