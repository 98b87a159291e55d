/**
 * A real MCP server for the tests (built with the official `@modelcontextprotocol/sdk`, streamable HTTP,
 * stateless) on a free 127.0.0.1 port: tools `add` ({ a, b } → their sum), `divide` (an error result for a
 * division by zero) and `secret`; each call and the
 * `authorization` header it came with are recorded. Closed in the test's teardown.
 */
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'

import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import type { ExecutionContext } from 'ava'
import { z } from 'zod'

export interface McpCallRecord {
  name: string
  args: unknown
  authorization: string | undefined
}

async function jsonBody(request: IncomingMessage): Promise<unknown> {
  let text = ''
  for await (const chunk of request) text += chunk
  return text === '' ? undefined : JSON.parse(text)
}

export async function startMcpServer(
  t: ExecutionContext,
): Promise<{ url: string; calls: McpCallRecord[]; listed: (string | undefined)[] }> {
  const calls: McpCallRecord[] = []
  /** The `authorization` header of every request. */
  const listed: (string | undefined)[] = []
  const http = createServer(async (request, response) => {
    const authorization = request.headers.authorization
    listed.push(authorization)
    const server = new McpServer({ name: 'test-tools', version: '1.0.0' })
    server.registerTool('add', { description: 'Adds two numbers.', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => {
      calls.push({ name: 'add', args: { a, b }, authorization })
      return { content: [{ type: 'text', text: String(a + b) }] }
    })
    server.registerTool('divide', { description: 'Divides a by b.', inputSchema: { a: z.number(), b: z.number() } }, async ({ a, b }) => {
      calls.push({ name: 'divide', args: { a, b }, authorization })
      return b === 0
        ? { content: [{ type: 'text', text: 'division by zero' }], isError: true }
        : { content: [{ type: 'text', text: String(a / b) }] }
    })
    server.registerTool('secret', { description: 'Tells a secret.', inputSchema: {} }, async () => {
      calls.push({ name: 'secret', args: {}, authorization })
      return { content: [{ type: 'text', text: 'swordfish' }] }
    })
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    response.on('close', () => {
      void transport.close()
      void server.close()
    })
    await server.connect(transport)
    await transport.handleRequest(request, response, await jsonBody(request))
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => http.close(() => resolve())))
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`, calls, listed }
}
