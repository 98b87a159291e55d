/**
 * Turns parser batches into an ordered list of per-message events, with exact token counts per message,
 * for the wire adapters. Built only on the parser contract (`push`/`finish` → `HarmonyBatch`), so it works
 * on either implementation.
 *
 * A batch can end one message and start the next (the bug behind vLLM #27641 and #31501); its segments and
 * completed messages are therefore re-interleaved by message index: a message's text always comes before
 * its close, and its close before the next message's text.
 */
import { HarmonyStreamParser } from '../api/parser'
import { byteTokens } from '../api/text/byte-tokens'
import { MarkerScanner, type Piece } from '../api/text/marker-scanner'
import { StrippedRewriter, strippedDiagnostic } from '../api/text/stripped'
import { DEFAULT_MAX_HEADER_BYTES, tokensOfPieces } from '../api/text-parser'
import { ordinaryEncoder } from '../backend/encoder'
import { CHANNEL, END_OF_TEXT, FIRST_SPECIAL, RETURN, START } from '../backend/tokens'
import type {
  HarmonyBatch,
  HarmonyDiagnostic,
  HarmonyMessage,
  HarmonyOpened,
  HarmonySegment,
  HarmonyStreamParserOptions,
  Implementation,
} from '../base/types'

export type MessageEvent =
  /** A header completed: the message's route is known before any of its text. */
  | { kind: 'open'; opened: HarmonyOpened }
  | { kind: 'text'; segment: HarmonySegment }
  | { kind: 'close'; index: number; message: HarmonyMessage; tokens: number }

/**
 * What the adapters are fed: token ids (the default), text whose markers arrive as text (see `HarmonyTextParser`),
 * or text whose markers the server stripped (`analysis…assistantfinal…`, `commentary to=functions.f json{…}`:
 * `skip_special_tokens`), read back into markers (api/text/stripped.ts) with a `stripped-markers` diagnostic.
 */
export type InputKind = 'tokens' | 'text' | 'stripped'

/**
 * Tokens of `text`: `<|constrain|>` (text to the scanner) is one token, other special-token strings are
 * text. The tokenizer loads on first use, for text input only.
 */
function tokenCount(text: string): number {
  const parts = text.split('<|constrain|>')
  return parts.length - 1 + parts.reduce((n, part) => n + (part === '' ? 0 : encodeCount(part)), 0)
}

/** o200k tokens of ordinary text: the renderer's js encoder (gpt-tokenizer, loaded on first use). */
function encodeCount(text: string): number {
  return ordinaryEncoder('js').encode(text).length
}

/** tokens[from, to): the array itself when that is all of it (at batch 1, always), else a copy. */
function part(tokens: Uint32Array | readonly number[], from: number, to: number): Uint32Array | readonly number[] {
  return from === 0 && to === tokens.length ? tokens : tokens.slice(from, to)
}

export class MessageStream {
  parser: HarmonyStreamParser
  /**
   * Tokens pushed so far. For text input, counted by encoding the text with the o200k tokenizer (markers
   * count one each): exact when the text is the decoding of the model's tokens, as servers send it.
   */
  tokens = 0
  /** Messages closed so far. */
  closed = 0
  /** Diagnostics of everything pushed so far. */
  readonly diagnostics: HarmonyDiagnostic[] = []
  /**
   * The model ended the completion with `<|endoftext|>` (docs/SEMANTICS.md "The end of a completion"): ids
   * after it are not read.
   */
  endedAtEndOfText = false
  /** Ids came after `<|endoftext|>` (reported once). */
  private readAfterEnd = false
  /** The adapter read what it needed (a stop string ended the answer): ids from now on are counted, not read. */
  private stopped = false
  /** Tokens since the last close: the header, content and terminator of the message being read. */
  private pending = 0

  private readonly scanner: MarkerScanner | null
  /** Stripped input: the rewriter that puts the markers back, ahead of the scanner. */
  private readonly stripped: StrippedRewriter | null
  /** Text input: the text since the last marker, not yet counted in tokens. */
  private unweighed = ''

