/**
 * Step one of every request: its generation parameters and its prompt (`Prepared`). A small body is read,
 * parsed and rendered here; a large one (over `renderInlineBytes`, with render workers) is handed to a worker
 * as bytes, so neither JSON.parse nor BPE of it holds the event loop. Either way one classifier
 * (`isContinuation`) decides whether the request continues what the gateway holds, and such a request is
 * rendered after it (chat-ids.ts, responses/continuation.ts): the two paths give one result type.
 */
import type { IncomingMessage } from 'node:http'
import { readJsonBody, readJsonBytes } from '../../http/body'
import { HttpError } from '../../http/errors'
import { chatGenerationParameters, type GenerationParameters, responsesGenerationParameters } from '../../http/validate'
import { schemaCompileProblem } from '../../wire/schema-check'
import { exactChat } from '../chat/exact-tool-loop'
import { continued, previousFor } from '../responses/continuation'
import { isContinuation } from '../responses/continuation-kind'
import type { StoredResponse } from '../stores/store'
import { answerApprovals, withMcpServers } from '../tools/mcp-servers'
import type { Gateway } from './context'
import { type ApiKind, type Item, type Prepared, renderHere, renderOffLoop } from './prepared'

/** Whether this gateway handles `body` as a continuation (Chat ones only with a `ChatIdCache`). */
function continues(gateway: Gateway, kind: ApiKind, body: Item): boolean {
  return (kind === 'responses' || gateway.chatIdCache !== null) && isContinuation(kind, body)
}

/** The request as it comes over HTTP. */
export async function prepareRequest(gateway: Gateway, kind: ApiKind, request: IncomingMessage): Promise<Prepared> {
  return withCheckableSchemas(await readAndPrepare(gateway, kind, request))
}

async function readAndPrepare(gateway: Gateway, kind: ApiKind, request: IncomingMessage): Promise<Prepared> {
  const { workers, bodyLimit, renderInlineBytes, store } = gateway
  const length = Number(request.headers['content-length'])
  // A gateway that reaches MCP servers lists a request's before rendering it: its bodies are read here.
  if (workers === null || gateway.mcpServers !== null || (Number.isFinite(length) && length <= renderInlineBytes))
    return prepareParsed(gateway, kind, await readJsonBody(request, { limit: bodyLimit }), null, false)
  // The body stays in the worker; for Responses its echo comes back (what the response object says of it),
  // and its input when it is to be kept. A continuation comes back whole, to be rendered here after what it continues.
  const bytes = await readJsonBytes(request, { limit: bodyLimit })
  const prepared = await workers.prepare(kind, bytes, { keepInput: kind === 'responses' || gateway.chatIdCache !== null })
  if ('continuation' in prepared) return continuation(gateway, kind, prepared.parameters, prepared.continuation, prepared.echo)
  const { parameters, prompt, echo, input } = prepared
  return {
    kind,
    parameters,
    prompt,
    body: echo ?? {},
    history: [],
    input,
    storing: kind === 'responses' && store !== null && input !== undefined,
  }
}

/**
 * A parsed body. `previous`: the response it continues, where the caller found it (a WebSocket connection's
 * latest); `offLoop`: render in a worker (where there are workers).
 */
export async function prepareBody(
  gateway: Gateway,
  kind: ApiKind,
  body: Item,
  previous: StoredResponse | null = null,
  offLoop = false,
): Promise<Prepared> {
  return withCheckableSchemas(await prepareParsed(gateway, kind, body, previous, offLoop))
}

async function prepareParsed(
  gateway: Gateway,
  kind: ApiKind,
  body: Item,
  previous: StoredResponse | null,
  offLoop: boolean,
): Promise<Prepared> {
  const parameters = (kind === 'chat' ? chatGenerationParameters : responsesGenerationParameters)(body, gateway.parameterOptions)
  const mcp = kind === 'responses' ? await withMcpServers(gateway, body) : null
  const echo = mcp?.echo ?? body
  try {
    const continuing = continues(gateway, kind, body)
    // The client's approvals are answered (the calls run) before anything is rendered; the response they continue
    // is read once, for its approval requests and for the continuation.
    const id = body.previous_response_id
    const found = mcp !== null && continuing && previous === null && id != null ? await previousFor(gateway, String(id)) : previous
    const answered = mcp === null ? null : await answerApprovals(mcp.render, mcp.servers, found)
    const rendering = answered?.body ?? body
    const prepared: Prepared = continuing
      ? await continuation(gateway, kind, parameters, rendering, echo, found)
      : {
          kind,
          parameters,
          prompt: offLoop ? await renderOffLoop(gateway, kind, rendering) : renderHere(gateway, kind, rendering),
          body: echo,
          history: [],
          // Approvals as the calls' results they became: what a continuation re-renders.
          input: rendering.input,
          storing: kind === 'responses' && gateway.store !== null && body.store !== false,
        }
    if (mcp !== null) prepared.mcp = mcp.servers
    if (answered !== null && answered.approved.length > 0) prepared.mcpApproved = answered.approved
    return prepared
  } catch (error) {
    await Promise.all(mcp?.servers.map((server) => server.close()) ?? [])
    throw error
  }
}

function continuation(
  gateway: Gateway,
  kind: ApiKind,
  parameters: GenerationParameters,
  body: Item,
  echo: object | undefined,
  previous: StoredResponse | null = null,
): Promise<Prepared> {
  if (kind === 'chat') return exactChat(gateway, parameters, body)
  return continued(gateway, parameters, body, echo ?? body, previous)
}

/**
 * The request's schemas (its response format, its strict tools' parameters), compiled now by the validator the
 * adapters check the answer with: a schema that cannot be checked is a 400 naming it before anything is
 * generated, not a note after the answer.
 */
function withCheckableSchemas(prepared: Prepared): Prepared {
  const { responseFormat, argumentSchemas } = prepared.prompt
  if (responseFormat !== undefined) {
    const problem = schemaCompileProblem(responseFormat.schema)
    const param = prepared.kind === 'chat' ? 'response_format.json_schema.schema' : 'text.format.schema'
    if (problem !== null) throw new HttpError(400, `${param} cannot be checked: ${problem}`, { param, code: 'invalid-parameter' })
  }
  for (const { name, schema } of argumentSchemas ?? []) {
    const problem = schema === null ? null : schemaCompileProblem(schema)
    if (problem !== null)
      throw new HttpError(400, `tools: the parameters of function '${name}' cannot be checked: ${problem}`, {
        param: 'tools',
        code: 'invalid-parameter',
      })
  }
  return prepared
}
