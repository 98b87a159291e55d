/**
 * The stripped form: some servers drop Harmony's special tokens from the text they stream
 * (`skip_special_tokens`), so `<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final
 * <|message|>Hi` arrives as `analysisThink.assistantfinalHi`. When a stream starts with a channel name and no
 * marker, this rewrites it back into marker form: the leading channel name opens a message, and every
 * `assistant` + channel name starts the next one.
 *
 * A tool call survives in that form as `commentary to=functions.get_weather json{"city":"Paris"}` (Rapid-MLX
 * #480): a commentary channel followed by ` to=` is a header with a recipient, which runs to where its
 * arguments begin (`{`, `[`, `"` or a line break) and is given its `<|message|>` there; the token parser's
 * header rules then read the recipient and content type as in any header (`json` glued to the recipient is
 * split off by `toolNames`). A header that finds no such start within `LONGEST_HEADER` characters gets its
 * `<|message|>` at that bound. Like the marker scanner, it holds back only a suffix that could still become a
 * separator (or a header being read), and scans each character a bounded number of times.
 */

const CHANNELS = ['analysis', 'commentary', 'final']
const SEPARATORS = CHANNELS.map((channel) => `assistant${channel}`)
const LONGEST_CHANNEL = Math.max(...CHANNELS.map((c) => c.length))
const LONGEST_SEPARATOR = Math.max(...SEPARATORS.map((s) => s.length))
/** A recipient header longer than this is no header: its message starts here. */
const LONGEST_HEADER = 256
/** What begins a call's arguments, ending the header before it. */
const ARGUMENTS_START = /[{["\n]/

/** The diagnostic of a stream recognised as stripped, at `tokenOffset` (what the text parser and the adapters say). */
export function strippedDiagnostic(tokenOffset: number): { code: string; message: string; tokenOffset: number } {
  return {
    code: 'stripped-markers',
    message: 'the text starts with a channel name and has no markers: read as the stripped form (analysis…assistantfinal…)',
    tokenOffset,
  }
}

export class StrippedRewriter {
  private mode: 'undecided' | 'stripped' | 'plain' = 'undecided'
  private held = ''
  /** A commentary header whose `<|message|>` is not yet placed: the text after the channel name so far. */
  private header: string | null = null
  /** Whether the message being read has a recipient (a tool call): what its end is. */
  private calling = false

  /** True once the stream was found to be in the stripped form. */
  get stripped(): boolean {
    return this.mode === 'stripped'
  }

  /** The chunk, rewritten into marker form if the stream is stripped. */
  push(chunk: string): string {
    if (this.mode === 'plain') return chunk
    const text = this.held + chunk
    this.held = ''
    if (this.mode === 'undecided') {
      const channel = CHANNELS.find((c) => text.startsWith(c))
      if (channel === undefined) {
        // Still possibly a channel name cut short: wait for more.
        if (text.length < LONGEST_CHANNEL && CHANNELS.some((c) => c.startsWith(text))) {
          this.held = text
          return ''
        }
        this.mode = 'plain'
        return text
      }
      this.mode = 'stripped'
      return this.opening(channel) + this.rewrite(text.slice(channel.length))
    }
    return this.rewrite(text)
  }

  /**
   * The end of the input: held text is released as it is (a header being read gets its `<|message|>`); in the
   * stripped form, the last message gets the stop token the server dropped (`<|call|>` after a recipient,
   * `<|return|>` else), since the text ended where the model stopped.
   */
  finish(): string {
    let out = this.held
    if (this.header !== null) {
      const header = this.header
      const to = header.replace(/^[ \t]+/, '')
      this.calling = to.startsWith('to=')
      out = this.calling ? `${header === to ? ' ' : ''}${header}<|message|>` : `<|message|>${header}`
    }
    if (this.mode === 'stripped') out += this.calling ? '<|call|>' : '<|return|>'
    this.held = ''
    this.header = null
    return out
  }

  /** A message's opening up to its header: a commentary message's header is read before its `<|message|>`. */
  private opening(channel: string): string {
    this.calling = false
    if (channel !== 'commentary') return `<|channel|>${channel}<|message|>`
    this.header = ''
    return `<|channel|>${channel}`
  }

  /** `text` rewritten: headers read, separators turned into markers; a suffix that may still become one held. */
  private rewrite(text: string): string {
    let out = ''
    let rest: string | null = text
    while (rest !== null) {
      if (this.header !== null) {
        const read = this.readHeader(rest)
        out += read.out
        if (read.rest === null) return out
        rest = read.rest
      }
      const scanned = this.scan(rest)
      out += scanned.out
      if (scanned.next === null) return out
      out += `<|end|><|start|>assistant${this.opening(scanned.next.channel)}`
      rest = scanned.next.rest
    }
    return out
  }

  /**
   * Text after a commentary channel name: a recipient header (` to=…`) up to where its arguments begin, then
   * `<|message|>`; anything else starts the message at once (a preamble). `rest`: the text after it, or null
   * when all of it is held as the header still being read.
   */
  private readHeader(text: string): { out: string; rest: string | null } {
    const header = (this.header as string) + text
    const to = header.replace(/^[ \t]+/, '')
    // Not yet enough text to tell ` to=` from a preamble.
    if (to.length < 3 && 'to='.startsWith(to) && header.length < LONGEST_HEADER) {
      this.header = header
      return { out: '', rest: null }
    }
    if (!to.startsWith('to=')) {
      this.header = null
      return { out: '<|message|>', rest: header }
    }
    const at = header.search(ARGUMENTS_START)
    if (at < 0 && header.length < LONGEST_HEADER) {
      this.header = header
      return { out: '', rest: null }
    }
    this.header = null
    this.calling = true
    const end = at < 0 ? LONGEST_HEADER : Math.min(at, LONGEST_HEADER)
    // `commentaryto=…` keeps the channel name a word of its own.
    const space = header === to ? ' ' : ''
    return { out: `${space}${header.slice(0, end)}<|message|>`, rest: header.slice(end) }
  }

  /**
   * Message text up to the first separator (`assistant` + a channel name): the text before it, and the channel
   * and the text after it; `next` null when there is none (a suffix that may still become one is held).
   */
  private scan(text: string): { out: string; next: { channel: string; rest: string } | null } {
    let at = text.indexOf('assistant')
    while (at >= 0) {
      const separator = SEPARATORS.find((s) => text.startsWith(s, at))
      if (separator !== undefined)
        return {
          out: text.slice(0, at),
          next: { channel: separator.slice('assistant'.length), rest: text.slice(at + separator.length) },
        }
      if (text.length - at < LONGEST_SEPARATOR && SEPARATORS.some((s) => s.startsWith(text.slice(at)))) {
        this.held = text.slice(at)
        return { out: text.slice(0, at), next: null }
      }
      at = text.indexOf('assistant', at + 1)
    }
    // A chunk may end inside the word `assistant` itself.
    for (let keep = Math.min('assistant'.length - 1, text.length); keep > 0; keep--) {
      if ('assistant'.startsWith(text.slice(text.length - keep))) {
        this.held = text.slice(text.length - keep)
        return { out: text.slice(0, text.length - keep), next: null }
      }
    }
    return { out: text, next: null }
  }
}
