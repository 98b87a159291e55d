/**
 * Remote MCP servers a Responses request names (`{ type: 'mcp', server_label, server_url, allowed_tools,
 * require_approval, headers }`), run by the gateway as OpenAI runs them: the server's tools are listed (an
 * `mcp_list_tools` item) into a Harmony namespace named by the label, which the model calls as
 * `to={label}.{tool}`; each call runs on the server inside the response (an `mcp_call` item), or, where the
 * request requires approval, ends the response with an `mcp_approval_request` for the client to answer.
 *
 * Only servers whose URL starts with one of the gateway's prefixes (`HARMONY_MCP_SERVERS`) are reached. Through
 * the official client (`@modelcontextprotocol/sdk`, streamable HTTP), with the request's `headers` (its
 * credentials), which are used for the connection and never kept or logged.
 */
import { requireOptional } from '../../base/optional-package'
import { HttpError } from '../../http/errors'
import { failed, type ToolResult } from './result'

/** A tool of an MCP server, as `mcp_list_tools` lists it. */
interface McpToolInfo {
  name: string
  description?: string
  input_schema: Record<string, unknown>
}

/** One MCP server of a request, connected and listed. */
export interface McpServer {
  label: string
  tools: McpToolInfo[]
  /** Whether a call of `tool` waits for the client's approval. */
  needsApproval(tool: string): boolean
  /** Runs `tool` with the model's arguments (JSON text): its text, or what went wrong (a failure). Never rejects. */
  call(tool: string, args: string): Promise<ToolResult>
  close(): Promise<void>
}

export interface McpOptions {
  /** URL prefixes a request's `server_url` must start with. */
  allowed: readonly string[]
  /** Each request to a server (connect, list, call), in ms. */
  timeMs: number
}

interface SdkClient {
  connect(transport: unknown): Promise<void>
  listTools(
    params?: object,
    options?: object,
  ): Promise<{ tools: { name: string; description?: string; inputSchema: Record<string, unknown> }[] }>
  callTool(
    params: object,
    resultSchema?: unknown,
    options?: object,
  ): Promise<{ content?: { type: string; text?: string }[]; isError?: boolean }>
  close(): Promise<void>
}

/** The `mcp` tools of a Responses request's `tools`, with their index there. */
export function mcpToolsOf(tools: unknown): { index: number; tool: Record<string, unknown> }[] {
  if (!Array.isArray(tools)) return []
  return tools.flatMap((tool, index) =>
    tool !== null && typeof tool === 'object' && (tool as { type?: unknown }).type === 'mcp'
      ? [{ index, tool: tool as Record<string, unknown> }]
      : [],
  )
}

/** Connects to the server an `mcp` tool names and lists its tools; every problem is a 4xx naming the field. */
export async function openMcpServer(tool: Record<string, unknown>, at: string, options: McpOptions): Promise<McpServer> {
  const label = tool.server_label
  if (typeof label !== 'string' || !/^[A-Za-z0-9_-]{1,64}$/.test(label))
    throw new HttpError(400, `${at}.server_label must be 1 to 64 letters, digits, '_' or '-'`, {
      param: `${at}.server_label`,
      code: 'invalid-parameter',
    })
  const url = tool.server_url
  if (typeof url !== 'string')
    throw new HttpError(400, `${at}.server_url is required (connectors are not served here)`, {
      param: `${at}.server_url`,
      code: 'invalid-parameter',
    })
  if (!options.allowed.some((prefix) => url.startsWith(prefix)))
    throw new HttpError(400, `${at}.server_url is not an MCP server this gateway may reach`, {
      param: `${at}.server_url`,
      code: 'invalid-parameter',
    })
  const headers = readHeaders(tool.headers, `${at}.headers`)
  const allowedTools = toolFilter(tool.allowed_tools, `${at}.allowed_tools`)
  const approval = approvalRule(tool.require_approval, `${at}.require_approval`)
  const { Client } = requireOptional<{ Client: new (info: object) => SdkClient }>('@modelcontextprotocol/sdk/client/index.js', 'MCP tools')
  const { StreamableHTTPClientTransport } = requireOptional<{ StreamableHTTPClientTransport: new (url: URL, options: object) => unknown }>(
    '@modelcontextprotocol/sdk/client/streamableHttp.js',
    'MCP tools',
  )
  const client = new Client({ name: 'harmony-stream', version: '0.1.0' })
  const request = { timeout: options.timeMs }
  let listed: Awaited<ReturnType<SdkClient['listTools']>>
  try {
    await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }))
    listed = await client.listTools({}, request)
  } catch (error) {
    await client.close().catch(() => {})
    // As OpenAI answers a server it cannot list: 424, the request depended on it.
    throw new HttpError(
      424,
      `${at}: the MCP server's tools could not be listed: ${String((error as Error).message ?? error).slice(0, 200)}`,
      {
        param: `${at}.server_url`,
        code: 'mcp-list-failed',
      },
    )
  }
  const tools = listed.tools
    .filter((entry) => allowedTools === null || allowedTools.includes(entry.name))
    .map((entry) => ({
      name: entry.name,
      ...(entry.description ? { description: entry.description } : {}),
      input_schema: entry.inputSchema,
    }))
  return {
    label,
    tools,
    needsApproval: (name) => approval(name),
    async call(name, args) {
      let parsed: unknown
      try {
        parsed = args.trim() === '' ? {} : JSON.parse(args)
      } catch {
        return failed('Error: the arguments are not JSON.')
      }
      try {
        const result = await client.callTool({ name, arguments: parsed }, undefined, request)
        const text = (result.content ?? []).map((part) => (part.type === 'text' ? (part.text ?? '') : `[${part.type}]`)).join('\n')
        return result.isError === true ? failed(`Error: ${text}`) : { output: text }
      } catch (error) {
        return failed(`Error: ${String((error as Error).message ?? error).slice(0, 500)}`)
      }
    },
    close: () => client.close().catch(() => {}),
  }
}

function readHeaders(value: unknown, at: string): Record<string, string> {
  if (value === undefined || value === null) return {}
  if (typeof value !== 'object' || Array.isArray(value) || !Object.values(value).every((v) => typeof v === 'string'))
    throw new HttpError(400, `${at} must be an object of strings`, { param: at, code: 'invalid-parameter' })
  return value as Record<string, string>
}

/** `allowed_tools`: names, or `{ tool_names }`; null: every tool. */
function toolFilter(value: unknown, at: string): string[] | null {
  if (value === undefined || value === null) return null
  const names = Array.isArray(value) ? value : (value as { tool_names?: unknown }).tool_names
  if (!Array.isArray(names) || !names.every((name) => typeof name === 'string'))
    throw new HttpError(400, `${at} must be an array of tool names, or { tool_names }`, { param: at, code: 'invalid-parameter' })
  return names as string[]
}

/**
 * `require_approval`: `'always'` (OpenAI's default), `'never'`, or `{ always: { tool_names }, never: { tool_names } }`
 * (a tool in neither list needs approval).
 */
function approvalRule(value: unknown, at: string): (tool: string) => boolean {
  if (value === undefined || value === null || value === 'always') return () => true
  if (value === 'never') return () => false
  const names = (side: unknown) => {
    const list = (side as { tool_names?: unknown } | undefined)?.tool_names
    return Array.isArray(list) ? list.filter((name): name is string => typeof name === 'string') : []
  }
  if (typeof value !== 'object' || Array.isArray(value))
    throw new HttpError(400, `${at} must be 'always', 'never' or { always, never }`, { param: at, code: 'invalid-parameter' })
  const never = names((value as { never?: unknown }).never)
  return (tool) => !never.includes(tool)
}
