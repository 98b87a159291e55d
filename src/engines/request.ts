/** Checks a `GenerateRequest` before any engine sees it: a TypeError or RangeError naming the field. */
import { END } from '../fallback/tokens'
import type { GenerateRequest } from './types'

const LAST_TOKEN = 201_088

export function checkGenerateRequest(request: Partial<GenerateRequest>, where: string): void {
  if (request === null || typeof request !== 'object') throw new TypeError(`${where}: the request must be an object`)
  const { tokens } = request
  if (!(tokens instanceof Uint32Array) && !Array.isArray(tokens)) throw new TypeError(`${where}: tokens must be a Uint32Array or an array of token ids`)
  for (let i = 0; i < tokens.length; i++) {
    const id = tokens[i]
    if (!Number.isInteger(id) || id < 0 || id > LAST_TOKEN) throw new RangeError(`${where}: tokens[${i}] is ${String(id)}, not a token id from 0 to ${LAST_TOKEN}`)
  }
  if (request.maxTokens !== undefined && (!Number.isSafeInteger(request.maxTokens) || request.maxTokens < 1)) {
    throw new RangeError(`${where}: maxTokens must be a positive integer`)
  }
  for (const key of ['temperature', 'topP'] as const) {
    const value = request[key]
    if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value) || value < 0)) throw new RangeError(`${where}: ${key} must be a finite non-negative number`)
  }
  if (request.seed !== undefined && !Number.isSafeInteger(request.seed)) throw new RangeError(`${where}: seed must be an integer`)
  if (request.stopTokens !== undefined) {
    if (!Array.isArray(request.stopTokens)) throw new TypeError(`${where}: stopTokens must be an array of token ids`)
    if (request.stopTokens.includes(END)) throw new RangeError(`${where}: stopTokens must not hold <|end|> (${END}): it separates messages within one completion`)
  }
  if (request.signal !== undefined && !(request.signal instanceof AbortSignal)) throw new TypeError(`${where}: signal must be an AbortSignal`)
}
