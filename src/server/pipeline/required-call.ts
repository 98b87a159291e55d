/**
 * A required call (`tool_choice: 'required'` or a named function), held through the prompt, which every engine
 * takes (none of them enforces a tool choice itself): the model reasons first, freely, then writes the call.
 *
 * 1. The engine continues the prompt from `<|channel|>analysis<|message|>`: the model's reasoning, up to its
 *    `<|end|>`, where this step stops reading it (the engine request ends with it).
 * 2. The engine continues from the prompt, that reasoning, and the call's header (`<|start|>assistant<|channel|>
 *    commentary to=functions.NAME <|constrain|>json<|message|>`): it writes the arguments and `<|call|>`. A
 *    strict function's arguments are held to its schema from the first token (`callArguments`): the grammars
 *    that wait for a header the model writes would never see this one, which the gateway wrote.
 *
 * The headers are steps of their own, so the adapters parse the completion whole, and what a kept response
 * records (the prompt, then every id after it) is exactly what the engine saw last: a continuation from it is
 * exact. A model that ends its turn in its reasoning (`<|return|>`) has its reasoning ended (`<|end|>`), and
 * the call follows all the same; one that ends the call with another stop id has it ended as a call (`<|call|>`); an engine that stops before the reasoning ends (its token limit, an abort)
 * ends the completion there. Engines with a prefix cache serve step 2's prompt from step 1's.
 */
import { CALL, END, END_OF_TEXT, RETURN } from '../../backend/tokens'
import type { EngineStep, GenerateRequest } from '../../engines/types'
import { concat } from '../../render/conversation'
import type { RenderedPrompt } from '../../render/index'

type RequiredCall = NonNullable<RenderedPrompt['requiredCall']>

/** The ids that end a turn: where an engine stops, in the step it stops in or one before it. */
const STOPS: ReadonlySet<number> = new Set([RETURN, CALL, END_OF_TEXT])

/**
 * `step` up to the end of the reasoning, without how it ended: through its `<|end|>`, or, where the model ended
 * its turn instead (a stop id), up to it, with `<|end|>` in its place; null when the reasoning goes on.
 */
function reasoningUntilEnd(step: EngineStep): EngineStep | null {
  const at = step.tokens.findIndex((id) => id === END || STOPS.has(id))
  if (at < 0) return null
  const tokens = step.tokens.slice(0, at + 1)
  tokens[at] = END
  const cut: EngineStep = { tokens }
  if (step.logprobs !== undefined) cut.logprobs = step.logprobs.slice(0, at + 1)
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
  const steps = generate({ ...request, tokens: concat([request.tokens, call.reasoning]) })[Symbol.asyncIterator]()
  let next = await steps.next()
  yield { tokens: call.reasoning }
  try {
    for (; !next.done; next = await steps.next()) {
      const step = next.value
      const cut = reasoningUntilEnd(step)
      if (cut !== null) {
        for (const id of cut.tokens) reasoning.push(id)
        yield cut
        break
      }
      if (step.finishReason === 'stop') {
        // A stop with no stop id in the steps: the reasoning ends there as with one (the answer goes on).
        const { finishReason: _, ...going } = step
        const ended = { ...going, tokens: concat([step.tokens, [END]]) }
        if (step.logprobs !== undefined) ended.logprobs = [...step.logprobs, null]
        for (const id of ended.tokens) reasoning.push(id)
        yield ended
        break
      }
      for (const id of step.tokens) reasoning.push(id)
      yield step
      // The engine ended before the reasoning did (its token limit, an abort): so does the answer.
      if (step.finishReason !== undefined) return
    }
  } finally {
    // The engine request ends here when the reasoning did (or the reader left).
    if (!next.done) await steps.return?.()
  }
  if (reasoning.at(-1) !== END) return
  // 2. The call: its header, then the engine's arguments and `<|call|>`.
  yield { tokens: call.call }
  const used = call.reasoning.length + reasoning.length + call.call.length
  const maxTokens = request.maxTokens === undefined ? undefined : Math.max(1, request.maxTokens - used)
  let ended = false
  const { responseFormat: _answer, argumentSchemas, ...rest } = request
  const schema = call.name === null ? null : (argumentSchemas?.find((entry) => entry.name === call.name)?.schema ?? null)
  for await (const step of generate({
    ...rest,
    tokens: concat([request.tokens, call.reasoning, reasoning, call.call]),
    ...(maxTokens === undefined ? {} : { maxTokens }),
    ...(schema === null ? {} : { callArguments: { schema } }),
  })) {
    const stop: number = ended ? -1 : step.tokens.findIndex((id) => STOPS.has(id))
    if (stop < 0 || step.tokens[stop] === CALL) {
      ended ||= stop >= 0
      yield step
      continue
    }
    // The message is the call whatever id the model ended it with (`<|return|>`, `<|endoftext|>`): it ends as a
    // call does, and so does the answer.
    ended = true
    const tokens = step.tokens.slice()
    tokens[stop] = CALL
    yield { ...step, tokens }
  }
}
