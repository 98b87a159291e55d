/**
 * The one pipeline every face runs over HTTP: prepare → generate → respond (one JSON object, or SSE) → keep.
 * What differs between the APIs is in their `Face`; what a background run or a WebSocket turn does differently
 * is in their folders, on the same steps.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'

import { collectSteps } from '../../engines/steps'
import type { EngineStep } from '../../engines/types'
import { engineAborted } from '../../http/errors'
import { type PipeSseResult, pipeSse, type SseAdapter } from '../../http/sse'
import type { AdapterDiagnostic } from '../../wire/adapter'
import type { EngineTrail } from '../observe/engine-trail'
import { noteDiagnostics } from '../observe/request-log'
import { inSpan } from '../observe/tracing'
import type { Gateway } from './context'
import type { Face } from './face'
import { admit, generate } from './generate'
import { type Prepared, releasePrepared } from './prepared'
import { sendJson } from './send'

/** A whole answer's steps collected into one; an engine request that was aborted is a 502. */
async function collectAnswer(steps: AsyncIterable<EngineStep>): Promise<EngineStep> {
  const whole = await collectSteps(steps)
  if (whole.finishReason === 'abort') throw engineAborted()
  return whole
}

/**
 * What the parser and the adapter said of a generation's output, told to the gateway (`onDiagnostic`, the
 * metrics) each with the engine whose output it is about (`served`), and counted in the request's line.
 */
export function tellDiagnostics(
  gateway: Gateway,
  request: IncomingMessage | null,
  diagnostics: readonly AdapterDiagnostic[],
  served: EngineTrail,
): void {
  if (diagnostics.length === 0) return
  for (const diagnostic of served.withEngines(diagnostics)) gateway.onDiagnostic(diagnostic)
  noteDiagnostics(request, diagnostics)
}

/** The non-streaming adapters return diagnostics beside the wire object. */
function withoutDiagnostics<T>(
  { diagnostics, ...wire }: T & { diagnostics: AdapterDiagnostic[] },
  gateway: Gateway,
  request: IncomingMessage | null,
  served: EngineTrail,
): T {
  tellDiagnostics(gateway, request, diagnostics, served)
  return wire as T
}

/** Counts how a stream ended; its failure and what the parser recovered from go to the gateway's log. */
function report(gateway: Gateway, request: IncomingMessage, result: PipeSseResult, adapter: SseAdapter, served: EngineTrail): void {
  if (result.outcome === 'failed') gateway.onError(result.error)
  gateway.outcomes[result.outcome === 'client-closed' ? 'clientClosed' : result.outcome]++
  tellDiagnostics(gateway, request, adapter.diagnostics, served)
}

/** An AbortController aborted when the client goes away before the response is complete. */
function abortOnClose(response: ServerResponse): AbortController {
  const abort = new AbortController()
  response.once('close', () => {
    if (!response.writableFinished) abort.abort()
  })
  return abort
}

/** The header that lists what a request asked for and gpt-oss could not do (`RenderedPrompt.notApplied`). */
const NOT_APPLIED_HEADER = 'x-harmony-not-applied'

/**
 * Says what preparing found to say of the request (`prepared.noted`: a `prompt-re-rendered`), and what it asked
 * for that was taken but not applied: each as a `not-applied` diagnostic, with their fields in the answer's
 * `x-harmony-not-applied` header, where a client can see them. All go to the gateway (`onDiagnostic`, the
 * metrics) and the request's log line. They are about the request, no engine's output: told without an engine
 * (the metrics' `none`).
 */
export function reportPrepared(gateway: Gateway, prepared: Prepared, response: ServerResponse | null): void {
  const notApplied = prepared.prompt.notApplied ?? []
  const diagnostics = [
    ...(prepared.noted ?? []),
    ...notApplied.map(({ param, note }) => ({ code: 'not-applied', message: `${param}: ${note}` })),
  ]
  if (diagnostics.length === 0) return
  for (const diagnostic of diagnostics) gateway.onDiagnostic(diagnostic)
  noteDiagnostics(response?.req ?? null, diagnostics)
  if (notApplied.length > 0) response?.setHeader(NOT_APPLIED_HEADER, notApplied.map(({ param }) => param).join(', '))
}

/** request → parameters and prompt → engine → the face's adapter → SSE (or one JSON object) → kept. */
export async function serveFace<G extends Gateway, O, A extends object, D extends SseAdapter>(
  face: Face<G, O, A, D>,
  gateway: G,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  const prepared = await inSpan('prepare', () => face.prepare(gateway, request))
  try {
    await servePrepared(face, gateway, request, response, prepared)
  } catch (error) {
    await releasePrepared(prepared)
    throw error
  }
}

async function servePrepared<G extends Gateway, O, A extends object, D extends SseAdapter>(
  face: Face<G, O, A, D>,
  gateway: G,
  request: IncomingMessage,
  response: ServerResponse,
  prepared: Prepared,
): Promise<void> {
  reportPrepared(gateway, prepared, response)
  const options = face.options(gateway, prepared, request)
  // The answer's built-in tools: its calls run on them, and its citations name their pages.
  const tools = face.tools?.(gateway, prepared, options) ?? null
  if (face.detached !== undefined && (await face.detached(gateway, request, response, prepared, options, tools))) return
  const abort = abortOnClose(response)
  const keeps = face.keeps(gateway, prepared)
  const generated: number[] = []
  const { steps, served } = generate(gateway, request, prepared, abort.signal, keeps ? generated : null, await admit(gateway), tools)
  if (!prepared.parameters.stream) {
    const answer = withoutDiagnostics(face.whole(await collectAnswer(steps), options), gateway, request, served)
    // An answer the store could not keep says so.
    if (keeps && !(await face.keep(gateway, answer, prepared, generated))) face.unkept?.({ answer })
    return sendJson(response, 200, answer)
  }
  const adapter = face.stream(options, prepared)
  // Kept before the closing events (a Responses `response.completed` then says `store: true`, or false when the
  // store fails; the Chat id cache holds the ids before the client can send its next turn); a stream that fails
  // or is left is kept as it stands after.
  let kept = false
  const keep = async () => {
    kept = true
    if (!(await face.keep(gateway, face.answer(adapter), prepared, generated))) face.unkept?.({ adapter })
  }
  const { frames, coalesceMs } = gateway
  const result = await pipeSse(response, adapter, steps, { abort, frames, coalesceMs, ...(keeps ? { beforeConclude: keep } : {}) })
  report(gateway, request, result, adapter, served)
  if (keeps && !kept) await face.keep(gateway, face.answer(adapter), prepared, generated)
}
