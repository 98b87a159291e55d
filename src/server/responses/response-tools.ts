/**
 * The tools one response runs on: gpt-oss's `python` and `browser` where the gateway runs them (its own python
 * session, its own browser) and the remote MCP servers its request names, all ended with the response; and the
 * citations of its answer, read from the pages its browser showed.
 */
import { randomUUID } from 'node:crypto'
import type { CitedPageOf } from '../../wire/responses'
import { splitRecipient } from '../../wire/routing'
import type { Prepared } from '../pipeline/prepared'
import { BrowserSession } from '../tools/browser'
import type { ToolCaller } from '../tools/loop'
import type { ResponsesGateway } from './responses-gateway'

export interface ResponseTools extends ToolCaller {
  /** The page a citation marker of the answer names (null without a browser: markers stay as written). */
  citedPage: CitedPageOf | null
}

/**
 * The tools a response runs on (null: none), with its adapter told where its answer's citations point. Every
 * way a response is served (streamed or whole, in the background, on a WebSocket) makes them here, before its
 * adapter, and hands them to `generate`.
 */
export function toolsOfResponse(gateway: ResponsesGateway, prepared: Prepared, options: { citedPage?: CitedPageOf }): ResponseTools | null {
  const tools = responseTools(gateway, prepared)
  // Only a response that browses has its answer's markers replaced (and its answer off the SSE fast lane).
  if (tools?.citedPage != null) options.citedPage = tools.citedPage
  return tools
}

/**
 * The tools of a new response: those its prompt offers of gpt-oss's own that the gateway runs, and its remote MCP
 * servers (a call that waits for the client's approval is not run); null when it has none.
 */
function responseTools(gateway: ResponsesGateway, prepared: Prepared): ResponseTools | null {
  const offered = prepared.prompt.builtinTools ?? []
  const python = offered.includes('python') ? gateway.python : null
  const pages = offered.includes('browser') && gateway.browser !== null ? new BrowserSession(gateway.browser) : null
  const mcp = new Map((prepared.mcp ?? []).map((server) => [server.label, server]))
  if (python === null && pages === null && mcp.size === 0) return null
  const session = randomUUID()
  /** The MCP server and tool of a recipient (`label.tool`), if it names one of the response's servers. */
  const mcpTool = (tool: string) => {
    const called = splitRecipient(tool)
    const server = called === null ? undefined : mcp.get(called.namespace)
    return called === null || server === undefined ? null : { server, name: called.name }
  }
  return {
    runs: (tool) => {
      if (tool === 'python') return python !== null
      if (tool.startsWith('browser.')) return pages !== null
      const found = mcpTool(tool)
      return found !== null && !found.server.needsApproval(found.name)
    },
    call: (tool, args) => {
      if (tool === 'python') return python!.run(session, args)
      if (tool.startsWith('browser.')) return pages!.call(tool, args)
      const found = mcpTool(tool)!
      return found.server.call(found.name, args)
    },
    end: () => {
      python?.end(session)
      for (const server of mcp.values()) void server.close()
    },
    citedPage: pages === null ? null : (cursor, results) => pages.citedPage(cursor, results),
  }
}
