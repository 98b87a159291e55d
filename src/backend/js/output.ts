/**
 * What one `push` or `finish` produced. Mirrors crate/core/src/output.rs: the batch text, events that cut
 * it into per-message segments (encoded as in the backend protocol, `protocol.ts`), the headers of messages
 * opened in the batch, and diagnostics.
 */
import { EVENT_CLOSE, EVENT_OPEN, EVENT_TEXT, type ResultVisitor } from '../protocol'
import type { Header } from './header'

export interface Diagnostic {
  code: string
  message: string
  /** Offset in the parser's token stream (counted from 0 over all batches) where it was detected. */
  tokenOffset: number
  /** The raw text involved (ignored tokens, a header that could not be parsed). */
  text: string | null
}

export interface ParseError {
  code: string
  message: string
  tokenOffset: number
  /** The decoded header text, for header errors. */
  header: string | null
}

export class BatchOutput {
  text = ''
  /**
   * Flat triples: kind, message index, argument; the first `eventSlots` entries are this batch's. The array
   * is reused from batch to batch rather than truncated: truncating is a runtime call in V8 that also drops
   * the backing store, which the next batch would allocate again (at batch 1, on every token).
   */
  readonly events: number[] = []
  eventSlots = 0
  headers: Header[] = []
  diagnostics: Diagnostic[] = []
  /** End of the text already attributed to a message by a text event. */
  private marked = 0

  clear(): void {
    // Setting an array's length is a runtime call in V8; most batches have no headers or diagnostics.
    this.text = ''
    this.eventSlots = 0
    if (this.headers.length !== 0) this.headers.length = 0
    if (this.diagnostics.length !== 0) this.diagnostics.length = 0
    this.marked = 0
  }

  open(message: number, header: Header): void {
    this.addEvent(EVENT_OPEN, message, 0)
    this.headers.push(header)
  }

  /** The text appended since the last event belongs to `message`; extends that message's last segment. */
  markText(message: number): void {
    const end = this.text.length
    if (end === this.marked) return
    this.marked = end
    const last = this.eventSlots - 3
    if (last >= 0 && this.events[last] === EVENT_TEXT && this.events[last + 1] === message) {
      this.events[last + 2] = end
      return
    }
    this.addEvent(EVENT_TEXT, message, end)
  }

  close(message: number, terminator: number): void {
    this.addEvent(EVENT_CLOSE, message, terminator)
  }

  /** Reports the events to `visitor` in order, with the text of each text event. */
  visit(visitor: ResultVisitor): void {
    const events = this.events
    let header = 0
    let textStart = 0
    for (let i = 0; i < this.eventSlots; i += 3) {
      const kind = events[i]
      const message = events[i + 1]
      if (kind === EVENT_TEXT) {
        const textEnd = events[i + 2]
        visitor.text(message, this.text.slice(textStart, textEnd))
        textStart = textEnd
      } else if (kind === EVENT_OPEN) {
        visitor.open(message, this.headers[header++])
      } else {
        visitor.close(message, events[i + 2])
      }
    }
  }

  private addEvent(kind: number, message: number, argument: number): void {
    const at = this.eventSlots
    this.events[at] = kind
    this.events[at + 1] = message
    this.events[at + 2] = argument
    this.eventSlots = at + 3
  }
}
