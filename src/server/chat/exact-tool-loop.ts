/**
 * Chat with a `ChatIdCache`: a request answering tool calls this gateway returned is prompted with the ids the
 * engine saw and generated (where the cache has them and the check holds), else with its re-render; after a
 * completion that ended with tool calls, the cache keeps what the next such request needs.
 */

import type { GenerationParameters } from '../../http/validate'
import type { ChatCompletion } from '../../wire/chat'
import type { Gateway } from '../pipeline/context'
import { type Item, type Prepared, renderOffLoop } from '../pipeline/prepared'

/** A Chat request continuing this gateway's tool calls: its re-render, or the ids the engine saw and generated for it. */
export async function exactChat(gateway: Gateway, parameters: GenerationParameters, body: Item): Promise<Prepared> {
  const render = (request: Item) => renderOffLoop(gateway, 'chat', request)
  const rendered = await render(body)
  const exact = (await gateway.chatIdCache?.exactPrompt(body, rendered, render)) ?? null
  return { kind: 'chat', parameters, prompt: exact ?? rendered, rendered, body, history: [], input: undefined, storing: false }
}

/** After a Chat completion that ended with tool calls: what the id cache keeps of it (a failure is logged). */
export async function rememberChat(gateway: Gateway, completion: ChatCompletion, prepared: Prepared, generated: number[]): Promise<void> {
  const choice = completion.choices[0]
  if (choice?.finish_reason === 'tool_calls') await rememberCalls(gateway, choice.message, prepared, generated)
}

/**
 * What the id cache keeps of an assistant message that ended with tool calls (`message` as Chat writes it, its
 * calls as the next request sends them back), with the ids the engine saw and generated; a failure is logged.
 */
export async function rememberCalls(gateway: Gateway, message: object, prepared: Prepared, generated: number[]): Promise<void> {
  try {
    if (gateway.chatIdCache === null) return
    await gateway.chatIdCache.remember(message, {
      prompt: prepared.prompt.tokens,
      output: generated,
      ...(prepared.rendered === undefined ? {} : { rendered: prepared.rendered.tokens }),
    })
  } catch (error) {
    gateway.onError(error)
  }
}
