/**
 * The 256 single-byte tokens of o200k_base: byte-level BPE has one for every byte value, so any text can be
 * given to the token parser as a sequence of them, and its header and content bytes are exactly the text's.
 * Read from the same `.tiktoken` file as the vocabulary (lines `base64(bytes) rank`; one byte is `XX==`).
 */

import { readFileSync } from 'node:fs'
import { vocabularyPath } from '../../backend/vocabulary-file'
import { HarmonySetupError } from '../../base/errors'

let table: Uint32Array | null = null

export function byteTokens(): Uint32Array {
  if (table !== null) return table
  const ids = new Uint32Array(256).fill(0xffff_ffff)
  for (const match of readFileSync(vocabularyPath(), 'utf8').matchAll(/^([A-Za-z0-9+/]{2}==) (\d+)$/gm)) {
    ids[Buffer.from(match[1], 'base64')[0]] = Number(match[2])
  }
  const missing = ids.indexOf(0xffff_ffff)
  if (missing >= 0) throw new HarmonySetupError('vocabulary-malformed', `the vocabulary has no token for byte ${missing}`)
  table = ids
  return ids
}
