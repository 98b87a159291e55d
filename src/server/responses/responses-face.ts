/**
 * The Responses API (`POST /v1/responses`, and the routes of kept responses) as a face of the one pipeline: a
 * response gets its id here, says whether it is kept, follows the dialect asked for, runs its built-in tools,
 * and is kept with every id a continuation needs before `response.completed` says so.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'

import { isRecord } from '../../base/records'
import { HttpError } from '../../http/errors'
import { nearestEffort } from '../../render/index'
import {
  type ResponseObject,
  type ResponsesAdapterOptions,
  type ResponsesDialect,
  ResponsesStream,
  responseObject,
} from '../../wire/responses'
import { splitRecipient } from '../../wire/routing'
import { mayEndWithCalls, rememberCalls } from '../pipeline/answering-calls'
import type { Face, Feature } from '../pipeline/face'
import { prepareRequest } from '../pipeline/prepare'
import type { Prepared } from '../pipeline/prepared'
import { methodNotAllowed, sendJson } from '../pipeline/send'
import { serveFace } from '../pipeline/serve-face'
import { storedResponseRoute } from './conversation'
import { INPUT_TOKENS_ROUTES } from './input-tokens'
import { endingCalls, keepAnswer } from './keep'
import { responsesPreparing } from './prepare-responses'
import { toolsOfResponse } from './response-tools'
import type { ReasoningSummaryRule, ResponsesGateway } from './responses-gateway'
import { reasoningSealer } from './sealed-reasoning'

/** What the adapter is told of the tools the gateway runs for this response (gpt-oss's own, MCP servers). */
function builtinToolOptions({ prompt, mcp, mcpApproved, body }: Prepared): Partial<ResponsesAdapterOptions> {
  if (prompt.builtinTools === undefined && mcp === undefined) return {}
  const servers = mcp ?? []
  const byLabel = new Map(servers.map((server) => [server.label, server]))
  return {
    builtinTools: 'run',
    codeInterpreterOutputs: includes(body, 'code_interpreter_call.outputs'),
    ...(servers.length === 0
      ? {}
      : {
          runNamespaces: servers.map((server) => server.label),
          mcpListTools: servers.map((server) => ({ server_label: server.label, tools: server.tools })),
          ...(mcpApproved === undefined ? {} : { mcpApproved }),
          needsApproval: (tool: string) => {
            const called = splitRecipient(tool)
            return called !== null && (byLabel.get(called.namespace)?.needsApproval(called.name) ?? false)
          },
        }),
  }
}

/** Whether a Responses request's `include` asks for `what`. */
function includes(body: object, what: string): boolean {
  const include = (body as { include?: unknown }).include
  return Array.isArray(include) && include.includes(what)
}

/**
 * The Responses dialect of a request: the specification's when it sends an `OpenResponses-Version` header (the
 * header its own examples send: openresponses/openresponses bin/generate_curl_snippets.py; the specification
 * itself defines none), else the gateway's.
 */
function dialectOf(gateway: ResponsesGateway, request: IncomingMessage | null): ResponsesDialect {
  return request?.headers['openresponses-version'] === undefined ? gateway.responsesDialect : 'open-responses'
}

/** Whether a Responses request's reasoning items carry summaries: by the gateway's rule, or asked (`reasoning.summary`). */
function givesSummary(rule: ReasoningSummaryRule, body: object): boolean {
  if (rule !== 'asked') return rule === 'always'
  const reasoning = (body as { reasoning?: unknown }).reasoning
  if (!isRecord(reasoning)) return false
  const asked = reasoning.summary ?? reasoning.generate_summary
  return asked === 'auto' || asked === 'concise' || asked === 'detailed'
}

/**
 * What a response echoes of its request, with the reasoning effort it ran at where that differs from the one
 * asked for (`minimal` runs as `low`): the object says what was done, as `x-harmony-not-applied` says why.
 */
