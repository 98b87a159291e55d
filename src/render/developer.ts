/**
 * The text of the developer message, as the reference renders `DeveloperContent`: `# Instructions`, then
 * the `# Tools` section with the `functions` namespace (encoding.rs `template_tools_section`); then, for
 * structured outputs, the `# Response Formats` section of the Harmony format guide (openai/harmony
 * docs/format.md "Structured output"), which the reference renderer has no API for.
 */
import { jsonSchemaToTypeScript } from './schema'

/** A function the model may call, as the reference's `ToolDescription`. */
export interface FunctionTool {
  name: string
  /** Written as `// ` comment lines above the type. */
  description?: string
  /** A JSON Schema; absent or null: a function without parameters (`() => any`). */
  parameters?: unknown
}

/** A JSON Schema an answer follows (structured outputs), with the name and description the prompt shows. */
export interface OutputSchema {
  name: string
  description?: string
  /** The schema as the client sent it (the prompt shows it as compact JSON). */
  schema: Record<string, unknown>
}

export interface DeveloperContent {
  instructions?: string | null
  tools?: readonly FunctionTool[]
  /** Schemas the answer follows, shown under `# Response Formats` (structured outputs). */
  responseFormats?: readonly OutputSchema[]
}

/** Rust's `str::lines()`: split at `\n`, drop one `\r` before it, and no empty last line after a final `\n`. */
function lines(text: string): string[] {
  if (text === '') return []
  const parts = text.split('\n')
  if (parts[parts.length - 1] === '') parts.pop()
  return parts.map((line) => (line.endsWith('\r') ? line.slice(0, -1) : line))
}

/** The `functions` namespace block (the only namespace a gateway offers; built-in tools are not rendered). */
function functionsNamespace(tools: readonly FunctionTool[]): string {
  const block = ['## functions\n', 'namespace functions {\n']
  for (const tool of tools) {
    for (const line of lines(tool.description ?? '')) block.push(`// ${line}`)
    block.push(
      tool.parameters == null
        ? `type ${tool.name} = () => any;\n`
        : `type ${tool.name} = (_: ${jsonSchemaToTypeScript(tool.parameters, '')}) => any;\n`,
    )
  }
  block.push('} // namespace functions')
  return block.join('\n')
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
  if (content.tools !== undefined && content.tools.length > 0) sections.push(['# Tools', functionsNamespace(content.tools)].join('\n\n'))
  if (content.responseFormats !== undefined && content.responseFormats.length > 0)
    sections.push(responseFormatsSection(content.responseFormats))
  return sections.join('\n\n')
}
