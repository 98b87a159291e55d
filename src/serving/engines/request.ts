/**
 * Checks a `GenerateRequest` before any engine sees it, so a bad request fails here with a TypeError or
 * RangeError naming the field, not as an engine's 400 (or, worse, as a request the engine quietly reads
 * otherwise: a float temperature sent as a string, a stop id it does not know).
 */
import { CALL, END, END_OF_TEXT, RETURN } from '../../backend/tokens'
import type { GenerateRequest } from './types'

/**
 * The last id a gpt-oss model knows: its vocabulary (o200k_harmony, the embedding's rows) has 201,088 ids,
 * 0 to 201087. Every id sent to an engine or read from one is checked against it. (The parser accepts one
 * more, 201088, because the reference Harmony encoding names it: docs/SEMANTICS.md "Special token ids".)
 */
export const LAST_MODEL_TOKEN = 201_087

/** An id a gpt-oss model can be given or generate: 0 to 201087. */
export function isTokenId(id: unknown): id is number {
  return Number.isInteger(id) && (id as number) >= 0 && (id as number) <= LAST_MODEL_TOKEN
}

/**
 * Where generation ends unless a request says otherwise: `<|return|>` and `<|call|>` (the reference's
 * stop tokens for assistant actions) and `<|endoftext|>`, which gpt-oss's generation config also lists as
 * an end of sequence and llama.cpp stops at. The adapters end a completion at `<|endoftext|>` too.
 */
export const GENERATION_STOP_TOKENS: readonly number[] = Object.freeze([RETURN, CALL, END_OF_TEXT])

export function checkGenerateRequest(request: Partial<GenerateRequest>, where: string): void {
  if (request === null || typeof request !== 'object') throw new TypeError(`${where}: the request must be an object`)
  const { tokens } = request
  if (!(tokens instanceof Uint32Array) && !Array.isArray(tokens))
    throw new TypeError(`${where}: tokens must be a Uint32Array or an array of token ids`)
  for (let i = 0; i < tokens.length; i++) {
    if (!isTokenId(tokens[i]))
      throw new RangeError(`${where}: tokens[${i}] is ${String(tokens[i])}, not a token id from 0 to ${LAST_MODEL_TOKEN}`)
  }
  if (request.maxTokens !== undefined && (!Number.isSafeInteger(request.maxTokens) || request.maxTokens < 1)) {
    throw new RangeError(`${where}: maxTokens must be a positive integer, not ${String(request.maxTokens)}`)
  }
  for (const key of ['temperature', 'topP'] as const) {
    const value = request[key]
    if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value) || value < 0)) {
      throw new RangeError(`${where}: ${key} must be a finite non-negative number, not ${String(value)}`)
    }
  }
  if (request.seed !== undefined && !Number.isSafeInteger(request.seed))
    throw new RangeError(`${where}: seed must be an integer, not ${String(request.seed)}`)
  if (request.stopTokens !== undefined) {
    if (!Array.isArray(request.stopTokens)) throw new TypeError(`${where}: stopTokens must be an array of token ids`)
    request.stopTokens.forEach((id, i) => {
      if (!isTokenId(id)) throw new RangeError(`${where}: stopTokens[${i}] is ${String(id)}, not a token id from 0 to ${LAST_MODEL_TOKEN}`)
    })
    if (request.stopTokens.includes(END))
      throw new RangeError(`${where}: stopTokens must not hold <|end|> (${END}): it separates messages within one completion`)
  }
  if (request.signal !== undefined && !(request.signal instanceof AbortSignal))
    throw new TypeError(`${where}: signal must be an AbortSignal`)
}
