/**
 * UTF-8 assembly across tokens and batches. Mirrors crate/core/src/utf8.rs.
 *
 * An incomplete sequence is held until it completes; invalid bytes become U+FFFD, one per maximal invalid
 * subpart (the rule of Rust's `from_utf8_lossy` and of WHATWG decoding). The text emitted for a message is
 * therefore exactly the lossy decoding of all its bytes, however they were split. Validation is written
 * out here, following Rust's `Utf8Error` (`valid_up_to`, `error_len`), so both implementations cut at the
 * same bytes; only already-valid ranges go to TextDecoder.
 */

// ignoreBOM: a U+FEFF inside the model's text is content, not a byte order mark to strip.
const decoder = new TextDecoder('utf-8', { ignoreBOM: true })
const REPLACEMENT = '\uFFFD'

/** Ranges up to this long are decoded by hand: a TextDecoder call costs more than a few characters. */
const SHORT = 16

/** Decodes bytes[start, end), which must be valid UTF-8. */
export function decodeValid(bytes: Uint8Array, start: number, end: number): string {
  if (end - start > SHORT) return decoder.decode(bytes.subarray(start, end))
  let text = ''
  for (let i = start; i < end; ) {
    const lead = bytes[i]
    let point: number
    if (lead < 0x80) {
      point = lead
      i += 1
    } else if (lead < 0xe0) {
      point = ((lead & 0x1f) << 6) | (bytes[i + 1] & 0x3f)
      i += 2
    } else if (lead < 0xf0) {
      point = ((lead & 0x0f) << 12) | ((bytes[i + 1] & 0x3f) << 6) | (bytes[i + 2] & 0x3f)
      i += 3
    } else {
      point = ((lead & 0x07) << 18) | ((bytes[i + 1] & 0x3f) << 12) | ((bytes[i + 2] & 0x3f) << 6) | (bytes[i + 3] & 0x3f)
      i += 4
    }
    text += String.fromCodePoint(point)
  }
  return text
}

/**
 * Length of the sequence at `at` if it is well formed and complete; otherwise the negated length of its
 * maximal invalid subpart (at least 1), or 0 if it is a valid but incomplete prefix ending at `end`.
 */
function sequenceAt(bytes: Uint8Array, at: number, end: number): number {
  const lead = bytes[at]
  if (lead < 0x80) return 1
  let length: number
  let low = 0x80 // allowed range of the second byte (Unicode Table 3-7)
  let high = 0xbf
  if (lead >= 0xc2 && lead <= 0xdf) length = 2
  else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3
    if (lead === 0xe0) low = 0xa0
    else if (lead === 0xed) high = 0x9f
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4
    if (lead === 0xf0) low = 0x90
    else if (lead === 0xf4) high = 0x8f
  } else return -1
  for (let k = 1; k < length; k++) {
    if (at + k >= end) return 0
    const byte = bytes[at + k]
    if (byte < low || byte > high) return -k
    low = 0x80
    high = 0xbf
  }
  return length
}

/** Index of the first byte in [start, end) that does not begin a complete valid sequence, or `end`. */
export function validUpTo(bytes: Uint8Array, start: number, end: number): number {
  let i = start
  while (i < end) {
    if (bytes[i] < 0x80) {
      i++
      continue
    }
    const length = sequenceAt(bytes, i, end)
    if (length <= 0) return i
    i += length
  }
  return end
}

/**
 * Lossy decoding of bytes[start, end) into `parts`. Returns the start of a trailing incomplete sequence,
 * or `end` if there is none.
 */
function decodeInto(bytes: Uint8Array, start: number, end: number, parts: string[]): number {
  let position = start
  for (;;) {
    const valid = validUpTo(bytes, position, end)
    if (valid > position) parts.push(decodeValid(bytes, position, valid))
    if (valid === end) return end
    const length = sequenceAt(bytes, valid, end)
    if (length === 0) return valid
    parts.push(REPLACEMENT)
    position = valid - length // length is the negated size of the invalid subpart
  }
}

/** Lossy decoding of a complete byte string (nothing held back). */
export function decodeLossy(bytes: Uint8Array): string {
  const parts: string[] = []
  if (decodeInto(bytes, 0, bytes.length, parts) < bytes.length) parts.push(REPLACEMENT)
  return parts.join('')
}

const NOTHING = new Uint8Array(0)

export class Utf8Assembler {
  /** Bytes of an incomplete (so far valid) sequence: at most 3. */
  private pending = NOTHING

  isEmpty(): boolean {
    return this.pending.length === 0
  }

  /** Decodes `bytes` after whatever is pending; keeps an incomplete trailing sequence for the next call. */
  push(bytes: Uint8Array): string {
    let input = bytes
    if (this.pending.length > 0) {
      input = new Uint8Array(this.pending.length + bytes.length)
      input.set(this.pending)
      input.set(bytes, this.pending.length)
    }
    const parts: string[] = []
    const rest = decodeInto(input, 0, input.length, parts)
    this.pending = rest === input.length ? NOTHING : input.slice(rest)
    return parts.length === 1 ? parts[0] : parts.join('')
  }

  /** Ends the stream: an incomplete sequence becomes one U+FFFD. */
  flush(): string {
    if (this.pending.length === 0) return ''
    this.pending = NOTHING
    return REPLACEMENT
  }
}
