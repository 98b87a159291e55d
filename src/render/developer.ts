/**
 * The text of the developer message, as the reference renders `DeveloperContent`: `# Instructions`, then
 * the `# Tools` section with the `functions` namespace and any other namespaces of functions
 * (tools-section.ts); then, for structured outputs, the `# Response Formats` section of the Harmony format
 * guide (openai/harmony docs/format.md "Structured output"), which the reference renderer has no API for.
 */
import { type FunctionTool, lines, type ToolNamespace, toolsSection } from './tools-section'

export type { FunctionTool, ToolNamespace } from './tools-section'

/** A JSON Schema an answer follows (structured outputs), with the name and description the prompt shows. */
export interface OutputSchema {
  name: string
  description?: string
  /** The schema as the client sent it (the prompt shows it as compact JSON). */
  schema: Record<string, unknown>
}

export interface DeveloperContent {
  instructions?: string | null
  /** The `functions` namespace. */
  tools?: readonly FunctionTool[]
  /** Other namespaces of functions. */
  namespaces?: readonly ToolNamespace[]
  /** Schemas the answer follows, shown under `# Response Formats` (structured outputs). */
  responseFormats?: readonly OutputSchema[]
}

/** The `# Tools` section: every namespace with functions (`functions` among them). */
function developerTools(content: DeveloperContent): string | null {
  const namespaces = [...(content.namespaces ?? [])]
  if (content.tools !== undefined && content.tools.length > 0) namespaces.push({ name: 'functions', tools: content.tools })
  // A request's namespaces always have functions; one without would be written as a built-in tool is.
  return toolsSection(namespaces.filter((namespace) => namespace.tools.length > 0))
}

/**
 * The guide's layout, at the end of the developer message: `# Response Formats`, then per format
 * `## {name}`, a blank line, `// {description}` (when there is one) and the schema as compact JSON.
 */
function responseFormatsSection(formats: readonly OutputSchema[]): string {
  const blocks = formats.map((format) => {
    const comment = lines(format.description ?? '').map((line) => `// ${line}\n`)
    return `## ${format.name}\n\n${comment.join('')}${JSON.stringify(format.schema)}`
  })
  return ['# Response Formats', ...blocks].join('\n\n')
}

export function developerMessageText(content: DeveloperContent): string {
  const sections: string[] = []
  if (content.instructions != null) sections.push('# Instructions', content.instructions)
  const tools = developerTools(content)
  if (tools !== null) sections.push(tools)
  if (content.responseFormats !== undefined && content.responseFormats.length > 0)
    sections.push(responseFormatsSection(content.responseFormats))
  return sections.join('\n\n')
}
