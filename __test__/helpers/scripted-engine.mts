/**
 * A stand-in engine that answers as gpt-oss would, by script: `next(prompt)` gives the Harmony text of its
 * completion for the decoded prompt, sent `idsPerStep` ids a step (each step a turn of the event loop), the last
 * with its finish reason and usage. Every prompt it was given is kept.
 */
import type { Engine, GenerateRequest } from 'harmony-stream/engines'

import { harmony } from './harmony.mjs'
import { decodeTokens } from './token-bytes.mjs'

export function scripted(next: (prompt: string) => string, idsPerStep = 3): { engine: Engine; prompts: number[][] } {
  const prompts: number[][] = []
  const engine: Engine = {
    name: 'scripted',
    async *generate(request: GenerateRequest) {
      const prompt = Array.from(request.tokens)
      prompts.push(prompt)
      const tokens = harmony(next(decodeTokens(prompt)))
      for (let i = 0; i < tokens.length; i += idsPerStep) {
        await new Promise((resolve) => setImmediate(resolve))
        const last = i + idsPerStep >= tokens.length
        yield last
          ? {
              tokens: Uint32Array.from(tokens.slice(i)),
              finishReason: 'stop' as const,
              usage: { promptTokens: prompt.length, completionTokens: tokens.length },
            }
          : { tokens: Uint32Array.from(tokens.slice(i, i + idsPerStep)) }
      }
    },
  }
  return { engine, prompts }
}
