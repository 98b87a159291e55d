/**
 * The reference renderer (PyPI openai-harmony 0.0.8) as an oracle, through `reference_render.py` in the
 * project's `.venv` (made by scripts/setup-reference.mjs), reading gpt-tokenizer's vocabulary.
 */
import { runReference } from './reference.mjs'

export interface RenderCase {
  conversation?: { messages: Record<string, unknown>[] }
  /** The conversation as JSON text, passed to the reference as it is. */
  conversationJson?: string
  mode: 'completion' | 'training'
  autoDrop: boolean
  /** The reference's own built-in tool namespaces, put into the first system message's content. */
  builtinTools?: ('browser' | 'python')[]
}

export function referenceRender(cases: readonly RenderCase[]): { tokens?: number[]; error?: string }[] {
  return runReference('reference_render.py', cases, 'renderer')
}
