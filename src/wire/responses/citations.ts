/**
 * gpt-oss's citation markers in an answer's text, replaced as gpt-oss's own browser tool replaces them
 * (openai/gpt-oss, gpt_oss/tools/simple_browser/simple_browser_tool.py: `normalize_citations`, its
 * `CITATION_OUTPUT_PATTERN` and `extract_domain`), while the text streams:
 *
 * - a marker is `【` cursor `†` part `】` or `【` cursor `†` part `†` part `】`: the cursor one or more decimal
 *   digits (Python's `\d`: any Unicode decimal digit), each part one or more characters that are neither `†` nor
 *   `】` (`【` and line breaks included), found left to right, none inside another
 *   (`【(?P<cursor>\d+)†(?P<content>[^†】]+)(?:†[^†】]+)?】`);
 * - a marker whose cursor showed a page with an address becomes ` ([domain](url)) `, the domain being the third
 *   `/`-separated field of the percent-decoded address (the whole address when it has none), and gets a
 *   `url_citation` annotation over exactly that replacement, spaces included;
 * - a marker whose cursor showed no page (or a page without an address, as search results are) stays as written,
 *   without an annotation; so does a cursor written with leading zeros or in other digits, which the reference
 *   looks up by Python's `str(index)` and never finds.
 *
 * Where the reference finds markers in the whole text, the stream holds back text from a `【` only while it can
 * still become a marker, so that the deltas add up to the text the whole answer gets. The hold is bounded: a
 * marker is at most `MARKER_LIMIT` UTF-16 code units, `【` and `】` included; a `【` that has not become one by
 * then is text, released at once, in the whole answer as in the stream (a bound the reference, which sees whole
 * texts, does not need; real markers, `【6†L9-L11】` or a link's `【3†title†domain】`, are far shorter).
 *
 * `start_index` and `end_index` count Unicode code points, as the reference computes them (Python's `len`) and
 * as a Python client's `text[start:end]` reads them; `end_index` is exclusive, as in OpenAI's own web search
 * answers. A JavaScript client slices `Array.from(text).slice(start, end)`.
 */

import type { UrlCitation } from './types'

/** The longest marker, in UTF-16 code units: what a stream may hold back at most. */
export const MARKER_LIMIT = 256

const CLOSE = 0x3011 // 】
const DAGGER = 0x2020 // †
/** `scan`: the text ends before it can tell. */
const UNDECIDED = 0
/** `scan`: not a marker. */
const NOT_A_MARKER = -1

/** Any Unicode decimal digit, as Python's `\d` on a `str`. */
const DIGIT = /^\p{Nd}$/u

/**
 * The end (exclusive) of the marker starting at `start` (a `【`) in `text`; NOT_A_MARKER when none starts there;
 * UNDECIDED when the text ends while one still may.
 */
function scan(text: string, start: number): number {
  // 0: the cursor's digits; 1: the first part; 2: the second part. `run`: characters read of it.
  let phase = 0
  let run = 0
  const last = Math.min(text.length, start + MARKER_LIMIT)
  for (let i = start + 1; i < last; i++) {
    const c = text.charCodeAt(i)
    if (phase === 0) {
      if (c >= 0x30 && c <= 0x39) {
        run++
        continue
      }
      if (c === DAGGER && run > 0) {
        phase = 1
        run = 0
        continue
      }
      if (c < 0x80) return NOT_A_MARKER
      // A character cut in two by the end of what came: it may be a digit.
      if (c >= 0xd800 && c <= 0xdbff && i + 1 === last) break
      const point = text.codePointAt(i)!
      if (!DIGIT.test(String.fromCodePoint(point))) return NOT_A_MARKER
      if (point > 0xffff) i++
      run++
      continue
    }
    if (c === CLOSE) return run > 0 ? i + 1 : NOT_A_MARKER
    if (c === DAGGER) {
      if (phase === 1 && run > 0) {
        phase = 2
        run = 0
        continue
      }
      return NOT_A_MARKER
    }
    run++
  }
  return last === start + MARKER_LIMIT ? NOT_A_MARKER : UNDECIDED
}