function withEffortRun(body: object): object {
  const reasoning = (body as { reasoning?: unknown }).reasoning
  const ran = isRecord(reasoning) ? nearestEffort(reasoning.effort) : undefined
  return ran === undefined ? body : { ...body, reasoning: { ...(reasoning as object), effort: ran } }
}

/**
 * The adapter's options for a prepared request: a new `resp_` id, whether it is kept, the dialect the gateway or
 * the request's `OpenResponses-Version` header asks for (a WebSocket turn: its upgrade request's; null: none).
 */
export function responsesOptions(gateway: ResponsesGateway, prepared: Prepared, request: IncomingMessage | null): ResponsesAdapterOptions {
  const { parameters, prompt, storing, body } = prepared
  const dialect = dialectOf(gateway, request)
  return {
    model: parameters.model,
    id: `resp_${randomUUID().replaceAll('-', '')}`,
    stored: storing,
    inputTokens: prompt.promptTokens,
    request: withEffortRun(body),
    ...(prompt.responseFormat === undefined ? {} : { responseFormat: prompt.responseFormat }),
    ...(prompt.argumentSchemas === undefined ? {} : { argumentSchemas: prompt.argumentSchemas }),
    ...(prompt.functions === undefined ? {} : { tools: prompt.functions }),
    ...(parameters.logprobs === undefined ? {} : { logprobs: true }),
    ...(parameters.encryptedReasoning ? { sealReasoning: reasoningSealer(gateway) } : {}),
    ...(givesSummary(gateway.reasoningSummary, body) ? { reasoningSummary: true } : {}),
    ...(dialect === 'openai' ? {} : { dialect }),
    ...builtinToolOptions(prepared),
    parser: { implementation: gateway.implementation, toolNames: prompt.toolNames },
  }
}

const responsesFace: Face<ResponsesGateway, ResponsesAdapterOptions, ResponseObject, ResponsesStream> = {
  prepare: (gateway, request) => prepareRequest(gateway, responsesPreparing, request),
  options: responsesOptions,
  tools: toolsOfResponse,
  async detached(gateway, request, response, prepared, options, tools) {
    if (!prepared.parameters.background) return false
    if (!prepared.storing || gateway.detach === null)
      throw new HttpError(400, 'background needs a gateway that keeps responses', { param: 'background', code: 'invalid-parameter' })
    await gateway.detach(gateway, request, response, prepared, options, tools)
    return true
  },
  stream: (options) => new ResponsesStream(options),
  whole: (step, options) => responseObject(step, options),
  answer: (adapter) => adapter.response(),
  keeps: (gateway, prepared) => prepared.storing || prepared.conversation !== undefined || mayEndWithCalls(gateway, prepared),
  async keep(gateway, object, prepared, generated) {
    const kept = await keepAnswer(gateway, object, prepared, generated)
    await rememberCalls(gateway, endingCalls(object), prepared, generated)
    return kept
  },
  unkept(kept) {
    if ('adapter' in kept) kept.adapter.unstore()
    else kept.answer.store = false
  },
}

export const responsesFeature: Feature<ResponsesGateway> = {
  routes: {
    '/v1/responses': { POST: (gateway, request, response) => serveFace(responsesFace, gateway, request, response) },
    ...INPUT_TOKENS_ROUTES,
  },
  // `GET`/`DELETE /v1/responses/{id}` and `GET …/input_items`: the kept responses.
  async idRoutes(gateway, request, response, url) {
    const stored = gateway.store === null ? null : await storedResponseRoute(gateway.store, request.method ?? 'GET', url)
    if (stored === null) return false
    if (stored.status === 405) throw methodNotAllowed(response, url.pathname, request.method, stored.allow ?? 'GET')
    sendJson(response, stored.status, stored.body)
    return true
  },
  label(path) {
    const id = /^\/v1\/responses\/[^/]+(\/cancel|\/input_items)?$/.exec(path)
    return id === null ? null : `/v1/responses/{id}${id[1] ?? ''}`
  },
}
