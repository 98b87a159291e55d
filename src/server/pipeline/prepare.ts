/**
 * Step one of every request: its generation parameters and its prompt (`Prepared`). A small body is read,
 * parsed and rendered here; a large one (over `renderInlineBytes`, with render workers) is handed to a worker
 * as bytes, so neither JSON.parse nor BPE of it holds the event loop. Either way one classifier
 * (`isContinuation`) decides whether the request continues what the gateway holds, and such a request is
 * rendered after it by its face (`Preparing.continued`): the two paths give one result type.
 */
import type { IncomingMessage } from 'node:http'
import { parseJsonBody, readJsonBytes } from '../../http/body'
import { HttpError } from '../../http/errors'
import type { GenerationParameters } from '../../http/validate'
import { schemaCompileProblem } from '../../wire/schema-check'
import type { Gateway } from './context'
import { type ApiKind, type Item, type Prepared, releasePrepared } from './prepared'

/** How a face prepares its requests, for the one reader of bodies (inline or in a worker). */
export interface Preparing<G extends Gateway> {
  kind: ApiKind
  /** A parsed body (`offLoop`: render it in a worker, where there are workers). */
  parsed(gateway: G, body: Item, offLoop: boolean): Promise<Prepared>
  /** A body a worker found to continue what the gateway holds, rendered here after what it continues. */
  continued(gateway: G, parameters: GenerationParameters, body: Item, echo: object | undefined): Promise<Prepared>
  /** A worker hands back the request's input (what a kept answer or a continuation needs). */
  keepsInput(gateway: G): boolean
  /** Bodies are parsed on the event loop whatever their size (what reading them needs is here). */
  parsesHere?(gateway: G): boolean
  /** Whether a new (not continuing) request's answer is to be kept. */
  storing(gateway: G, input: unknown): boolean
}

/** The request as it comes over HTTP. */
export async function prepareRequest<G extends Gateway>(gateway: G, preparing: Preparing<G>, request: IncomingMessage): Promise<Prepared> {
  return checkedSchemas(await readAndPrepare(gateway, preparing, request))
}

/** `withCheckableSchemas`, and what the request holds open (its MCP connections) closed when they cannot be checked. */
export async function checkedSchemas(prepared: Prepared): Promise<Prepared> {
  try {
    return withCheckableSchemas(prepared)
  } catch (error) {
    await releasePrepared(prepared)
    throw error
  }
}

async function readAndPrepare<G extends Gateway>(gateway: G, preparing: Preparing<G>, request: IncomingMessage): Promise<Prepared> {
  const { workers, bodyLimit, renderInlineBytes } = gateway
  const { kind } = preparing
  // Sized as read, not by its content-length: a compressed body is parsed at its inflated size.
  const bytes = await readJsonBytes(request, { limit: bodyLimit })
  if (workers === null || preparing.parsesHere?.(gateway) === true || bytes.length <= renderInlineBytes)
    return preparing.parsed(gateway, parseJsonBody(bytes), false)
  // The body stays in the worker; for Responses its echo comes back (what the response object says of it),
  // and its input when it is to be kept. A continuation comes back whole, to be rendered here after what it continues.
  const prepared = await workers.prepare(kind, bytes, { keepInput: preparing.keepsInput(gateway) })
  if ('continuation' in prepared) return preparing.continued(gateway, prepared.parameters, prepared.continuation, prepared.echo)
  const { parameters, prompt, echo, input } = prepared
  return {
    kind,
    parameters,
    prompt,
    body: echo ?? {},
    history: [],
    input,
    storing: input !== undefined && preparing.storing(gateway, input),
  }
}

/**
 * The request's schemas (its response format, its strict tools' parameters), compiled now by the validator the
 * adapters check the answer with: a schema that cannot be checked is a 400 naming it before anything is
 * generated, not a note after the answer.
 */
export function withCheckableSchemas(prepared: Prepared): Prepared {
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
