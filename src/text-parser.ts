/**
 * The text parser: Harmony whose special tokens arrive as text (llama.cpp, Ollama, a completions endpoint
 * with `skip_special_tokens=false`), in chunks cut anywhere, even inside a marker.
 *
 * It finds the markers (`text/marker-scanner.ts`) and hands the stream to a `HarmonyStreamParser` of the
 * chosen implementation as tokens: markers as their token ids, text as the single-byte tokens of its UTF-8
 * bytes. So the header rules, recovery policies and diagnostics are exactly the token parser's, and so is
 * every message's text. What differs: offsets (`tokenOffset` of diagnostics and errors) count bytes of text
 * and markers as one each; `maxHeaderTokens` counts header bytes (default 1024); a strict error message
 * naming a token id names a byte token.
 */
import { HarmonyStreamParser } from './parser'
import { byteTokens } from './text/byte-tokens'
import { MarkerScanner, type Piece } from './text/marker-scanner'
import type { HarmonyBatch, HarmonyMessage, HarmonyStreamParserOptions, Implementation, ParserState } from './types'

export type HarmonyTextParserOptions = HarmonyStreamParserOptions

/** Default header limit in bytes: the token parser's 256 tokens are about this much text. */
export const DEFAULT_MAX_HEADER_BYTES = 1024

const encoder = new TextEncoder()

export class HarmonyTextParser {
  readonly implementation: Implementation
  private readonly parser: HarmonyStreamParser
  private readonly scanner = new MarkerScanner()
  private readonly bytes = byteTokens()

  constructor(options: HarmonyTextParserOptions = {}) {
    this.parser = new HarmonyStreamParser({ maxHeaderTokens: DEFAULT_MAX_HEADER_BYTES, ...options })
    this.implementation = this.parser.implementation
  }

  /** Parses the next chunk of text. Errors as for `HarmonyStreamParser#push`; `TypeError` for a non-string. */
  push(chunk: string): HarmonyBatch {
    if (typeof chunk !== 'string') throw new TypeError('a chunk is a string')
    if (this.parser.finished) return this.parser.push([]) // throws the state error
    return this.parser.push(this.tokensOf(this.scanner.push(chunk)))
  }

  /** Ends the stream: releases held-back text, flushes an unterminated message. */
  finish(): HarmonyBatch {
    if (this.parser.finished) return this.parser.finish()
    const rest = this.parser.push(this.tokensOf(this.scanner.finish()))
    const last = this.parser.finish()
    return {
      segments: mergeSegments([...rest.segments, ...last.segments]),
      completed: [...rest.completed, ...last.completed],
      diagnostics: [...rest.diagnostics, ...last.diagnostics],
    }
  }

  get messages(): HarmonyMessage[] {
    return this.parser.messages
  }

  get state(): ParserState {
    return this.parser.state
  }

  get finished(): boolean {
    return this.parser.finished
  }

  /** The token sequence the pieces stand for. */
  private tokensOf(pieces: Piece[]): Uint32Array {
    let length = 0
    const encoded = pieces.map((piece) => {
      const bytes = 'marker' in piece ? null : encoder.encode(piece.text)
      length += bytes === null ? 1 : bytes.length
      return bytes
    })
    const tokens = new Uint32Array(length)
    let at = 0
    for (const [i, piece] of pieces.entries()) {
      const bytes = encoded[i]
      if (bytes === null) tokens[at++] = (piece as { marker: number }).marker
      else for (const byte of bytes) tokens[at++] = this.bytes[byte]
    }
    return tokens
  }
}

/** Adjacent segments of the same message are one segment, as within one token batch. */
function mergeSegments(segments: HarmonyBatch['segments']): HarmonyBatch['segments'] {
  const merged: HarmonyBatch['segments'] = []
  for (const segment of segments) {
    const last = merged.at(-1)
    if (last !== undefined && last.messageIndex === segment.messageIndex) merged[merged.length - 1] = { ...last, text: last.text + segment.text }
    else merged.push(segment)
  }
  return merged
}
