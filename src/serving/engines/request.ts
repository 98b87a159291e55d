/**
 * Checks a `GenerateRequest` before any engine sees it, so a bad request fails here with a TypeError or
 * RangeError naming the field, not as an engine's 400 (or, worse, as a request the engine quietly reads
 * otherwise: a float temperature sent as a string, a stop id it does not know).
 */
import { END, LAST_TOKEN } from '../../backend/tokens'
import type { GenerateRequest } from './types'

/** An id of the o200k_harmony vocabulary: 0 to 201088 (`LAST_TOKEN`, as the parser counts them). */
export function isTokenId(id: unknown): id is number {
  return Number.isInteger(id) && (id as number) >= 0 && (id as number) <= LAST_TOKEN
}

export function checkGenerateRequest(request: Partial<GenerateRequest>, where: string): void {
  if (request === null || typeof request !== 'object') throw new TypeError(`${where}: the request must be an object`)
  const { tokens } = request
  if (!(tokens instanceof Uint32Array) && !Array.isArray(tokens))
    throw new TypeError(`${where}: tokens must be a Uint32Array or an array of token ids`)
  for (let i = 0; i < tokens.length; i++) {
    if (!isTokenId(tokens[i]))
      throw new RangeError(`${where}: tokens[${i}] is ${String(tokens[i])}, not a token id from 0 to ${LAST_TOKEN}`)
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
      if (!isTokenId(id)) throw new RangeError(`${where}: stopTokens[${i}] is ${String(id)}, not a token id from 0 to ${LAST_TOKEN}`)
    })
    if (request.stopTokens.includes(END))
      throw new RangeError(`${where}: stopTokens must not hold <|end|> (${END}): it separates messages within one completion`)
  }
  if (request.signal !== undefined && !(request.signal instanceof AbortSignal))
    throw new TypeError(`${where}: signal must be an AbortSignal`)
}
