/**
 * The one pipeline every face runs over HTTP: prepare → generate → respond (one JSON object, or SSE) → keep.
 * What differs between the APIs is in their `Face`; what a background run or a WebSocket turn does differently
 * is in their folders, on the same steps.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'

import { collectSteps } from '../../engines/steps'
import type { EngineStep } from '../../engines/types'
import { engineAborted, HttpError } from '../../http/errors'
import { type PipeSseResult, pipeChoicesSse, pipeSse, type SseAdapter } from '../../http/sse'
import type { AdapterDiagnostic } from '../../wire/adapter'
import type { EngineTrail } from '../observe/engine-trail'
import { noteDiagnostics } from '../observe/request-log'
import { inSpan } from '../observe/tracing'
import type { ToolCaller } from '../tools/loop'
import { beginTurn } from './begin-budget'
import { type Gateway, writeBound } from './context'
import type { Choices, Face } from './face'
import { admit, admitChoices, generate } from './generate'
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

/**
 * Counts how a stream ended; its failure and what the parser recovered from (each choice's, under the engines of
 * its own generation) go to the gateway's log.
 */
function report(
  gateway: Gateway,
  request: IncomingMessage,
  result: PipeSseResult,
  choices: readonly { adapter: SseAdapter; served: EngineTrail }[],
): void {
  if (result.outcome === 'failed') gateway.onError(result.error)
  gateway.outcomes[result.outcome === 'client-closed' ? 'clientClosed' : result.outcome]++
  for (const { adapter, served } of choices) tellDiagnostics(gateway, request, adapter.diagnostics, served)
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
  // A burst of requests is begun a few a turn, so that the first ones' answers go out while the rest wait.
  const due = beginTurn(gateway)
  if (due !== null) await due
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
  if (prepared.parameters.n > 1) {
    // Only a face that answers several choices reads a request that asks for them (Chat's `n`).
    if (face.choices === undefined) throw new HttpError(400, 'n must be 1 here', { param: 'n', code: 'invalid-parameter' })
    return serveChoices(face, face.choices, gateway, request, response, prepared, options, tools)
  }
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
  const result = await pipeSse(response, adapter, steps, {
    abort,
    frames,
    coalesceMs,
    ...writeBound(gateway),
    ...(keeps ? { beforeConclude: keep } : {}),
  })
  report(gateway, request, result, [{ adapter, served }])
  if (keeps && !kept) await face.keep(gateway, face.answer(adapter), prepared, generated)
}

/**
 * A request of several choices (Chat's `n`): `n` generations of the one prompt, started at once, each admitted
 * as a generation, seeded apart (`generate`'s `choice`), read by an adapter of its own and kept on its own (the
 * Chat id cache remembers each choice's calls with the ids it generated, so that whichever choice the client
 * goes on with is prompted exactly). Streamed, their chunks interleave as they come (`pipeChoicesSse`); whole,
 * the answers are merged in index order. One that fails ends them all: the request's abort ends the others'
 * engine requests.
 */
async function serveChoices<G extends Gateway, O, A extends object, D extends SseAdapter>(
  face: Face<G, O, A, D>,
  choices: Choices<O, A, D>,
  gateway: G,
  request: IncomingMessage,
  response: ServerResponse,
  prepared: Prepared,
  options: O,
  tools: ToolCaller | null,
): Promise<void> {
  const { n } = prepared.parameters
  const grants = await admitChoices(gateway, n)
  const abort = abortOnClose(response)
  const keeps = face.keeps(gateway, prepared)
  const generated = grants.map((): number[] => [])
  const generations = grants.map((grant, i) =>
    generate(gateway, request, prepared, abort.signal, keeps ? generated[i]! : null, grant, tools, i),
  )
  if (!prepared.parameters.stream) {
    const collecting = generations.map((choice) => collectAnswer(choice.steps))
    let wholes: EngineStep[]
    try {
      wholes = await Promise.all(collecting)
    } catch (error) {
      // The others are of no use now: their engine requests end, their failures (the abort's) are not the answer.
      abort.abort()
      for (const choice of collecting) choice.catch(() => {})
      throw error
    }
    const answers = wholes.map((whole, i) => withoutDiagnostics(choices.whole(whole, options, i), gateway, request, generations[i]!.served))
    if (keeps) for (const [i, answer] of answers.entries()) await face.keep(gateway, answer, prepared, generated[i]!)
    return sendJson(response, 200, choices.merge(answers))
  }
  const adapters = generations.map((_, i) => choices.stream(options, prepared, i))
  // Each choice kept before its closing events, as one answer is (`servePrepared`), and as it stands when the
  // stream failed or was left before.
  const kept = adapters.map(() => false)
  const keep = (i: number) => async () => {
    kept[i] = true
    await face.keep(gateway, face.answer(adapters[i]!), prepared, generated[i]!)
  }
  const { frames, coalesceMs } = gateway
  const result = await pipeChoicesSse(
    response,
    adapters.map((adapter, i) => ({ adapter, steps: generations[i]!.steps, ...(keeps ? { beforeConclude: keep(i) } : {}) })),
    { abort, frames, coalesceMs, ...writeBound(gateway), closingSse: () => choices.closingSse(adapters, prepared) },
  )
  report(
    gateway,
    request,
    result,
    adapters.map((adapter, i) => ({ adapter, served: generations[i]!.served })),
  )
  if (keeps)
    for (const [i, adapter] of adapters.entries()) if (!kept[i]) await face.keep(gateway, face.answer(adapter), prepared, generated[i]!)
}
