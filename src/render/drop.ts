/**
 * Which earlier chain of thought a prompt keeps. Two rules, both needed:
 * - `dropFinishedAnalysis` (gateways): analysis before the last assistant `final` message belongs to finished
 *   turns and is dropped; everything after it (an ongoing tool loop's reasoning) is kept. This is the Harmony
 *   docs' rule ("drop earlier chain of thought once a final exists"), and what vLLM does.
 * - `referenceAutoDropAnalysis` (the reference's `auto_drop_analysis`, used by the training render): only when
 *   the last assistant message is `final`, and then analysis before the *first* `final` message; so while a
 *   tool loop is open it keeps every earlier turn's analysis.
 */
import type { ConversationMessage } from './conversation'

const isAnalysis = (m: ConversationMessage) => m.role !== 'system' && m.role !== 'developer' && m.channel === 'analysis'
const isFinal = (m: ConversationMessage) => m.role !== 'system' && m.role !== 'developer' && m.channel === 'final'

export function dropFinishedAnalysis<M extends ConversationMessage>(messages: readonly M[]): M[] {
  let lastFinal = -1
  messages.forEach((m, i) => {
    if (m.role === 'assistant' && isFinal(m)) lastFinal = i
  })
  return messages.filter((m, i) => !(i < lastFinal && m.role === 'assistant' && isAnalysis(m)))
}

export function referenceAutoDropAnalysis<M extends ConversationMessage>(messages: readonly M[]): M[] {
  const lastAssistant = [...messages].reverse().find((m) => m.role === 'assistant')
  if (lastAssistant === undefined || !isFinal(lastAssistant)) return [...messages]
  const firstFinal = messages.findIndex(isFinal)
  return messages.filter((m, i) => !(firstFinal >= 0 && i < firstFinal && isAnalysis(m)))
}
