/**
 * The text of the developer message, as the reference renders `DeveloperContent`: `# Instructions`, then
 * the `# Tools` section with the `functions` namespace and any other namespaces of functions, in the order of
 * their names (encoding.rs `template_tools_section`, over a `BTreeMap` of namespaces); then, for
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

/**
 * A namespace of functions besides `functions` (the reference's `ToolNamespaceConfig`; a Responses `namespace`
 * tool): the model calls them as `to={name}.{tool}`.
 */
export interface ToolNamespace {
  name: string
  /** Written as `// ` comment lines under the namespace's heading. */
  description?: string
  tools: readonly FunctionTool[]
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

/** Rust's `str::lines()`: split at `\n`, drop one `\r` before it, and no empty last line after a final `\n`. */
function lines(text: string): string[] {
  if (text === '') return []
  const parts = text.split('\n')
  if (parts[parts.length - 1] === '') parts.pop()
  return parts.map((line) => (line.endsWith('\r') ? line.slice(0, -1) : line))
}

/** A namespace's block: heading, description, and its functions' types. */
function namespaceBlock({ name, description, tools }: ToolNamespace): string {
  const block = [`## ${name}\n`]
  // The reference writes the description plain when the namespace has no tools; a request's always has some.
  for (const line of lines(description ?? '')) block.push(`// ${line}`)
  block.push(`namespace ${name} {\n`)
  for (const tool of tools) {
    for (const line of lines(tool.description ?? '')) block.push(`// ${line}`)
    block.push(
      tool.parameters == null
        ? `type ${tool.name} = () => any;\n`
        : `type ${tool.name} = (_: ${jsonSchemaToTypeScript(tool.parameters, '')}) => any;\n`,
    )
  }
  block.push(`} // namespace ${name}`)
  return block.join('\n')
}

/** The `# Tools` section: every namespace with functions, ordered by name as the reference's map orders them. */
function toolsSection(content: DeveloperContent): string | null {
  const namespaces = [...(content.namespaces ?? [])]
  if (content.tools !== undefined && content.tools.length > 0) namespaces.push({ name: 'functions', tools: content.tools })
  const offered = namespaces.filter((namespace) => namespace.tools.length > 0)
  if (offered.length === 0) return null
  // Byte order of the names (Rust's String order), which for the ASCII names allowed is code unit order.
  offered.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  return ['# Tools', ...offered.map(namespaceBlock)].join('\n\n')
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
  const tools = toolsSection(content)
  if (tools !== null) sections.push(tools)
  if (content.responseFormats !== undefined && content.responseFormats.length > 0)
    sections.push(responseFormatsSection(content.responseFormats))
  return sections.join('\n\n')
}
