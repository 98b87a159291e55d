/**
 * A Responses request's remote MCP servers (`{ type: 'mcp' }` tools), before it is rendered: each one the
 * gateway may reach is connected and listed, and the tool becomes a `namespace` tool of its functions, which the
 * renderer declares as any namespace (the model calls `{label}.{tool}`). What the response echoes and keeps of
 * the request never holds the tools' `headers` (their credentials).
 */
import { isRecord } from '../../base/records'
import { HttpError } from '../../http/errors'
import { isFunctionName } from '../../render/request-fields'
import type { ApprovedCall } from '../../wire/responses'
import type { Item } from '../pipeline/prepared'
import type { StoredResponse } from '../stores/store'
import { type McpServer, mcpToolsOf, openMcpServer } from '../tools/mcp'
import type { ResponsesGateway } from './responses-gateway'

export interface WithMcp {
  /** The body to render: its `mcp` tools as namespaces. */
  render: Item
  /** The body to echo and keep: its `mcp` tools without their headers. */
  echo: Item
  servers: McpServer[]
}

/** `body` with its MCP servers listed; null when it names none (or the gateway reaches none: they stay hosted tools). */
export async function withMcpServers(gateway: ResponsesGateway, body: Item): Promise<WithMcp | null> {
  const found = mcpToolsOf(body.tools)
  if (found.length === 0 || gateway.mcpServers === null) return null
  const servers: McpServer[] = []
  try {
    for (const { index, tool } of found) {
      const server = await openMcpServer(tool, `tools[${index}]`, { allowed: gateway.mcpServers, timeMs: gateway.mcpTimeMs })
      if (servers.some((other) => other.label === server.label)) {
        await server.close()
        throw new HttpError(400, `tools[${index}].server_label '${server.label}' is used twice`, {
          param: `tools[${index}].server_label`,
          code: 'invalid-parameter',
        })
      }
      servers.push(server)
    }
  } catch (error) {
    await Promise.all(servers.map((server) => server.close()))
    throw error
  }
  const tools = body.tools as unknown[]
  // Each `mcp` tool's server, by the tool's place in `tools`.
  const serverAt = new Map(found.map(({ index }, i) => [index, servers[i]!]))
  const rendered = tools.map((tool, index) => {
    const server = serverAt.get(index)
    if (server === undefined) return tool
    return {
      type: 'namespace',
      name: server.label,
      ...(typeof (tool as Item).server_description === 'string' ? { description: (tool as Item).server_description } : {}),
      tools: server.tools
        // A tool whose name the renderer would refuse is left out of the namespace.
        .filter((entry) => isFunctionName(entry.name))
        .map((entry) => ({ type: 'function', name: entry.name, description: entry.description, parameters: entry.input_schema })),
    }
  })
  const echoed = tools.map((tool, index) => {
    if (!serverAt.has(index)) return tool
    const { headers: _secret, ...rest } = tool as Item
    return rest
  })
  return { render: { ...body, tools: rendered }, echo: { ...body, tools: echoed }, servers }
}

/** A call that waited for approval, as its `mcp_approval_request` item says. */
interface ApprovalRequest {
  server_label: string
  name: string
  arguments: string
}

/**
 * The client's answers to approval requests (`mcp_approval_response` items in `input`): each approved call is
 * run now, on the request's own server of that label, and the answer becomes the call's result, a
 * `function_call_output` of the request's id (a declined call's result says so), which the renderer places after
 * the call: after the kept ids of the response it continues, or after the request item sent back.
 */
export async function answerApprovals(
  body: Item,
  servers: readonly McpServer[],
  previous: StoredResponse | null,
): Promise<{ body: Item; approved: ApprovedCall[] }> {
  const input = Array.isArray(body.input) ? (body.input as unknown[]) : []
  const answers = input.flatMap((item, index) => (isRecord(item) && item.type === 'mcp_approval_response' ? [{ item, index }] : []))
  if (answers.length === 0) return { body, approved: [] }
  const approved: ApprovedCall[] = []
  const requests = new Map<string, ApprovalRequest>()
  const note = (item: unknown) => {
    if (isRecord(item) && item.type === 'mcp_approval_request' && typeof item.id === 'string')
      requests.set(item.id, item as unknown as ApprovalRequest)
  }
  input.forEach(note)
  for (const item of (previous?.response.output as unknown[] | undefined) ?? []) note(item)
  const answered = [...input]
  for (const { item, index } of answers) {
    const at = `input[${index}]`
    const id = item.approval_request_id
    const request = typeof id === 'string' ? requests.get(id) : undefined
    if (request === undefined)
      throw new HttpError(400, `${at}.approval_request_id matches no mcp_approval_request of this conversation`, {
        param: `${at}.approval_request_id`,
        code: 'invalid-parameter',
      })
    if (typeof item.approve !== 'boolean')
      throw new HttpError(400, `${at}.approve must be a boolean`, { param: `${at}.approve`, code: 'invalid-parameter' })
    const server = servers.find((candidate) => candidate.label === request.server_label)
    if (server === undefined)
      throw new HttpError(
        400,
        `${at}: the request names no mcp tool with server_label '${request.server_label}' to run the approved call on`,
        {
          param: 'tools',
          code: 'invalid-parameter',
        },
      )
    const { output, failure } = item.approve
      ? await server.call(request.name, request.arguments)
      : { output: 'The user did not approve this call.', failure: undefined }
    answered[index] = { type: 'function_call_output', call_id: id, output }
    if (item.approve)
      approved.push({
        approval_request_id: id as string,
        server_label: request.server_label,
        name: request.name,
        arguments: request.arguments,
        output: failure === undefined ? output : null,
        error: failure ?? null,
      })
  }
  return { body: { ...body, input: answered }, approved }
}
