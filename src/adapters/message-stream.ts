/**
 * Turns parser batches into an ordered list of per-message events, with exact token counts per message,
 * for the wire adapters. Built only on the parser contract (`push`/`finish` → `HarmonyBatch`), so it works
 * on either implementation.
 *
 * A batch can end one message and start the next (the bug behind vLLM #27641 and #31501); its segments and
 * completed messages are therefore re-interleaved by message index: a message's text always comes before
 * its close, and its close before the next message's text.
 */
import { HarmonyStreamParser } from '../parser'
import type { HarmonyDiagnostic, HarmonyMessage, HarmonySegment, HarmonyStreamParserOptions } from '../types'

/** First id of the special tokens: a message can only open or close at one of them. */
const FIRST_SPECIAL = 199_998
const START = 200_006
const CHANNEL = 200_005

export type MessageEvent =
  | { kind: 'text'; segment: HarmonySegment }
  | { kind: 'close'; index: number; message: HarmonyMessage; tokens: number }

export class MessageStream {
  readonly parser: HarmonyStreamParser
  /** Tokens pushed so far. */
  tokens = 0
  /** Messages closed so far. */
  closed = 0
  /** Diagnostics of everything pushed so far. */
  readonly diagnostics: HarmonyDiagnostic[] = []
  /** Tokens since the last close: the header, content and terminator of the message being read. */
  private pending = 0

  constructor(options: HarmonyStreamParserOptions = {}) {
    this.parser = new HarmonyStreamParser(options)
  }

  /**
   * Parses a batch. It is fed to the parser in pieces that end at special tokens, so that every message
   * close can be given the exact number of tokens it took (the results do not depend on the split).
   */
  push(tokens: Uint32Array | readonly number[]): MessageEvent[] {
    const events: MessageEvent[] = []
    let from = 0
    for (let i = 0; i < tokens.length; i++) {
      if (tokens[i] >= FIRST_SPECIAL) {
        this.feed(tokens.slice(from, i + 1), events)
        from = i + 1
      }
    }
    if (from < tokens.length) this.feed(from === 0 ? tokens : tokens.slice(from), events)
    return events
  }

  /** Ends the stream; an unterminated message closes with `terminator: null`. */
  finish(): MessageEvent[] {
    const events: MessageEvent[] = []
    this.collect(this.parser.finish(), events, null)
    return events
  }

  private feed(piece: Uint32Array | readonly number[], events: MessageEvent[]): void {
    this.tokens += piece.length
    this.pending += piece.length
    this.collect(this.parser.push(piece), events, piece[piece.length - 1])
  }

  private collect(batch: { segments: HarmonySegment[]; completed: HarmonyMessage[]; diagnostics: HarmonyDiagnostic[] }, events: MessageEvent[], last: number | null): void {
    this.diagnostics.push(...batch.diagnostics)
    let next = 0
    const closeUpTo = (index: number) => {
      while (next < batch.completed.length && this.closed < index) this.close(batch.completed[next++], events, last)
    }
    for (const segment of batch.segments) {
      closeUpTo(segment.messageIndex)
      events.push({ kind: 'text', segment })
    }
    closeUpTo(Number.POSITIVE_INFINITY)
  }

  private close(message: HarmonyMessage, events: MessageEvent[], last: number | null): void {
    let tokens = this.pending
    // Lenient mode closes a message left open when the next one starts: that <|start|> or <|channel|>
    // belongs to the next message.
    const startsNext = message.terminator === null && (last === START || last === CHANNEL) && this.parser.state === 'header'
    if (startsNext) tokens -= 1
    this.pending -= tokens
    events.push({ kind: 'close', index: this.closed++, message, tokens })
  }
}
