/**
 * OpenAI's `stop` on the answer's text: the text before the first stop string is delivered, never the stop
 * string or what follows, also when the string arrives split across tokens, steps or messages' deltas. Text
 * that could still be the start of a stop string is held back until it cannot (at most the longest stop
 * string less one character), and released when the answer's message ends without one.
 */
export class StopStrings {
  private readonly strings: readonly string[]
  /** Text held back: it ends with what could be the start of a stop string. */
  private held = ''
  /** The stop string found (the first of them that starts where the text was cut), once one is. */
  matched: string | null = null
  /** The longest stop string, less one: no more is ever held. */
  private readonly holdAtMost: number

  constructor(stop: string | readonly string[]) {
    this.strings = typeof stop === 'string' ? [stop] : stop
    this.holdAtMost = Math.max(...this.strings.map((s) => s.length)) - 1
  }

  /**
   * The text to deliver now for `text` arriving after what came before; `stopped` when a stop string was found
   * (the text returned is then everything before it, and nothing more is to be delivered).
   */
  feed(text: string): { text: string; stopped: boolean } {
    const buffer = this.held + text
    let at = -1
    for (const stop of this.strings) {
      const found = buffer.indexOf(stop)
      if (found >= 0 && (at < 0 || found < at)) at = found
    }
    if (at >= 0) {
      this.matched = this.strings.find((stop) => buffer.startsWith(stop, at)) ?? null
      this.held = ''
      return { text: buffer.slice(0, at), stopped: true }
    }
    const keep = this.heldSuffix(buffer)
    this.held = buffer.slice(buffer.length - keep)
    return { text: buffer.slice(0, buffer.length - keep), stopped: false }
  }

  /** What is held back, released (the message ended without a stop string). */
  flush(): string {
    const held = this.held
    this.held = ''
    return held
  }

  /** The length of the longest suffix of `buffer` that is a proper prefix of a stop string. */
  private heldSuffix(buffer: string): number {
    for (let length = Math.min(this.holdAtMost, buffer.length); length > 0; length--) {
      const suffix = buffer.slice(buffer.length - length)
      if (this.strings.some((stop) => stop.startsWith(suffix))) return length
    }
    return 0
  }
}
