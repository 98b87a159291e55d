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
import { is, type OptionSpec } from '../base/options'
import type { HarmonyBatch, HarmonyMessage, HarmonyStreamParserOptions, Implementation, ParserState } from '../base/types'
import { checkParserOptions, HarmonyStreamParser, PARSER_OPTIONS } from './parser'
import { byteTokens } from './text/byte-tokens'
import { MarkerScanner, type Piece } from './text/marker-scanner'
import { StrippedRewriter, strippedDiagnostic } from './text/stripped'

export interface HarmonyTextParserOptions extends HarmonyStreamParserOptions {
  /**
   * Recognise the stripped form some servers produce (`analysis…assistantfinal…`: the special tokens
   * removed) when a stream starts with a channel name and no marker, with a `stripped-markers` diagnostic;
   * a commentary call (`commentary to=functions.f json{…}`) keeps its recipient. Default false.
   */
  detectStripped?: boolean
}

const TEXT_PARSER_OPTIONS: OptionSpec = { ...PARSER_OPTIONS, detectStripped: is.boolean }

/** Default header limit in bytes: the token parser's 256 tokens are about this much text. */
export const DEFAULT_MAX_HEADER_BYTES = 1024

export class HarmonyTextParser {
  readonly implementation: Implementation
  private readonly parser: HarmonyStreamParser
  private readonly scanner = new MarkerScanner()
  private readonly bytes = byteTokens()
  private readonly stripped: StrippedRewriter | null
  private strippedReported = false

  constructor(options: HarmonyTextParserOptions = {}) {
    const { detectStripped, ...parserOptions } = checkParserOptions(
      options,
      'HarmonyTextParser',
      TEXT_PARSER_OPTIONS,
    ) as HarmonyTextParserOptions
    this.parser = new HarmonyStreamParser({ maxHeaderTokens: DEFAULT_MAX_HEADER_BYTES, ...parserOptions })
    this.implementation = this.parser.implementation
    this.stripped = detectStripped ? new StrippedRewriter() : null
  }

  /** Parses the next chunk of text. Errors as for `HarmonyStreamParser#push`; `TypeError` for a non-string. */
  push(chunk: string): HarmonyBatch {
    if (typeof chunk !== 'string') throw new TypeError('a chunk is a string')
    if (this.parser.finished) return this.parser.push([]) // throws the state error
    const text = this.stripped === null ? chunk : this.stripped.push(chunk)
    return this.reportStripped(this.parser.push(this.tokensOf(this.scanner.push(text))))
  }

  /** Adds the `stripped-markers` diagnostic to the batch in which the stripped form was recognised. */
  private reportStripped(batch: HarmonyBatch): HarmonyBatch {
    if (this.strippedReported || !this.stripped?.stripped) return batch
    this.strippedReported = true
    batch.diagnostics.unshift(strippedDiagnostic(0))
    return batch
  }

  /** Ends the stream: releases held-back text, flushes an unterminated message. */
  finish(): HarmonyBatch {
    if (this.parser.finished) return this.parser.finish()
    const tail = this.stripped === null ? [] : this.scanner.push(this.stripped.finish())
    const rest = this.reportStripped(this.parser.push(this.tokensOf([...tail, ...this.scanner.finish()])))
    const last = this.parser.finish()
    return {
      opened: [...rest.opened, ...last.opened],
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
    return tokensOfPieces(pieces, this.bytes)
  }
}

/**
 * Markers as their ids, text as the single-byte tokens of its UTF-8 bytes, encoded here by hand: most
 * chunks are a few characters, where a TextEncoder call per piece cost more than the parsing.
 */
export function tokensOfPieces(pieces: Piece[], bytes: Uint32Array): Uint32Array {
  let length = 0
  for (const piece of pieces) length += 'marker' in piece ? 1 : 3 * piece.text.length // UTF-8 needs at most 3 bytes per UTF-16 unit
  const tokens = new Uint32Array(length)
  let at = 0
  for (const piece of pieces) {
    if ('marker' in piece) {
      tokens[at++] = piece.marker
      continue
    }
    const text = piece.text
    for (let i = 0; i < text.length; i++) {
      let c = text.charCodeAt(i)
      if (c < 0x80) {
        tokens[at++] = bytes[c]
        continue
      }
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
        const low = text.charCodeAt(i + 1)
        if (low >= 0xdc00 && low <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (low - 0xdc00)
          i++
        }
      }
      if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd // a lone surrogate, as TextEncoder encodes it
      if (c < 0x800) {
        tokens[at++] = bytes[0xc0 | (c >> 6)]
      } else if (c < 0x10000) {
        tokens[at++] = bytes[0xe0 | (c >> 12)]
        tokens[at++] = bytes[0x80 | ((c >> 6) & 0x3f)]
      } else {
        tokens[at++] = bytes[0xf0 | (c >> 18)]
        tokens[at++] = bytes[0x80 | ((c >> 12) & 0x3f)]
        tokens[at++] = bytes[0x80 | ((c >> 6) & 0x3f)]
      }
      tokens[at++] = bytes[0x80 | (c & 0x3f)]
    }
  }
  return tokens.subarray(0, at)
}

/** Adjacent segments of the same message are one segment, as within one token batch. */
function mergeSegments(segments: HarmonyBatch['segments']): HarmonyBatch['segments'] {
  const merged: HarmonyBatch['segments'] = []
  for (const segment of segments) {
    const last = merged.at(-1)
    if (last !== undefined && last.messageIndex === segment.messageIndex)
      merged[merged.length - 1] = { ...last, text: last.text + segment.text }
    else merged.push(segment)
  }
  return merged
}
