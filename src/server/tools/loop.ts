/**
 * The server-side tool loop of one response: the model calls one of gpt-oss's own tools (`python`,
 * `browser.search` …) and stops at `<|call|>`; the gateway runs it, appends its result to the exact ids the
 * engine saw and generated (`<|start|>python to=assistant<|channel|>analysis<|message|>…<|end|>`, on the channel
 * of the call, as gpt-oss's tools answer and vLLM sends them, then `<|start|>assistant`), and has the engine go
 * on from there: no re-render, so an engine with a prefix cache computes only the new tokens. Until the model
 * answers, calls a function of the client's, or the limit of calls is reached.
 *
 * The results are steps of their own, so the adapters parse the whole exchange (Responses shows it as
 * `code_interpreter_call` / `web_search_call` items), and what a kept response records is exactly what the engine
 * saw last: a continuation from it is exact.
 */
import { parseCompletion } from '../../api/parser'
import { CALL } from '../../backend/tokens'
import type { Implementation } from '../../base/types'
import type { OwnWork } from '../../engines/time-limits'
import type { EngineStep, GenerateRequest } from '../../engines/types'
import { concat } from '../../render/conversation'
import { renderConversation } from '../../render/index'
import type { ToolResult } from './result'

/** Runs the calls of one response (its python session, its browser's pages). */
export interface ToolCaller {
  /** Whether `tool` (`python`, `browser.search`, …) is one this caller runs. */
  runs(tool: string): boolean
  /** Runs a call. Never rejects: what goes wrong is a `ToolResult` too. */
  call(tool: string, args: string): Promise<ToolResult>
  /** The response is over (whatever ended it): its sessions can go. */
  end(): void
}

export interface ToolLoopOptions {
  /** Calls run per response; a call past it ends the response where it stands. */
  maxCalls: number
  /** The BPE the results are encoded with (both give the same tokens). */
  implementation: Implementation
  /** Where a call's run is said to be the gateway's work, not the engine's silence (its time limits). */
  own?: OwnWork
}

/** The call the generation ended with (its last message, ended by `<|call|>`), or null. */
function endingCall(generated: readonly number[], implementation: Implementation): { tool: string; channel: string; args: string } | null {
  if (generated.at(-1) !== CALL) return null
  const messages = parseCompletion(generated, { role: 'assistant', implementation })
  const last = messages.at(-1)
  if (last === undefined || last.terminator !== 'call' || last.recipient == null) return null
  return { tool: last.recipient, channel: last.channel ?? 'analysis', args: last.content }
}

export async function* toolLoopSteps(
  generate: (request: GenerateRequest) => AsyncIterable<EngineStep>,
  request: GenerateRequest,
  tools: ToolCaller,
  options: ToolLoopOptions,
): AsyncIterable<EngineStep> {
  let prompt: Uint32Array | readonly number[] = request.tokens
  let produced = 0
  try {
    for (let calls = 0; ; calls++) {
      const generated: number[] = []
      const maxTokens = request.maxTokens === undefined ? undefined : request.maxTokens - produced
      let call: ReturnType<typeof endingCall> = null
      for await (const step of generate(
        calls === 0 ? request : { ...request, tokens: prompt, ...(maxTokens === undefined ? {} : { maxTokens }) },
      )) {
        for (const id of step.tokens) generated.push(id)
        // The response's usage is its first generation's (the prompt the client sent); later prompts hold
        // the response's own tokens.
        const passed = calls === 0 ? step : withoutUsage(step)
        if (step.finishReason !== 'stop' || calls >= options.maxCalls) {
          yield passed
          continue
        }
        call = endingCall(generated, options.implementation)
        if (call === null || !tools.runs(call.tool)) {
          yield passed
          call = null
          continue
        }
        // The generation ends in a call the gateway runs: the response goes on.
        const { finishReason: _, ...going } = passed
        yield going
      }
      produced += generated.length
      if (call === null) return
      const { tool, args } = call
      const { output, failure } = await (options.own?.during(() => tools.call(tool, args)) ?? tools.call(tool, args))
      const result = renderConversation(
        [{ role: 'tool', name: call.tool, recipient: 'assistant', channel: call.channel, content: bounded(output) }],
        { implementation: options.implementation, cache: null },
      ).tokens
      yield failure === undefined
        ? { tokens: result }
        : { tokens: result, diagnostics: [{ code: 'tool-failed', tool: call.tool, result: calls, message: `${call.tool}: ${failure}` }] }
      prompt = concat([prompt, generated, result])
      if (request.maxTokens !== undefined && produced >= request.maxTokens) return
    }
  } finally {
    tools.end()
  }
}

/** The most of a tool's output the model gets (a remote MCP server's is otherwise unbounded). */
const MAX_RESULT_CHARS = 65_536

function bounded(output: string): string {
  return output.length > MAX_RESULT_CHARS
    ? `${output.slice(0, MAX_RESULT_CHARS)}\n[output cut: ${output.length - MAX_RESULT_CHARS} more characters]`
    : output
}

/** A later generation's step without its usage. */
function withoutUsage(step: EngineStep): EngineStep {
  if (step.usage === undefined) return step
  const { usage: _, ...rest } = step
  return rest
}
