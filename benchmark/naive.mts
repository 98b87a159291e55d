/**
 * The baseline a gateway writes by hand: decode each batch to text with special tokens as strings, append
 * it to the stream's text, and re-split the whole text on the markers with regular expressions to find
 * the current message and the text it gained. Quadratic in the stream's length, as such code usually is.
 */
import { decode } from 'gpt-tokenizer/encoding/o200k_harmony'

const MESSAGE =
  /(?:<\|start\|>)?([^<]*(?:<\|channel\|>[^<]*)?(?:<\|constrain\|>[^<]*)?)<\|message\|>([\s\S]*?)(<\|end\|>|<\|call\|>|<\|return\|>|$)/g

export class NaiveParser {
  private text = ''
  private emitted: number[] = []

  /** Returns the new text of each message touched by the batch, with the message's header text. */
  push(tokens: number[]): { header: string; delta: string }[] {
    this.text += decode(tokens)
    const out: { header: string; delta: string }[] = []
    let index = 0
    for (const match of this.text.matchAll(MESSAGE)) {
      const content = match[2]
      const seen = this.emitted[index] ?? 0
      if (content.length > seen) {
        out.push({ header: match[1], delta: content.slice(seen) })
        this.emitted[index] = content.length
      }
      index++
    }
    return out
  }
}
