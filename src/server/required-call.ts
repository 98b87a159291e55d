/**
 * A required call (`tool_choice: 'required'` or a named function), held through the prompt, which every engine
 * takes (none of them enforces a tool choice itself): the model reasons first, freely, then writes the call.
 *
 * 1. The engine continues the prompt from `<|channel|>analysis<|message|>`: the model's reasoning, up to its
 *    `<|end|>`, where this step stops reading it (the engine request ends with it).
 * 2. The engine continues from the prompt, that reasoning, and the call's header (`<|start|>assistant<|channel|>
 *    commentary to=functions.NAME <|constrain|>json<|message|>`): it writes the arguments and `<|call|>`.
 *
 * The headers are steps of their own, so the adapters parse the completion whole, and what a kept response
 * records (the prompt, then every id after it) is exactly what the engine saw last: a continuation from it is
 * exact. An engine that ends before the reasoning does (its token limit) ends the completion there. Engines
 * with a prefix cache serve step 2's prompt from step 1's.
 */
import { END } from '../backend/tokens'
import type { RenderedPrompt } from '../render/index'
import type { EngineStep, GenerateRequest } from '../serving/engines/types'

type RequiredCall = NonNullable<RenderedPrompt['requiredCall']>

function joined(...parts: ArrayLike<number>[]): Uint32Array {
  const out = new Uint32Array(parts.reduce((n, part) => n + part.length, 0))
  let at = 0
  for (const part of parts) {
    out.set(part, at)
    at += part.length
  }
  return out
}

/** `step` up to its first `<|end|>` (inclusive), without how it ended; null when it holds none. */
function untilEnd(step: EngineStep): EngineStep | null {
  const end = step.tokens.indexOf(END)
  if (end < 0) return null
  const cut: EngineStep = { tokens: step.tokens.slice(0, end + 1) }
  if (step.logprobs !== undefined) cut.logprobs = step.logprobs.slice(0, end + 1)
  if (step.diagnostics !== undefined) cut.diagnostics = step.diagnostics
  return cut
}

export async function* requiredCallSteps(
  generate: (request: GenerateRequest) => AsyncIterable<EngineStep>,
  request: GenerateRequest,
  call: RequiredCall,
): AsyncIterable<EngineStep> {
  const reasoning: number[] = []
  // 1. The reasoning: read up to its end. Its first step is awaited before anything is yielded, so an engine
  // that fails at once fails the request as any other would (a 502 before the status line).
  const steps = generate({ ...request, tokens: joined(request.tokens, call.reasoning) })[Symbol.asyncIterator]()
  let next = await steps.next()
  yield { tokens: call.reasoning }
  let ended = false
  try {
    for (; !next.done; next = await steps.next()) {
      const step = next.value
      const cut = untilEnd(step)
      if (cut !== null) {
        for (const id of cut.tokens) reasoning.push(id)
        yield cut
        ended = true
        break
      }
      for (const id of step.tokens) reasoning.push(id)
      yield step
      // The engine ended (its token limit, a stop, an abort) before the reasoning did: so does the completion.
      if (step.finishReason !== undefined) return
    }
  } finally {
    // The engine request ends here when the reasoning did (or the reader left).
    if (!next.done) await steps.return?.()
  }
  if (!ended) return
  // 2. The call: its header, then the engine's arguments and `<|call|>`.
  yield { tokens: call.call }
  const used = call.reasoning.length + reasoning.length + call.call.length
  const maxTokens = request.maxTokens === undefined ? undefined : Math.max(1, request.maxTokens - used)
  yield* generate({
    ...request,
    tokens: joined(request.tokens, call.reasoning, reasoning, call.call),
    ...(maxTokens === undefined ? {} : { maxTokens }),
  })
}
