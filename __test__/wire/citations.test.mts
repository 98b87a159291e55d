/**
 * gpt-oss's citation markers replaced as its own browser tool replaces them (issue 47): `CitationMarkers` against
 * a port of the reference's `normalize_citations` (openai/gpt-oss gpt_oss/tools/simple_browser/
 * simple_browser_tool.py) on generated texts fed whole and cut everywhere.
 */
import test from 'ava'

import { CitationMarkers, citedDomain, MARKER_LIMIT } from '../../src/wire/responses/citations.ts'
import { random } from '../helpers/harmony.mjs'

/** The pages by cursor: a search's results (no address), pages, one whose address has no `/` fields. */
const URLS = ['', 'https://towers.example/eiffel', 'https://ex.example/caf%C3%A9/%E2%82%AC?q=1', 'nodomain', 'https://b.example/%ZZ%C3']
const TITLES = ['results', 'Eiffel Tower', 'Café', 'No domain', '']

const pageAt = (cursor: number) => (cursor < URLS.length ? { url: URLS[cursor]!, title: TITLES[cursor]! } : null)

interface Annotation {
  type: 'url_citation'
  start_index: number
  end_index: number
  url: string
  title: string
}

/**
 * The reference, ported line for line: `CITATION_OUTPUT_PATTERN` (Python's `\d` is any Unicode decimal digit),
 * cursors looked up by `str(index)`, an empty address as none, `extract_domain` (`unquote(url).split("/")[2]`),
 * indexes in code points (Python's `len`). One difference, the gateway's: the title is the page's (OpenAI's
 * `title` is "the title of the web resource"), the domain only for a page without one.
 */
function reference(text: string): { text: string; annotations: Annotation[] } {
  const byCursor = new Map(URLS.map((url, i) => [String(i), url]))
  let out = ''
  const annotations: Annotation[] = []
  let last = 0
  for (const match of text.matchAll(/【(?<cursor>\p{Nd}+)†(?<content>[^†】]+)(?:†[^†】]+)?】/gu)) {
    out += text.slice(last, match.index)
    const url = byCursor.get(match.groups!.cursor!)
    if (url) {
      const domain = pythonUnquote(url).split('/')[2] ?? url
      const replacement = ` ([${domain}](${url})) `
      const start = [...out].length
      const title = TITLES[URLS.indexOf(url)] || domain
      annotations.push({ type: 'url_citation', start_index: start, end_index: start + [...replacement].length, url, title })
      out += replacement
    } else out += match[0]
    last = match.index + match[0].length
  }
  return { text: out + text.slice(last), annotations }
}

/** Python's `unquote` as its documentation says: `%XX` escapes to bytes, decoded as UTF-8 with replacement. */
function pythonUnquote(url: string): string {
  return url.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => Buffer.from(run.replaceAll('%', ''), 'hex').toString('utf8'))
}

/** Feeds `pieces`; what went out, all of it, and the annotations. */
function fed(pieces: readonly string[]): { sent: string; text: string; annotations: Annotation[] } {
  const markers = new CitationMarkers(pageAt)
  let sent = ''
  for (const piece of pieces) sent += markers.feed(piece)
  sent += markers.end()
  return { sent, text: markers.text, annotations: markers.annotations }
}

const ALPHABET = ['【', '【', '】', '】', '†', '†', '0', '1', '2', '3', '4', '9', '０', '٣', '𝟏', 'L', '-', ' ', 'a', 'é', '😀', '\n']

test('generated texts: the same text and annotations as the reference, fed whole, by code unit, and cut at random', (t) => {
  const next = random(47)
  let cited = 0
  for (let n = 0; n < 4000; n++) {
    let text = ''
    const length = 1 + Math.floor(next() * 40)
    for (let i = 0; i < length; i++) text += ALPHABET[Math.floor(next() * ALPHABET.length)]
    // Markers as the model writes them, among the noise.
    if (n % 2 === 0) text = text.replace(/a/, `【${Math.floor(next() * 6)}†L${Math.floor(next() * 9)}-L9】`)
    const expected = reference(text)
    const units = text.split('')
    const cuts: string[] = []
    for (let i = 0; i < text.length; ) {
      const size = 1 + Math.floor(next() * 6)
      cuts.push(text.slice(i, i + size))
      i += size
    }
    for (const pieces of [[text], units, cuts]) {
      const got = fed(pieces)
      if (got.sent !== expected.text || got.text !== expected.text)
        return t.fail(
          `${JSON.stringify(text)} in ${pieces.length} pieces: ${JSON.stringify(got.sent)}, not ${JSON.stringify(expected.text)}`,
        )
      t.deepEqual(got.annotations, expected.annotations, JSON.stringify(text))
    }
    if (expected.annotations.length > 0) cited++
    t.false(
      expected.annotations.some(
        (a) => [...expected.text].slice(a.start_index, a.end_index).join('') !== ` ([${citedDomain(a.url)}](${a.url})) `,
      ),
    )
  }
  t.true(cited > 500, `${cited} texts cite a page`)
})

