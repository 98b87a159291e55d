/** Adapter options that change what goes on the wire, shared by the SSE tests (sse, sse-pool). */
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { location: { type: 'string' } } } } },
]

/** Chat option sets; Responses takes them without `includeUsage`, `reasoningField` and `choiceIndex`. */
export const WIRE_VARIANTS = [
  {},
  { includeUsage: true, reasoningField: 'both' as const },
  { reasoningField: 'reasoning' as const, preamble: 'reasoning' as const, builtinTools: 'surface' as const },
  // A choice other than the first (`n`): its index in every frame, its own call ids.
  { tools: TOOLS, textToolCalls: 'recover' as const, choiceIndex: 2 },
  // The gateway runs gpt-oss's own tools: their calls and results are its work (Responses: their items).
  { builtinTools: 'run' as const },
]

/**
 * A variant without the Chat-only options; the one that shows reasoning both ways shows it in Responses both
 * ways too: as summary parts beside the reasoning text, and sealed.
 */
export function responsesVariant(variant: Record<string, unknown>): Record<string, unknown> {
  const { includeUsage: _, choiceIndex: _choice, reasoningField, ...rest } = variant
  if (rest.builtinTools === 'run') {
    return {
      ...rest,
      codeInterpreterOutputs: true,
      mcpListTools: [{ server_label: 'calc', tools: [{ name: 'add', input_schema: { type: 'object' } }] }],
      // Every cursor names a page: every answer goes through the citation markers' replacement (off the lane).
      citedPage: (cursor: number) => ({ url: `https://a.example/${cursor}`, title: 'A' }),
    }
  }
  // The one that keeps preambles as reasoning streams reasoning in the Open Responses dialect's names.
  if (reasoningField === 'reasoning') return { ...rest, dialect: 'open-responses' }
  if (reasoningField !== 'both') return rest
  return { ...rest, reasoningSummary: true, sealReasoning: (text: string) => `sealed ${text.length}` }
}

/**
 * A variant for the Messages adapter: without the Chat-only options; the one that shows reasoning both ways
 * signs its thinking blocks, the one that keeps preambles as reasoning hides the thinking, and the one where the
 * gateway runs tools shows it omitted (a signature only).
 */
export function messagesVariant(variant: Record<string, unknown>): Record<string, unknown> {
  const { includeUsage: _, choiceIndex: _choice, reasoningField, ...rest } = variant
  if (reasoningField === 'both') return { ...rest, signThinking: (text: string) => `signed ${text.length}` }
  if (reasoningField === 'reasoning') return { ...rest, thinkingDisplay: 'none' }
  if (rest.builtinTools === 'run') return { ...rest, thinkingDisplay: 'omitted', signThinking: (text: string) => `sealed ${text}` }
  return rest
}
