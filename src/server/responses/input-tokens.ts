/**
 * `POST /v1/responses/input_tokens` (the `openai` package's `client.responses.inputTokens.count`,
 * resources/responses/input-tokens.d.ts; OpenAI answers `{ object: 'response.input_tokens', input_tokens }`):
 * the prompt a Responses request would give the engine, counted. It is prepared as `POST /v1/responses` prepares
 * it (prepare-responses.ts: a continuation after what it continues, within a turn the ids the engine saw and
 * generated; item references, compaction items and sealed reasoning opened; MCP servers listed), so the count is
 * the response's `usage.input_tokens`. Nothing is generated, kept or run.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'

import { isRecord } from '../../base/records'
import { parseJsonBody, readJsonBytes } from '../../http/body'
import { HttpError } from '../../http/errors'
import { checkRequestFields, INPUT_TOKENS_REQUEST_FIELDS } from '../../http/fields'
import { type Item, releasePrepared } from '../pipeline/prepared'
import { sendJson } from '../pipeline/send'
import { reportPrepared } from '../pipeline/serve-face'
import { prepareResponsesBody } from './prepare-responses'
import type { ResponsesGateway } from './responses-gateway'

/**
 * The body as a Responses request: its fields checked (a 400 naming the first refused or unknown one), those a
 * gateway with `unknownFields: 'ignore'` takes without dropped, and the gateway's model where it names none
 * (OpenAI's count takes a request without `model`; the model does not change the prompt).
 */
function asResponsesRequest(gateway: ResponsesGateway, sent: Item): Item {
  checkRequestFields(INPUT_TOKENS_REQUEST_FIELDS, sent, gateway.unknownFields)
  const body = Object.fromEntries(Object.entries(sent).filter(([name]) => Object.hasOwn(INPUT_TOKENS_REQUEST_FIELDS, name)))
  if (body.model == null) body.model = gateway.model
  return body
}

/**
 * An approved MCP call is run before its response renders, and its result is part of the prompt: a count
 * cannot have it without running the call, so it is refused, naming the item (a declined one is counted: its
 * result is a fixed sentence).
 */
function refuseApprovedCalls(gateway: ResponsesGateway, body: Item): void {
  if (gateway.mcpServers === null || !Array.isArray(body.input)) return
  const at = body.input.findIndex((item) => isRecord(item) && item.type === 'mcp_approval_response' && item.approve === true)
  if (at >= 0)
    throw new HttpError(400, `input[${at}] approves an MCP call, whose result is part of the prompt: a count runs no call`, {
      param: `input[${at}]`,
      code: 'invalid-parameter',
    })
}

async function countInputTokens(gateway: ResponsesGateway, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const bytes = await readJsonBytes(request, { limit: gateway.bodyLimit })
  const body = asResponsesRequest(gateway, parseJsonBody(bytes))
  refuseApprovedCalls(gateway, body)
  // A count prompts no engine: what the gateway counts of the prompts it gives (exact or re-rendered, and why) is
  // not told of it.
  const counting: ResponsesGateway = { ...gateway, meters: null, onDiagnostic: () => {} }
  const prepared = await prepareResponsesBody(counting, body, null, bytes.length > gateway.renderInlineBytes)
  try {
    // What the request asks for and gpt-oss cannot do is said as a response's answer says it (the header); how
    // its prompt was made (`prompt-re-rendered`) is not, since no engine gets it.
    reportPrepared(counting, { ...prepared, noted: [] }, response)
    sendJson(response, 200, { object: 'response.input_tokens', input_tokens: prepared.prompt.promptTokens })
  } finally {
    await releasePrepared(prepared)
  }
}

/** The route, a fixed path: it is answered before `/v1/responses/{id}` would take `input_tokens` for an id. */
export const INPUT_TOKENS_ROUTES = { '/v1/responses/input_tokens': { POST: countInputTokens } }
