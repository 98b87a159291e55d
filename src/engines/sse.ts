/**
 * A reader of `text/event-stream` bodies as the engines write them (vLLM, SGLang and llama.cpp all write
 * `data: <json>\n\n`; see the engine files): events separated by a blank line, `data:` lines joined by "\n"
 * when an event has several, `\r\n` or `\n` line ends, comments (`:`) and unknown fields ignored, bytes split
 * anywhere, even inside a UTF-8 character. Also `error: {…}` lines, which llama.cpp servers before the
 * `data: {"error": …}` framing wrote for a failure mid-stream (reported as an event named `error`).
 *
 * Bounded: an event whose text grows past `maxEventBytes` throws as soon as it does, however it is split, so a
 * broken or hostile engine cannot make the reader buffer without limit. (The count is in UTF-16 code units of
 * the decoded text, never more than the UTF-8 bytes it came from.)
 */
import { StringDecoder } from 'node:string_decoder'

export interface SseEvent {
  /** `message` (plain `data:` events) or the `event:` field; `error` for llama.cpp's `error:` lines. */
  event: string
  data: string
}

export class SseReader {
  private pending = ''
  // Node's decoder, not TextDecoder: it makes one-byte strings of ASCII (every event of an engine's token stream
  // but its text), which the reader and the event readers then scan several times faster, and decodes 5-8x faster.
  private readonly decoder = new StringDecoder('utf8')
  private readonly data: string[] = []
  private event = 'message'
  private size = 0

  constructor(private readonly maxEventBytes: number) {}

  push(chunk: Uint8Array): SseEvent[] {
    this.pending += this.decoder.write(chunk)
    const events: SseEvent[] = []
    let start = 0
    const { pending } = this
    for (;;) {
      const newline = pending.indexOf('\n', start)
      if (newline < 0) break
      const end = newline > start && pending.charCodeAt(newline - 1) === CR ? newline - 1 : newline
      // `data: …` lines, nearly every line of an engine's stream, are read without slicing the line first.
      if (isDataLine(pending, start, end)) this.value(pending.slice(start + DATA.length, end))
      else this.line(pending.slice(start, end), events)
      start = newline + 1
    }
    this.pending = this.pending.slice(start)
    if (this.size + this.pending.length > this.maxEventBytes) throw new Error(`an event is larger than ${this.maxEventBytes} bytes`)
    return events
  }

  /** The end of the body: a last event not followed by a blank line still counts. */
  end(): SseEvent[] {
    const events: SseEvent[] = []
    this.pending += this.decoder.end()
    if (this.pending !== '') this.line(this.pending.replace(/\r$/, ''), events)
    this.pending = ''
    this.line('', events)
    return events
  }

  /** The value of a `data` line, counted and kept. */
  private value(value: string): void {
    this.count(value)
    this.data.push(value)
  }

  /** A field's value counted towards its event's size, which must stay within `maxEventBytes`. */
  private count(value: string): void {
    this.size += value.length
    if (this.size > this.maxEventBytes) throw new Error(`an event is larger than ${this.maxEventBytes} bytes`)
  }

  private line(line: string, events: SseEvent[]): void {
    if (line === '') {
      const { data } = this
      if (data.length > 0) events.push({ event: this.event, data: data.length === 1 ? data[0]! : data.join('\n') })
      // Emptied, not replaced: one array for the stream, not one per event.
      data.length = 0
      this.event = 'message'
      this.size = 0
      return
    }
    if (line.startsWith(':')) return
    const colon = line.indexOf(':')
    const field = colon < 0 ? line : line.slice(0, colon)
    let value = colon < 0 ? '' : line.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (field === 'data') {
      this.value(value)
      return
    }
    this.count(value)
    if (field === 'event') this.event = value
    else if (field === 'error') {
      this.event = 'error'
      this.data.push(value)
    }
  }
}

const CR = 13
const DATA = 'data: '

/** `text[start, end)` is a line that begins `data: ` (the field and its one optional space). */
function isDataLine(text: string, start: number, end: number): boolean {
  return end - start >= DATA.length && text.startsWith(DATA, start)
}
