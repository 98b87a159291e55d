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

/** Where decoded text goes (as `TextSink` in utf8.rs): `BatchOutput` is one. */
export interface TextSink {
  text: string
}

/**
 * Appends the lossy decoding of bytes[start, end) to `out`, except a trailing incomplete sequence, whose
 * start it returns (`end` if there is none).
 */
function decodeInto(bytes: Uint8Array, start: number, end: number, out: TextSink): number {
  let position = start
  for (;;) {
    const valid = validUpTo(bytes, position, end)
    if (valid > position) out.text += decodeValid(bytes, position, valid)
    if (valid === end) return end
    const length = sequenceAt(bytes, valid, end)
    if (length === 0) return valid
    out.text += REPLACEMENT
    position = valid - length // length is the negated size of the invalid subpart
  }
}

/** Lossy decoding of a complete byte string (nothing held back). */
export function decodeLossy(bytes: Uint8Array): string {
  const out = { text: '' }
  if (decodeInto(bytes, 0, bytes.length, out) < bytes.length) out.text += REPLACEMENT
  return out.text
}

/** The longest incomplete sequence held between pushes (a 4-byte character missing its last byte). */
const MAX_PENDING = 3

/**
 * Pending bytes + a token's bytes, decoded together; shared by the assemblers of this thread (a push is
 * synchronous and done with it when it returns). Grows to the longest token seen after a split character.
 */
let joined = new Uint8Array(64)

export class Utf8Assembler {
  /**
   * Bytes of an incomplete (so far valid) sequence: the first `pendingLength`, at most 3. Made when first
   * needed: most streams never split a character, and an idle parser should stay small.
   */
  private pending: Uint8Array | null = null
  private pendingLength = 0

  isEmpty(): boolean {
    return this.pendingLength === 0
  }

  /**
   * Appends the decoding of bytes[start, end), after whatever is pending, to `out`; keeps an incomplete
   * trailing sequence for the next call. Takes a range so that a token's bytes are read where the
   * vocabulary keeps them: a view per token would cost more than decoding it.
   */
  push(bytes: Uint8Array, start: number, end: number, out: TextSink): void {
    if (this.pendingLength === 0) {
      this.hold(bytes, decodeInto(bytes, start, end, out), end)
      return
    }
    const length = this.join(bytes, start, end)
    this.hold(joined, decodeInto(joined, 0, length, out), length)
  }

  /** Writes the pending bytes followed by bytes[start, end) into `joined`; returns their length. */
  private join(bytes: Uint8Array, start: number, end: number): number {
    const length = this.pendingLength + end - start
    if (joined.length < length) joined = new Uint8Array(Math.max(length, 2 * joined.length))
    for (let i = 0; i < this.pendingLength; i++) joined[i] = this.pending![i]
    for (let i = start; i < end; i++) joined[this.pendingLength + i - start] = bytes[i]
    return length
  }

  /** Keeps bytes[from, end), an incomplete sequence (or nothing), for the next push. */
  private hold(bytes: Uint8Array, from: number, end: number): void {
    this.pendingLength = end - from
    if (from === end) return
    const pending = (this.pending ??= new Uint8Array(MAX_PENDING))
    for (let i = from; i < end; i++) pending[i - from] = bytes[i]
  }

  /** Ends the stream: an incomplete sequence becomes one U+FFFD. */
  flush(out: TextSink): void {
    if (this.pendingLength === 0) return
    this.pendingLength = 0
    out.text += REPLACEMENT
  }
}
