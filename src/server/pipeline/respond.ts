/**
 * `POST /v1/chat/completions` and `POST /v1/responses`: prepare → generate → respond (one JSON object, or SSE)
 * → keep. The two APIs differ only in their adapter and in what is kept after.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'

import { isRecord } from '../../base/records'
import { collectSteps } from '../../engines/steps'
import type { EngineStep } from '../../engines/types'
import { engineAborted } from '../../http/errors'
import { type PipeSseResult, pipeSse, type SseAdapter } from '../../http/sse'
import { nearestEffort } from '../../render/index'
import type { AdapterDiagnostic } from '../../wire/adapter'
import { type ChatAdapterOptions, ChatCompletionsStream, chatCompletion } from '../../wire/chat'
import { type ResponsesAdapterOptions, type ResponsesDialect, ResponsesStream, responseObject } from '../../wire/responses'
import { splitRecipient } from '../../wire/routing'
import { serveBackground } from '../background/detached'
import { rememberChat } from '../chat/exact-tool-loop'
import { noteDiagnostics } from '../observe/request-log'
import { inSpan } from '../observe/tracing'
import { keepResponse } from '../responses/keep'
import { sealReasoning } from '../responses/sealed-reasoning'
import { toolsOfResponse } from '../tools/response-tools'
import type { Gateway } from './context'
import { admit, generate } from './generate'
import type { ReasoningSummaryRule } from './options'
import { prepareRequest } from './prepare'
import type { ApiKind, Prepared } from './prepared'
import { sendJson } from './send'

/**
 * The adapter's options for a prepared request (a Responses one gets its id here, says whether it is kept, and
 * follows the dialect the gateway or the request's `OpenResponses-Version` header asks for).
 */