  constructor(
    private readonly options: HarmonyStreamParserOptions = {},
    readonly input: InputKind = 'tokens',
  ) {
    // For text, the parser reads single-byte tokens: its header limit counts bytes (as HarmonyTextParser's).
    const text = input !== 'tokens'
    this.parser = new HarmonyStreamParser(text ? { maxHeaderTokens: DEFAULT_MAX_HEADER_BYTES, ...options } : options)
    this.scanner = text ? new MarkerScanner() : null
    this.stripped = input === 'stripped' ? new StrippedRewriter() : null
  }

  /**
   * Runs on `implementation` from now on, if it can: a parser made without one (the process-wide default) and
   * fed nothing yet is replaced by one on `implementation`. False if the parser runs elsewhere and cannot move.
   */
  moveTo(implementation: Implementation): boolean {
    if (this.parser.implementation === implementation) return true
    if (this.options.implementation !== undefined || this.tokens > 0 || this.input !== 'tokens' || !this.parser.fresh()) return false
    const parser = new HarmonyStreamParser({ ...this.options, implementation })
    this.parser.close()
    this.parser = parser
    return true
  }

  /** Stripped input: the chunk with its markers put back; the diagnostic once the form is recognised. */
  private unstrip(chunk: string, rewriter: StrippedRewriter): string {
    const seen = rewriter.stripped
    const text = rewriter.push(chunk)
    if (!seen && rewriter.stripped) this.diagnostics.push(strippedDiagnostic(this.tokens))
    return text
  }

  /** Feeds token ids, or a chunk of text when made for text input. */
  pushInput(input: Uint32Array | readonly number[] | string): MessageEvent[] {
    if (typeof input === 'string') {
      if (this.scanner === null) throw new TypeError("this adapter reads token ids; make it with input: 'text' for text")
      return this.pushPieces(this.scanner.push(this.stripped === null ? input : this.unstrip(input, this.stripped)))
    }
    if (this.scanner !== null) throw new TypeError("this adapter reads text (input: 'text'); pass strings")
    return this.push(input)
  }

  /**
   * Text pieces, fed in groups that end at a marker (like the special-token split of `push`). The text
   * between two markers is counted in tokens once it is whole (at the marker or the end): encoding it
   * chunk by chunk would count more tokens than the model produced.
   */
  private pushPieces(pieces: Piece[]): MessageEvent[] {
    const events: MessageEvent[] = []
    let group: Piece[] = []
    for (const piece of pieces) {
      group.push(piece)
      if ('marker' in piece) {
        this.feed(tokensOfPieces(group, byteTokens()), events, this.weighText() + 1)
        group = []
      } else {
        this.unweighed += piece.text
      }
    }
    if (group.length > 0) this.feed(tokensOfPieces(group, byteTokens()), events, 0)
    return events
  }

  /** Tokens of the text since the last marker, which is then forgotten. */
  private weighText(): number {
    const tokens = this.unweighed === '' ? 0 : tokenCount(this.unweighed)
    this.unweighed = ''
    return tokens
  }

  /**
   * Parses a batch. It is fed to the parser in pieces that end at special tokens, so that every message
   * close can be given the exact number of tokens it took (the results do not depend on the split).
   */
  push(tokens: Uint32Array | readonly number[]): MessageEvent[] {
    const events: MessageEvent[] = []
    if (this.endedAtEndOfText || this.stopped) {
      this.ignoreAfterEnd(tokens, 0)
      return events
    }
    let from = 0
    for (let i = 0; i < tokens.length; i++) {
      if (tokens[i] >= FIRST_SPECIAL) {
        if (tokens[i] === END_OF_TEXT) {
          if (from < i) this.feed(part(tokens, from, i), events)
          this.endOfText(events)
          this.ignoreAfterEnd(tokens, i + 1)
          return events
        }
        this.feed(part(tokens, from, i + 1), events)
        from = i + 1
      }
    }
    if (from < tokens.length) this.feed(part(tokens, from, tokens.length), events)
    return events
  }

  /**
   * `<|endoftext|>` from the model: the engines end generation there (llama.cpp and vLLM count it among a
   * gpt-oss model's end-of-generation ids), so the completion ends here rather than taking it as content text,
   * as the reference parser would. A message being read ends as at `<|return|>` (the parser is given that id
   * in its place, so both backends close it the same way, and it counts as the one token it was).
   */
  private endOfText(events: MessageEvent[]): void {
    this.endedAtEndOfText = true
    // Between messages, or before a message's first token (the completion's start): there is nothing to close.
    if (this.parser.state === 'expect-start' || this.pending === 0) {
      this.tokens += 1
      this.pending += 1
    } else {
      this.feed([RETURN], events)
    }
  }

