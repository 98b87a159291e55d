/**
 * The `# Tools` section the reference writes into the system message (built-in tools: `browser`, `python`) and
 * into the developer message (`functions` and other namespaces of functions): encoding.rs
 * `template_tools_section`, over a `BTreeMap` of namespaces, so ordered by name.
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

/**
 * A namespace of tools (the reference's `ToolNamespaceConfig`): the model calls them as `to={name}.{tool}`, or
 * `to={name}` for a namespace without functions (`python`).
 */
export interface ToolNamespace {
  name: string
  /** Under the namespace's heading: `// ` comment lines when it has functions, plain lines when it has none. */
  description?: string
  tools: readonly FunctionTool[]
}

/** Rust's `str::lines()`: split at `\n`, drop one `\r` before it, and no empty last line after a final `\n`. */
export function lines(text: string): string[] {
  if (text === '') return []
  const parts = text.split('\n')
  if (parts[parts.length - 1] === '') parts.pop()
  return parts.map((line) => (line.endsWith('\r') ? line.slice(0, -1) : line))
}

/** A namespace's block: heading, description, and its functions' types (none for a namespace without functions). */
function namespaceBlock({ name, description, tools }: ToolNamespace): string {
  const block = [`## ${name}\n`]
  const hasFunctions = tools.length > 0
  for (const line of lines(description ?? '')) block.push(hasFunctions ? `// ${line}` : line)
  if (!hasFunctions) return block.join('\n')
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

/** The `# Tools` section of `namespaces`, ordered by name as the reference's map orders them; null for none. */
export function toolsSection(namespaces: readonly ToolNamespace[]): string | null {
  if (namespaces.length === 0) return null
  // Byte order of the names (Rust's String order), which for the ASCII names allowed is code unit order.
  const ordered = [...namespaces].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  return ['# Tools', ...ordered.map(namespaceBlock)].join('\n\n')
}
