/**
 * The stripped form: some servers drop Harmony's special tokens from the text they stream
 * (`skip_special_tokens`), so `<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final
 * <|message|>Hi` arrives as `analysisThink.assistantfinalHi`. When a stream starts with a channel name and no
 * marker, this rewrites it back into marker form: the leading channel name opens a message, and every
 * `assistant` + channel name starts the next one. Headers with recipients cannot be told from content in
 * this form, so tool calls are not recovered. Like the marker scanner, it holds back only a suffix that could
 * still become a separator, and scans each character a bounded number of times.
 */

const CHANNELS = ['analysis', 'commentary', 'final']
const SEPARATORS = CHANNELS.map((channel) => `assistant${channel}`)
const LONGEST_CHANNEL = Math.max(...CHANNELS.map((c) => c.length))
const LONGEST_SEPARATOR = Math.max(...SEPARATORS.map((s) => s.length))

const opening = (channel: string) => `<|channel|>${channel}<|message|>`

export class StrippedRewriter {
  private mode: 'undecided' | 'stripped' | 'plain' = 'undecided'
  private held = ''

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
      return opening(channel) + this.rewrite(text.slice(channel.length))
    }
    return this.rewrite(text)
  }

  /** The end of the input: held text is released as it is. */
  finish(): string {
    const held = this.held
    this.held = ''
    return held
  }

  private rewrite(text: string): string {
    let out = ''
    let from = 0
    let at = text.indexOf('assistant')
    while (at >= 0) {
      const separator = SEPARATORS.find((s) => text.startsWith(s, at))
      if (separator !== undefined) {
        out += `${text.slice(from, at)}<|end|><|start|>assistant${opening(separator.slice('assistant'.length))}`
        from = at + separator.length
        at = text.indexOf('assistant', from)
        continue
      }
      if (text.length - at < LONGEST_SEPARATOR && SEPARATORS.some((s) => s.startsWith(text.slice(at)))) {
        this.held = text.slice(at)
        return out + text.slice(from, at)
      }
      at = text.indexOf('assistant', at + 1)
    }
    // A chunk may end inside the word `assistant` itself.
    for (let keep = Math.min('assistant'.length - 1, text.length - from); keep > 0; keep--) {
      if ('assistant'.startsWith(text.slice(text.length - keep))) {
        this.held = text.slice(text.length - keep)
        return out + text.slice(from, text.length - keep)
      }
    }
    return out + text.slice(from)
  }
}