  /** Nothing more is read: later ids are only counted (a stop string ended the answer). */
  stopReading(): void {
    this.stopped = true
  }

  /** Ids after `<|endoftext|>` (an engine that did not stop there) or a stop: counted, not read; the first reported. */
  private ignoreAfterEnd(tokens: Uint32Array | readonly number[], from: number): void {
    if (from >= tokens.length) return
    if (this.endedAtEndOfText && !this.readAfterEnd) {
      this.readAfterEnd = true
      this.diagnostics.push({
        code: 'after-end-of-text',
        message: 'tokens after <|endoftext|> are not read: the completion ended there (they count in usage)',
        tokenOffset: this.tokens,
      })
    }
    this.tokens += tokens.length - from
  }

  /**
   * The fast path of token input: a batch that can only add text to the open message (ordinary tokens
   * inside a message) is parsed without events; returns its text, or null (nothing consumed) otherwise.
   */
  pushText(tokens: Uint32Array | readonly number[]): string | null {
    if (this.scanner !== null) return null
    const text = this.parser.pushText(tokens)
    if (text !== null) {
      this.tokens += tokens.length
      this.pending += tokens.length
    }
    return text
  }

  /** Adds what `SsePool`'s fast lane did on this stream's parser: `tokens` tokens of the open message's `text`. */
  absorbLane(text: string, tokens: number): void {
    this.tokens += tokens
    this.pending += tokens
    this.parser.absorbLaneText(text)
  }

  /** Releases the parser without reading the rest (an abandoned completion). */
  close(): void {
    this.parser.close()
  }

  /** Ends the stream; an unterminated message closes with `terminator: null`. */
  finish(): MessageEvent[] {
    // Text: what the rewriter and the scanner still hold.
    const events =
      this.scanner === null ? [] : this.pushPieces([...this.scanner.push(this.stripped?.finish() ?? ''), ...this.scanner.finish()])
    const rest = this.weighText()
    this.tokens += rest
    this.pending += rest
    this.collect(this.parser.finish(), events, null)
    return events
  }

  /** Parses `piece`, which stands for `weight` tokens of the completion (its length, for token input). */
  private feed(piece: Uint32Array | readonly number[], events: MessageEvent[], weight = piece.length): void {
    this.tokens += weight
    this.pending += weight
    this.collect(this.parser.push(piece), events, piece[piece.length - 1])
  }

  /**
   * The batch's events in message order: for each message its open, its text, then its close (the i-th
   * completed message is message `this.closed`). A message closed without an open in this batch was opened
   * earlier (or, lenient, never: the adapters then route it at its close).
   */
  private collect(batch: HarmonyBatch, events: MessageEvent[], last: number | null): void {
    // A loop, not push(...spread): most batches have no diagnostic, and a spread call costs even then.
    for (const diagnostic of batch.diagnostics) this.diagnostics.push(diagnostic)
    const { opened, segments, completed } = batch
    let o = 0
    let s = 0
    let c = 0
    while (o < opened.length || s < segments.length || c < completed.length) {
      const openIndex = o < opened.length ? opened[o].messageIndex : Number.POSITIVE_INFINITY
      const textIndex = s < segments.length ? segments[s].messageIndex : Number.POSITIVE_INFINITY
      const closeIndex = c < completed.length ? this.closed : Number.POSITIVE_INFINITY
      if (openIndex <= textIndex && openIndex <= closeIndex) events.push({ kind: 'open', opened: opened[o++] })
      else if (textIndex <= closeIndex) events.push({ kind: 'text', segment: segments[s++] })
      else this.closeMessage(completed[c++], events, last)
    }
  }

  private closeMessage(message: HarmonyMessage, events: MessageEvent[], last: number | null): void {
    let tokens = this.pending
    // Lenient mode closes a message left open when the next one starts: that <|start|> or <|channel|>
    // belongs to the next message.
    const startsNext = message.terminator === null && (last === START || last === CHANNEL) && this.parser.state === 'header'
    if (startsNext) tokens -= 1
    this.pending -= tokens
    events.push({ kind: 'close', index: this.closed++, message, tokens })
  }
}
