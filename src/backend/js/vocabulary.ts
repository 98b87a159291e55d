/**
 * The token → bytes table: o200k_base ranks from a `.tiktoken` file plus the Harmony special tokens.
 * Mirrors crate/core/src/vocabulary.rs. Loaded once per process (per worker thread) and shared.
 *
 * Besides the bytes it caches, per token and on first use, the token's text when its bytes are valid
 * UTF-8 on their own, so the hot path appends such tokens without the UTF-8 assembler.
 */

import { readFileSync } from 'node:fs'
import { HarmonySetupError } from '../../base/errors'
import { FIRST_SPECIAL, specialTokenText, VOCAB_SIZE } from '../tokens'
import { vocabularyPath } from '../vocabulary-file'
import { decodeValid, type TextSink, type Utf8Assembler, validUpTo } from './utf8'

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/

export class Vocabulary {
  /** `bytes.subarray(starts[id], ends[id])` are the bytes of token `id`. */
  private readonly bytes: Buffer
  private readonly starts: Uint32Array
  private readonly ends: Uint32Array
  /** Text of each token: undefined until first asked for, null when not valid UTF-8 on its own. */
  private readonly texts: (string | null | undefined)[] = new Array(VOCAB_SIZE)
  /** Ordinary token by its bytes (as a latin1 string): built on the first `idOfBytes`, which only rare paths call. */
  private byBytes: Map<string, number> | null = null

  private constructor(bytes: Buffer, starts: Uint32Array, ends: Uint32Array) {
    this.bytes = bytes
    this.starts = starts
    this.ends = ends
  }

  /** Parses the contents of `o200k_base.tiktoken` (lines of `base64(bytes) rank`). */
  static fromTiktoken(data: Buffer): Vocabulary {
    const specials: Buffer[] = []
    for (let id = FIRST_SPECIAL; id < VOCAB_SIZE; id++) specials.push(Buffer.from(specialTokenText(id)!, 'utf8'))
    const bytes = Buffer.alloc(data.length + specials.reduce((sum, s) => sum + s.length, 0))
    const starts = new Uint32Array(VOCAB_SIZE)
    const ends = new Uint32Array(VOCAB_SIZE)
    let written = 0
    let lineStart = 0
    for (let line = 1; lineStart < data.length; line++) {
      let lineEnd = data.indexOf(0x0a, lineStart)
      if (lineEnd < 0) lineEnd = data.length
      const text = data.toString('latin1', lineStart, data[lineEnd - 1] === 0x0d ? lineEnd - 1 : lineEnd)
      lineStart = lineEnd + 1
      if (text.length === 0) continue
      const space = text.indexOf(' ')
      const encoded = text.slice(0, space)
      const rankText = text.slice(space + 1)
      if (space < 0 || encoded.length % 4 !== 0 || !BASE64.test(encoded) || !/^[0-9]+$/.test(rankText)) {
        throw new HarmonySetupError('vocabulary-malformed', `malformed vocabulary file: line ${line} is not \`base64 rank\``)
      }
      const rank = Number(rankText)
      const length = bytes.write(encoded, written, 'base64')
      if (rank >= FIRST_SPECIAL || ends[rank] !== 0 || length === 0) {
        throw new HarmonySetupError(
          'vocabulary-malformed',
          `malformed vocabulary file: line ${line} has rank ${rankText}, out of range or repeated`,
        )
      }
      starts[rank] = written
      ends[rank] = written += length
    }
    for (let rank = 0; rank < FIRST_SPECIAL; rank++) {
      if (ends[rank] === 0) throw new HarmonySetupError('vocabulary-malformed', `malformed vocabulary file: rank ${rank} is missing`)
    }
    specials.forEach((special, index) => {
      const id = FIRST_SPECIAL + index
      starts[id] = written
      ends[id] = written += special.copy(bytes, written)
    })
    return new Vocabulary(bytes, starts, ends)
  }

  contains(id: number): boolean {
    return id >= 0 && id < VOCAB_SIZE
  }

  /** The bytes of token `id` (a view, not a copy). */
  tokenBytes(id: number): Uint8Array {
    return this.bytes.subarray(this.starts[id], this.ends[id])
  }

  /**
   * The ordinary token (0 to 199997) whose bytes are `bytes[from, to)`, or undefined. Each o200k rank has
   * bytes of its own, so there is at most one.
   */
  idOfBytes(bytes: Uint8Array, from = 0, to = bytes.length): number | undefined {
    if (this.byBytes === null) {
      this.byBytes = new Map()
      for (let id = 0; id < FIRST_SPECIAL; id++) this.byBytes.set(this.bytes.toString('latin1', this.starts[id], this.ends[id]), id)
    }
    return this.byBytes.get(Buffer.from(bytes.buffer, bytes.byteOffset + from, to - from).toString('latin1'))
  }

  /** The bytes of tokens `ids`, one after the other, in a new array. */
  concatBytes(ids: readonly number[]): Uint8Array {
    let length = 0
    for (const id of ids) length += this.ends[id] - this.starts[id]
    const out = new Uint8Array(length)
    let at = 0
    for (const id of ids) {
      for (let i = this.starts[id]; i < this.ends[id]; i++) out[at++] = this.bytes[i]
    }
    return out
  }

  /**
   * Feeds the bytes of token `id` to `utf8`, which appends the text they complete to `out`. The bytes are
   * read in place: a view per token would cost more than decoding it.
   */
  assemble(id: number, utf8: Utf8Assembler, out: TextSink): void {
    utf8.push(this.bytes, this.starts[id], this.ends[id], out)
  }

  /**
   * The text of token `id` when its bytes are valid UTF-8 on their own, else null. (Kept this small so
   * that V8 inlines it into the content path; the first use of a token goes through `decodeText`.)
   */
  text(id: number): string | null {
    const text = this.texts[id]
    return text !== undefined ? text : this.decodeText(id)
  }

  private decodeText(id: number): string | null {
    const start = this.starts[id]
    const end = this.ends[id]
    const text = validUpTo(this.bytes, start, end) === end ? decodeValid(this.bytes, start, end) : null
    this.texts[id] = text
    return text
  }
}

let shared: Vocabulary | undefined

/** The process-wide vocabulary, read on first use. */
export function sharedVocabulary(): Vocabulary {
  shared ??= Vocabulary.fromTiktoken(readFileSync(vocabularyPath()))
  return shared
}
