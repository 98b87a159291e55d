/**
 * The example gateway on 127.0.0.1 for a test, with the official openai client pointed at it: closed in the
 * test's teardown, no retries (a test sees every answer as it came).
 */
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'

import type { ExecutionContext } from 'ava'
import { type Engine, EngineError, type GenerateRequest, ReplayEngine } from 'harmony-stream/engines'
import OpenAI from 'openai'

import { harmony } from './harmony.mjs'

const root = join(import.meta.dirname, '..', '..')

interface GatewayModule {
  createGateway(options: Record<string, unknown>): Server
  loadReplay(path: string): number[][]
}

/** The example gateway's module (examples/gateway/server.mjs). */
async function gatewayModule(): Promise<GatewayModule> {
  return (await import(join(root, 'examples/gateway/server.mjs'))) as GatewayModule
}

/** The example's own replay completions (examples/gateway/replay.json). */
export async function exampleReplay(): Promise<number[][]> {
  return (await gatewayModule()).loadReplay(join(root, 'examples/gateway/replay.json'))
}

/** Starts `createGateway(options)` on a free port; returns the server and an openai client for its /v1. */
export async function startGateway(
  t: ExecutionContext,
  options: Record<string, unknown>,
): Promise<{ server: Server; client: OpenAI; port: number }> {
  const server = (await gatewayModule()).createGateway(options)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const { port } = server.address() as AddressInfo
  return { server, port, client: new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'x', maxRetries: 0 }) }
}

/** The replay engine serving `completions` in turn, with the prompt of every request it was given. */
export function recordingEngine(completions: number[][]): { engine: Engine; prompts: number[][] } {
  const replay = new ReplayEngine({ completions })
  const prompts: number[][] = []
  return {
    prompts,
    engine: {
      name: 'recording',
      generate(request: GenerateRequest) {
        prompts.push(Array.from(request.tokens))
        return replay.generate(request)
      },
    },
  }
}

/** An engine that sends a few tokens, then fails as a broken engine connection does. */
export const failingEngine: Engine = {
  name: 'failing',
  async *generate() {
    yield { tokens: Uint32Array.from(harmony('<|channel|>final<|message|>hello')) }
    await new Promise((resolve) => setImmediate(resolve))
    throw new EngineError('engine-connection-error', 'the connection to the engine broke', { engine: 'failing' })
  },
}

/** What a client reads from a streamed Chat completion: its content, and the last finish reason. */
export async function readChatStream(
  stream: AsyncIterable<{ choices: { delta?: { content?: string | null }; finish_reason?: string | null }[] }>,
): Promise<{ content: string; finish: string | null }> {
  let content = ''
  let finish: string | null = null
  for await (const chunk of stream) {
    content += chunk.choices[0]?.delta?.content ?? ''
    finish = chunk.choices[0]?.finish_reason ?? finish
  }
  return { content, finish }
}

/**
 * An engine named `name` whose completion of any prompt is `completion`, gone on from wherever the prompt's end
 * already holds of it (as greedy decoding on identical engines does after a failover), one id a step. With
 * `cutAfter`, each of its streams breaks after that many ids, as a reset connection does. `calls`: the
 * generations it was asked for.
 */
export function continuingEngine(
  name: string,
  completion: readonly number[],
  cutAfter: number | null = null,
): { engine: Engine; calls: () => number } {
  let calls = 0
  const engine: Engine = {
    name,
    async *generate(request: GenerateRequest) {
      calls++
      const prompt = Array.from(request.tokens)
      let from = Math.min(completion.length, prompt.length)
      while (from > 0 && !completion.slice(0, from).every((id, i) => prompt[prompt.length - from + i] === id)) from--
      const rest = completion.slice(from)
      for (let n = 0; n < rest.length; n++) {
        if (n === cutAfter) throw new EngineError('engine-connection-error', `${name}: reset`, { engine: name })
        const last = n === rest.length - 1
        yield {
          tokens: Uint32Array.of(rest[n]!),
          ...(last ? { finishReason: 'stop' as const, usage: { promptTokens: prompt.length, completionTokens: rest.length } } : {}),
        }
      }
    },
  }
  return { engine, calls: () => calls }
}