export function adapterOptions(
  gateway: Gateway,
  prepared: Prepared,
  request: IncomingMessage,
): ChatAdapterOptions & ResponsesAdapterOptions {
  const { parameters, prompt, storing, body, kind } = prepared
  const dialect = kind === 'responses' ? dialectOf(gateway, request) : 'openai'
  return {
    model: parameters.model,
    ...(kind === 'responses'
      ? { id: `resp_${randomUUID().replaceAll('-', '')}`, stored: storing, inputTokens: prompt.promptTokens, request: withEffortRun(body) }
      : { promptTokens: prompt.promptTokens, ...(parameters.stop === undefined ? {} : { stop: parameters.stop }) }),
    ...(prompt.responseFormat === undefined ? {} : { responseFormat: prompt.responseFormat }),
    ...(prompt.argumentSchemas === undefined ? {} : { argumentSchemas: prompt.argumentSchemas }),
    ...(parameters.logprobs === undefined ? {} : { logprobs: true }),
    ...(parameters.encryptedReasoning ? { sealReasoning: reasoningSealer(gateway) } : {}),
    ...(kind === 'responses' && givesSummary(gateway.reasoningSummary, body) ? { reasoningSummary: true } : {}),
    ...(dialect === 'openai' ? {} : { dialect }),
    ...builtinToolOptions(prepared),
    parser: { implementation: gateway.implementation, toolNames: prompt.toolNames },
  }
}

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
function dialectOf(gateway: Gateway, request: IncomingMessage): ResponsesDialect {
  return request.headers['openresponses-version'] === undefined ? gateway.responsesDialect : 'open-responses'
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

/** Seals reasoning with the gateway's key, for the request's caller (null: over the seal's bounds). */
export function reasoningSealer(gateway: Gateway): (text: string) => string | null {
  return (text) => sealReasoning(gateway.compactor.sealer, text, gateway.caller?.name ?? null)
}

/** A whole answer's steps collected into one; an engine request that was aborted is a 502. */
export async function collectAnswer(steps: AsyncIterable<EngineStep>): Promise<EngineStep> {
  const whole = await collectSteps(steps)
  if (whole.finishReason === 'abort') throw engineAborted()
  return whole
}

/** The non-streaming adapters return diagnostics beside the wire object. */
export function withoutDiagnostics<T>(
  { diagnostics, ...wire }: T & { diagnostics: AdapterDiagnostic[] },
  gateway: Gateway,
  request: IncomingMessage,
): T {
  diagnostics.forEach(gateway.onDiagnostic)
  noteDiagnostics(request, diagnostics)
  return wire as T
}

/** Counts how a stream ended; its failure and what the parser recovered from go to the gateway's log. */
export function report(gateway: Gateway, request: IncomingMessage, result: PipeSseResult, adapter: SseAdapter): void {
  if (result.outcome === 'failed') gateway.onError(result.error)
  gateway.outcomes[result.outcome === 'client-closed' ? 'clientClosed' : result.outcome]++
  adapter.diagnostics.forEach(gateway.onDiagnostic)
  noteDiagnostics(request, adapter.diagnostics)
}

/** An AbortController aborted when the client goes away before the response is complete. */
export function abortOnClose(response: ServerResponse): AbortController {
  const abort = new AbortController()
  response.once('close', () => {
    if (!response.writableFinished) abort.abort()
  })
  return abort
}

/** The header that lists what a request asked for and gpt-oss could not do (`RenderedPrompt.notApplied`). */
const NOT_APPLIED_HEADER = 'x-harmony-not-applied'

/**
 * Says what the request asked for that was taken but not applied: each as a `not-applied` diagnostic (the log),
 * and their fields in the answer's `x-harmony-not-applied` header, where a client can see them.
 */
export function reportNotApplied(gateway: Gateway, prepared: Prepared, response: ServerResponse | null): void {
  const notApplied = prepared.prompt.notApplied
  if (notApplied === undefined) return
  const diagnostics = notApplied.map(({ param, note }) => ({ code: 'not-applied', message: `${param}: ${note}` }))
  diagnostics.forEach(gateway.onDiagnostic)
  noteDiagnostics(response?.req ?? null, diagnostics)
  response?.setHeader(NOT_APPLIED_HEADER, notApplied.map(({ param }) => param).join(', '))
}

/** request → parameters and prompt → engine → adapter → SSE (or one JSON object) → kept. */
export async function serveGeneration(gateway: Gateway, kind: ApiKind, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const prepared = await inSpan('prepare', () => prepareRequest(gateway, kind, request))
  try {
    await servePrepared(gateway, kind, request, response, prepared)
  } catch (error) {
    // A response that never generated (a 429, a failing engine) never ended its MCP connections.
    await Promise.all(prepared.mcp?.map((server) => server.close()) ?? [])
    throw error
  }
}

async function servePrepared(
  gateway: Gateway,
  kind: ApiKind,
  request: IncomingMessage,
  response: ServerResponse,
  prepared: Prepared,
): Promise<void> {
  reportNotApplied(gateway, prepared, response)
  const { parameters, storing } = prepared
  const options = adapterOptions(gateway, prepared, request)
  // The response's built-in tools: its calls run on them, and its answer's citations name their pages.
  const tools = toolsOfResponse(gateway, prepared, options)
  if (parameters.background) return serveBackground(gateway, request, response, prepared, options, tools)
  const abort = abortOnClose(response)
  const remembering = kind === 'chat' && gateway.chatIdCache !== null
  const generated: number[] | null = storing || remembering ? [] : null
  const steps = generate(gateway, request, prepared, abort.signal, generated, await admit(gateway), tools)
  if (!parameters.stream) {
    const whole = await collectAnswer(steps)
    if (kind === 'chat') {
      const completion = withoutDiagnostics(chatCompletion(whole, options), gateway, request)
      if (remembering) await rememberChat(gateway, completion, prepared, generated ?? [])
      return sendJson(response, 200, completion)
    }
    const object = withoutDiagnostics(responseObject(whole, options), gateway, request)
    // A response the store could not keep says so.
    if (storing && !(await keepResponse(gateway, object, prepared, generated ?? []))) object.store = false
    return sendJson(response, 200, object)
  }
  const { frames, coalesceMs } = gateway
  if (kind === 'chat') {
    const adapter = new ChatCompletionsStream({ ...options, includeUsage: parameters.includeUsage })
    report(gateway, request, await pipeSse(response, adapter, steps, { abort, frames, coalesceMs }), adapter)
    if (remembering) await rememberChat(gateway, adapter.completion(), prepared, generated ?? [])
    return
  }
  const adapter = new ResponsesStream(options)
  // Kept before `response.completed` says `store: true` (or, when the store fails, that event says false); a
  // stream that fails or is left is kept as it stands after.
  let kept = false
  const keep = async () => {
    kept = true
    if (!(await keepResponse(gateway, adapter.response(), prepared, generated ?? []))) adapter.unstore()
  }
  const beforeConclude = storing ? { beforeConclude: keep } : {}
  report(gateway, request, await pipeSse(response, adapter, steps, { abort, frames, coalesceMs, ...beforeConclude }), adapter)
  if (storing && !kept) await keepResponse(gateway, adapter.response(), prepared, generated ?? [])
}
