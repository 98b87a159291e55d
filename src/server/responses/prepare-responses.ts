/**
 * How a Responses request is prepared: a new one rendered (its remote MCP servers listed first, and the calls
 * the client approved run), a continuation rendered after what it continues (continuation.ts).
 */
import { responsesGenerationParameters } from '../../http/validate'
import { isContinuation } from '../pipeline/continues'
import { checkedSchemas, type Preparing } from '../pipeline/prepare'
import { type Item, type Prepared, renderHere, renderOffLoop } from '../pipeline/prepared'
import type { StoredResponse } from '../stores/store'
import { continued, previousFor } from './continuation'
import { answerApprovals, withMcpServers } from './mcp-servers'
import type { ResponsesGateway } from './responses-gateway'

/**
 * A parsed body. `previous`: the response it continues, where the caller found it (a WebSocket connection's
 * latest); `offLoop`: render in a worker (where there are workers).
 */
export async function prepareResponsesBody(
  gateway: ResponsesGateway,
  body: Item,
  previous: StoredResponse | null,
  offLoop: boolean,
): Promise<Prepared> {
  return checkedSchemas(await prepareParsed(gateway, body, previous, offLoop))
}

async function prepareParsed(gateway: ResponsesGateway, body: Item, previous: StoredResponse | null, offLoop: boolean): Promise<Prepared> {
  const parameters = responsesGenerationParameters(body, gateway.parameterOptions)
  const mcp = await withMcpServers(gateway, body)
  const echo = mcp?.echo ?? body
  try {
    const continuing = isContinuation('responses', body)
    // The client's approvals are answered (the calls run) before anything is rendered; the response they continue
    // is read once, for its approval requests and for the continuation.
    const id = body.previous_response_id
    const found = mcp !== null && continuing && previous === null && id != null ? await previousFor(gateway, String(id)) : previous
    const answered = mcp === null ? null : await answerApprovals(mcp.render, mcp.servers, found)
    const rendering = answered?.body ?? body
    const prepared: Prepared = continuing
      ? await continued(gateway, parameters, rendering, echo, found)
      : {
          kind: 'responses',
          parameters,
          prompt: offLoop ? await renderOffLoop(gateway, 'responses', rendering) : renderHere(gateway, 'responses', rendering),
          body: echo,
          history: [],
          // Approvals as the calls' results they became: what a continuation re-renders.
          input: rendering.input,
          storing: gateway.store !== null && body.store !== false,
        }
    if (mcp !== null) prepared.mcp = mcp.servers
    if (answered !== null && answered.approved.length > 0) prepared.mcpApproved = answered.approved
    return prepared
  } catch (error) {
    await Promise.all(mcp?.servers.map((server) => server.close()) ?? [])
    throw error
  }
}

export const responsesPreparing: Preparing<ResponsesGateway> = {
  kind: 'responses',
  parsed: (gateway, body, offLoop) => prepareParsed(gateway, body, null, offLoop),
  continued: (gateway, parameters, body, echo) => continued(gateway, parameters, body, echo ?? body),
  keepsInput: () => true,
  // A gateway that reaches MCP servers lists a request's before rendering it: its bodies are read here.
  parsesHere: (gateway) => gateway.mcpServers !== null,
  storing: (gateway) => gateway.store !== null,
}