/** The cursor of a marker as the reference looks it up (`str(index)`): plain digits without leading zeros; else null. */
function cursorOf(marker: string): number | null {
  const digits = marker.slice(1, marker.indexOf('†'))
  if (!/^(?:0|[1-9]\d*)$/.test(digits)) return null
  const cursor = Number(digits)
  return Number.isSafeInteger(cursor) ? cursor : null
}

/** Python's `urllib.parse.unquote`: each run of `%XX` escapes decoded as UTF-8, bad sequences as U+FFFD. */
function unquote(url: string): string {
  if (!url.includes('%')) return url
  const decoder = new TextDecoder('utf-8')
  return url.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => {
    const bytes = new Uint8Array(run.length / 3)
    for (let i = 0; i < bytes.length; i++) bytes[i] = Number.parseInt(run.slice(i * 3 + 1, i * 3 + 3), 16)
    return decoder.decode(bytes)
  })
}

/** The reference's `extract_domain`: `unquote(url).split("/")[2]`, or the address itself where that fails. */
export function citedDomain(url: string): string {
  return unquote(url).split('/')[2] ?? url
}

/**
 * One answer's text on its way out: `feed` each piece as it comes, `end` at its close. What they return is the
 * text to send; `text` is all of it so far, `annotations` its citations.
 */
export class CitationMarkers {
  readonly annotations: UrlCitation[] = []
  /** What was sent so far. */
  text = ''
  /** From a `【` that may still be a marker to the end of what came. */
  private held = ''
  /** Code points sent so far. */
  private points = 0
  /** The last code unit sent was a high surrogate (its pair, if it comes, is no new code point). */
  private highLast = false

  constructor(
    /** The page a cursor names, as the option `citedPage` answers (with the results read so far bound). */
    private readonly pageAt: (cursor: number) => { url: string; title: string } | null,
  ) {}

  /** The text to send for `piece`, which comes after what came before. */
  feed(piece: string): string {
    const text = this.held === '' ? piece : this.held + piece
    this.held = ''
    // Most pieces: no marker starts in them.
    if (text.indexOf('【') < 0) return this.send(text)
    let out = ''
    let from = 0
    for (;;) {
      const open = text.indexOf('【', from)
      if (open < 0) {
        out += this.send(text.slice(from))
        return out
      }
      const end = scan(text, open)
      if (end === UNDECIDED) {
        this.held = text.slice(open)
        out += this.send(text.slice(from, open))
        return out
      }
      if (end === NOT_A_MARKER) {
        // Not one from here: the `【` is text; a marker may still start after it.
        out += this.send(text.slice(from, open + 1))
        from = open + 1
        continue
      }
      out += this.send(text.slice(from, open))
      out += this.send(this.replaced(text.slice(open, end)))
      from = end
    }
  }

  /** The end of the answer: what was held back was no marker, and goes out as it came. */
  end(): string {
    const held = this.held
    this.held = ''
    return this.send(held)
  }

  /** A whole marker: ` ([domain](url)) ` with its annotation where its cursor names a page; else itself. */
  private replaced(marker: string): string {
    const cursor = cursorOf(marker)
    const page = cursor === null ? null : this.pageAt(cursor)
    if (page === null || page.url === '') return marker
    const domain = citedDomain(page.url)
    const replacement = ` ([${domain}](${page.url})) `
    this.annotations.push({
      type: 'url_citation',
      start_index: this.points,
      end_index: this.points + codePoints(replacement, false),
      url: page.url,
      title: page.title === '' ? domain : page.title,
    })
    return replacement
  }

  /** `piece` sent: counted and kept. */
  private send(piece: string): string {
    if (piece === '') return ''
    this.points += codePoints(piece, this.highLast)
    const last = piece.charCodeAt(piece.length - 1)
    this.highLast = last >= 0xd800 && last <= 0xdbff
    this.text += piece
    return piece
  }
}

/** The code points of `text`; `highBefore`: the code unit before it was a high surrogate. */
function codePoints(text: string, highBefore: boolean): number {
  let points = text.length
  let high = highBefore
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (high && c >= 0xdc00 && c <= 0xdfff) points--
    high = c >= 0xd800 && c <= 0xdbff
  }
  return points
}
