/**
 * The gateway's side of the call id cache (call-ids.ts), for every face: after an answer that ended with tool
 * calls, the ids behind it are remembered; a request that answers them is prompted with those ids where they
 * fit, and with its re-render where they do not, which is counted (`harmony_exact_prompts_total{face,outcome}`)
 * and said (a `prompt-re-rendered` diagnostic naming why).
 */
import type { RenderedPrompt } from '../../render/index'
import type { SentCall } from './call-ids'
import type { Gateway, GatewayDiagnostic } from './context'
import type { Prepared } from './prepared'

/** The faces that answer tool calls, as the metric labels them. */
export type CallingFace = 'chat' | 'messages' | 'responses'

const WHY: Readonly<Record<'not-found' | 'changed', string>> = {
  'not-found': 'the gateway does not hold the ids behind these calls (not its own, or evicted or expired)',
  changed: 'the history before the calls is not what the ids were generated after (instructions, tools or messages changed)',
}

/**
 * The prompt of a request (`rendered`: its re-render) whose history ends with `calls` followed by their results
 * only; `renderWithout`: the re-render of its history without those results. With it, what to say of the request
 * (`noted`: a `prompt-re-rendered` when it is not exact), said with the rest of what its preparing noted
 * (`Prepared.noted`, serve-face.ts `reportPrepared`) where the request's log line is at hand.
 */
export async function promptAnswering(
  gateway: Gateway,
  face: CallingFace,
  calls: readonly SentCall[],
  rendered: RenderedPrompt,
  renderWithout: () => RenderedPrompt | Promise<RenderedPrompt>,
): Promise<{ prompt: RenderedPrompt; noted: GatewayDiagnostic[] }> {
  if (gateway.callIds === null) return { prompt: rendered, noted: [] }
  const { prompt, outcome } = await gateway.callIds.exactPrompt(calls, gateway.caller?.name ?? null, rendered, renderWithout)
  gateway.meters?.exactPrompt(face, outcome)
  if (outcome === 'exact') return { prompt: prompt ?? rendered, noted: [] }
  const message = `a ${face} request answering tool call ${calls[0]?.id ?? ''} is prompted with its re-render: ${WHY[outcome]}`
  return { prompt: prompt ?? rendered, noted: [{ code: 'prompt-re-rendered', message }] }
}

/**
 * Whether an answer to `prepared` may end with calls a client answers: the cache is on and the request offered
 * functions. Only then are the generated ids collected for it (a step each on the hot path).
 */
export function mayEndWithCalls(gateway: Gateway, prepared: Prepared): boolean {
  return gateway.callIds !== null && prepared.prompt.toolNames.length > 0
}

/**
 * Remembers the ids behind an answer that ended with `calls` (as the client will send them back). What the
 * cache could not keep costs the next request its exact prompt, never this answer: a failure is logged.
 */
export async function rememberCalls(gateway: Gateway, calls: readonly SentCall[], prepared: Prepared, generated: number[]): Promise<void> {
  if (gateway.callIds === null || calls.length === 0) return
  try {
    await gateway.callIds.remember(calls, gateway.caller?.name ?? null, {
      prompt: prepared.prompt.tokens,
      output: generated,
      ...(prepared.rendered === undefined ? {} : { rendered: prepared.rendered.tokens }),
    })
  } catch (error) {
    gateway.onError(error)
  }
}
