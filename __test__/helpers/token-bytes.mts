/**
 * An oracle for decoding that shares no code with harmony-stream: token bytes read straight from the
 * `.tiktoken` file with Buffer's base64 decoder, special tokens from their names, lossy UTF-8 by
 * TextDecoder (WHATWG, the same rule as Rust's from_utf8_lossy).
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
let table: Buffer[] | undefined

function names(id: number): string {
  const named: Record<number, string> = {
    199998: '<|startoftext|>',
    199999: '<|endoftext|>',
    200002: '<|return|>',
    200003: '<|constrain|>',
    200005: '<|channel|>',
    200006: '<|start|>',
    200007: '<|end|>',
    200008: '<|message|>',
    200012: '<|call|>',
  }
  return named[id] ?? `<|reserved_${id}|>`
}

export function tokenBytes(id: number): Buffer {
  if (!table) {
    table = []
    for (const line of readFileSync(require.resolve('gpt-tokenizer/data/o200k_base.tiktoken'), 'latin1').split('\n')) {
      if (!line) continue
      const [encoded, rank] = line.split(' ')
      table[Number(rank)] = Buffer.from(encoded, 'base64')
    }
  }
  return id < 199998 ? table[id] : Buffer.from(names(id))
}

let byteIds: number[] | undefined

/**
 * `text` as the tokens of its UTF-8 bytes, one token a byte (o200k has one for each byte): a stream a model
 * could give, made without running the BPE (which takes minutes over all of Unicode).
 */
export function byteTokens(text: string): number[] {
  if (!byteIds) {
    byteIds = []
    for (let id = 0, found = 0; found < 256; id++) {
      const bytes = tokenBytes(id)
      if (bytes.length === 1 && byteIds[bytes[0]!] === undefined) {
        byteIds[bytes[0]!] = id
        found++
      }
    }
  }
  const ids = byteIds
  return Array.from(Buffer.from(text, 'utf8'), (byte) => ids[byte]!)
}

/** Lossy UTF-8 decoding of the tokens' bytes taken together. */
export function decodeTokens(ids: readonly number[]): string {
  return new TextDecoder('utf-8', { ignoreBOM: true }).decode(Buffer.concat(ids.map(tokenBytes)))
}
