/**
 * The text of the system message, as the reference renders `SystemContent` (encoding.rs `Render<SystemContent>`):
 * identity, knowledge cutoff and date; the reasoning effort; the built-in tools (`# Tools`); the valid channels,
 * and where function calls go.
 */
import { type BuiltinTool, builtinToolNamespace } from './builtin-tools'
import { toolsSection } from './tools-section'

export type ReasoningEffort = 'low' | 'medium' | 'high'

export const REASONING_EFFORTS: readonly ReasoningEffort[] = Object.freeze(['low', 'medium', 'high'])

export const DEFAULT_MODEL_IDENTITY = 'You are ChatGPT, a large language model trained by OpenAI.'
export const DEFAULT_KNOWLEDGE_CUTOFF = '2024-06'

/** The system message's fields; `null` leaves a line out, as an unset field does in the reference. */
export interface SystemContent {
  modelIdentity?: string | null
  knowledgeCutoff?: string | null
  /** `Current date: …`; absent or null: no line. */
  currentDate?: string | null
  reasoningEffort?: ReasoningEffort | null
  /** gpt-oss's own tools offered (builtin-tools.ts), declared under `# Tools`; absent or empty: none. */
  tools?: readonly BuiltinTool[]
}

/** The channels gpt-oss was trained with, all required (the reference's default channel config). */
const VALID_CHANNELS = '# Valid channels: analysis, commentary, final. Channel must be included for every message.'
const FUNCTIONS_GO_TO_COMMENTARY = "Calls to these tools must go to the commentary channel: 'functions'."

/**
 * `hasFunctionTools`: whether any developer message of the conversation offers functions (the reference
 * decides this over the whole conversation, not per message).
 */
export function systemMessageText(content: SystemContent, hasFunctionTools: boolean): string {
  const sections: string[] = []
  const top: string[] = []
  if (content.modelIdentity != null) top.push(content.modelIdentity)
  if (content.knowledgeCutoff != null) top.push(`Knowledge cutoff: ${content.knowledgeCutoff}`)
  if (content.currentDate != null) top.push(`Current date: ${content.currentDate}`)
  if (top.length > 0) sections.push(top.join('\n'))
  if (content.reasoningEffort != null) sections.push(`Reasoning: ${content.reasoningEffort}`)
  const tools = toolsSection([...new Set(content.tools ?? [])].map(builtinToolNamespace))
  if (tools !== null) sections.push(tools)
  sections.push(hasFunctionTools ? `${VALID_CHANNELS}\n${FUNCTIONS_GO_TO_COMMENTARY}` : VALID_CHANNELS)
  return sections.join('\n\n')
}