test('the forms the reference replaces, and what it leaves as written', (t) => {
  // The marker alone is replaced: the space the model wrote before it stays, as in the reference.
  const eiffel = ' ([towers.example](https://towers.example/eiffel)) '
  const cases: [string, string][] = [
    ['tall 【1†L1-L2】.', `tall ${eiffel}.`],
    ['tall 【1†L8】.', `tall ${eiffel}.`],
    ['a link 【1†Eiffel Tower†towers.example】', `a link ${eiffel}`],
    ['a search page 【0†L1】', 'a search page 【0†L1】'],
    ['unknown 【7†L1】', 'unknown 【7†L1】'],
    ['leading zero 【01†L1】', 'leading zero 【01†L1】'],
    ['other digits 【１†L1】', 'other digits 【１†L1】'],
    ['empty 【1†】 【1†a†】', 'empty 【1†】 【1†a†】'],
    ['three parts 【1†a†b†c】', 'three parts 【1†a†b†c】'],
    ['no cursor 【†L1】 【L1】', 'no cursor 【†L1】 【L1】'],
    ['a part holding 【1†a【1†L1】', `a part holding ${eiffel}`],
    ['not one, then one 【x【1†L1】', `not one, then one 【x${eiffel}`],
    ['an unknown cursor hides the next 【３†a【1†L1】', 'an unknown cursor hides the next 【３†a【1†L1】'],
    ['lines\n【1†L1\nL2】', `lines\n${eiffel}`],
    ['percent-encoded 【2†L1】', 'percent-encoded  ([ex.example](https://ex.example/caf%C3%A9/%E2%82%AC?q=1)) '],
    ['no domain 【3†L1】', 'no domain  ([nodomain](nodomain)) '],
    ['cut 【1†L1', 'cut 【1†L1'],
  ]
  for (const [text, expected] of cases) {
    t.is(fed([text]).sent, expected, text)
    t.is(reference(text).text, expected, `the reference: ${text}`)
  }
  t.is(citedDomain('https://ex.example/caf%C3%A9'), 'ex.example')
  t.is(citedDomain('https://%E2%82%AC.example/x'), '€.example', 'the domain is read from the decoded address')
  t.is(citedDomain('https://b.example/%ZZ%C3'), 'b.example')
  t.deepEqual(fed(['x 【4†L1】']).annotations, [
    {
      type: 'url_citation',
      start_index: 2,
      end_index: 2 + ' ([b.example](https://b.example/%ZZ%C3)) '.length,
      url: URLS[4]!,
      title: 'b.example',
    },
  ])
})

test('indexes count code points: an emoji before the citation counts one', (t) => {
  const { sent, annotations } = fed(['👨‍👩‍👧 🇫🇷 𝔘 【1†L1】!'])
  const points = [...sent]
  const [annotation] = annotations
  t.is(points.slice(annotation!.start_index, annotation!.end_index).join(''), ' ([towers.example](https://towers.example/eiffel)) ')
  t.true(annotation!.start_index < sent.indexOf(' (['), 'fewer code points than UTF-16 units before it')
  // Cut inside a surrogate pair, the count is the same.
  const cut = '𝔘𝔘 【1†L1】'
  t.deepEqual(fed([cut.slice(0, 1), cut.slice(1, 3), cut.slice(3)]).annotations, fed([cut]).annotations)
})

test('the hold is bounded: a 【 that has not become a marker within MARKER_LIMIT units is text, released at once', (t) => {
  const markers = new CitationMarkers(pageAt)
  t.is(markers.feed('see 【1†'), 'see ')
  const long = 'a'.repeat(MARKER_LIMIT)
  // Released before the answer ends, as soon as the bound is passed.
  t.is(markers.feed(long), `【1†${long}`)
  t.is(markers.feed('】'), '】')
  t.is(markers.end(), '')
  // At the bound a marker is still one; one unit past it, text (whole and streamed alike).
  const at = `【1†${'a'.repeat(MARKER_LIMIT - 4)}】`
  t.is(at.length, MARKER_LIMIT)
  t.is(fed([at]).annotations.length, 1)
  t.is(fed(at.split('')).annotations.length, 1)
  const past = `【1†${'a'.repeat(MARKER_LIMIT - 3)}】`
  t.is(fed([past]).sent, past)
  t.is(fed(past.split('')).sent, past)
  // A 【 that can no longer be a marker is released with the piece that shows it.
  const next = new CitationMarkers(pageAt)
  t.is(next.feed('【1'), '')
  t.is(next.feed('x'), '【1x')
})
