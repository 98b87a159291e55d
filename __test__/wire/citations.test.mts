/**
 * gpt-oss's citation markers replaced as its own browser tool replaces them (issue 47): `CitationMarkers` against
 * a port of the reference's `normalize_citations` (openai/gpt-oss gpt_oss/tools/simple_browser/
 * simple_browser_tool.py) on generated texts fed whole and cut everywhere; then a Responses stream with the
 * `citedPage` option, whole and streamed at every batching, both faces, both backends, and in an SsePool.
 */
import test from 'ava'
import { type Implementation, type ResponseEvent, type ResponseObject, ResponsesStream, responseObject, SsePool } from 'harmony-stream'
import { responsesFrames } from 'harmony-stream/http'

import { CitationMarkers, citedDomain, MARKER_LIMIT } from '../../src/wire/responses/citations.ts'
import { batches, harmony, IMPLEMENTATIONS, random } from '../helpers/harmony.mjs'

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

// ---- A Responses stream with the option ----

const SEARCH_RESULT =
  '[0] tower\\n**viewing lines [0 - 2] of 2**\\n\\nL0: URL: \\nL1: # Search Results\\nL2:   * 【0†Eiffel Tower†towers.example】'
const PAGE_RESULT =
  '[1] Eiffel Tower (https://towers.example/eiffel)\\n**viewing lines [0 - 1] of 1**\\n\\nL0: The Eiffel Tower\\nL1: It is 330 metres tall.'

/**
 * A browsing completion as the gateway's stream holds it: a preamble citing a page not yet shown, a search, its
 * results, an open, its page, and an answer citing it (emoji before, a marker cut by its tokens, an unknown
 * cursor, the search page, and a `【` that is text).
 */
const COMPLETION = [
  '<|channel|>commentary<|message|>Checking 【1†L1】 first.<|end|>',
  '<|start|>assistant<|channel|>analysis to=browser.search code<|message|>{"query":"eiffel"}<|call|>',
  `<|start|>browser.search to=assistant<|channel|>analysis<|message|>${SEARCH_RESULT}<|end|>`,
  '<|start|>assistant<|channel|>analysis to=browser.open code<|message|>{"id":0}<|call|>',
  `<|start|>browser.open to=assistant<|channel|>analysis<|message|>${PAGE_RESULT}<|end|>`,
  '<|start|>assistant<|channel|>final<|message|>🗼 It is 330 metres tall 【1†L1】, per 【0†L2】 and 【5†L1】; 【note】 【1†Eiffel Tower†towers.example】.<|return|>',
].join('')
const TOKENS = harmony(COMPLETION)
const LINK = ' ([towers.example](https://towers.example/eiffel)) '
const ANSWER = `🗼 It is 330 metres tall ${LINK}, per 【0†L2】 and 【5†L1】; 【note】 ${LINK}.`

/** The pages the two results showed: cursor 0 the search (no address), 1 the page; each only once its result was read. */
const shown = [
  { url: '', title: 'tower' },
  { url: 'https://towers.example/eiffel', title: 'Eiffel Tower' },
]
const citedPage = (cursor: number, results: number) => (cursor < results ? (shown[cursor] ?? null) : null)

function options(implementation: Implementation, cited = true) {
  return {
    model: 'gpt-oss',
    id: 'resp_cite',
    createdAt: 1_700_000_000,
    completedAt: 1_700_000_001,
    builtinTools: 'run' as const,
    parser: { implementation },
    ...(cited ? { citedPage } : {}),
  }
}

type Message = { type: 'message'; content: { text: string; annotations: Annotation[] }[] }

/** The streamed events' answer text (deltas added up), annotations added, and the final message items. */
function read(events: readonly ResponseEvent[]): { deltas: string[]; added: Annotation[]; messages: Message[] } {
  const deltas: string[] = []
  const added: Annotation[] = []
  let response: ResponseObject | null = null
  for (const event of events as readonly { type: string; delta?: string; annotation?: Annotation; response?: ResponseObject }[]) {
    if (event.type === 'response.output_text.delta') deltas.push(event.delta!)
    if (event.type === 'response.output_text.annotation.added') added.push(event.annotation!)
    if (event.type === 'response.completed') response = event.response!
  }
  return { deltas, added, messages: response!.output.filter((item) => item.type === 'message') as unknown as Message[] }
}

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: whole and streamed at every batching, the answer's markers replaced and annotated alike`, (t) => {
    const whole = responseObject(TOKENS, options(implementation))
    const messages = whole.output.filter((item) => item.type === 'message') as unknown as Message[]
    t.is(messages.length, 2)
    // The preamble's cursor had shown no page yet when it was written: as written.
    t.is(messages[0]!.content[0]!.text, 'Checking 【1†L1】 first.')
    t.deepEqual(messages[0]!.content[0]!.annotations, [])
    const { text, annotations } = messages[1]!.content[0]!
    t.is(text, ANSWER)
    t.is(annotations.length, 2)
    for (const annotation of annotations) {
      t.is([...text].slice(annotation.start_index, annotation.end_index).join(''), LINK)
      t.like(annotation, { type: 'url_citation', url: 'https://towers.example/eiffel', title: 'Eiffel Tower' })
    }

    for (const size of [1, 2, 3, 5, 7, TOKENS.length]) {
      const stream = new ResponsesStream(options(implementation))
      const events = [...stream.start(), ...batches(TOKENS, size).flatMap((batch) => stream.push(batch)), ...stream.finish()]
      const streamed = read(events)
      t.deepEqual(streamed.messages, messages, `${size} ids a step: the same items`)
      t.is(streamed.deltas.join(''), `Checking 【1†L1】 first.${ANSWER}`, `${size} ids a step: the deltas add up to the texts`)
      t.deepEqual(streamed.added, [...messages[0]!.content[0]!.annotations, ...annotations])
      // Each annotation is sent right after the delta that completes its replacement.
      let sent = ''
      for (const event of events as readonly { type: string; delta?: string; item_id?: string; annotation?: Annotation }[]) {
        if (event.type === 'response.output_text.delta' && event.item_id === 'msg_cite_5') sent += event.delta
        if (event.type === 'response.output_text.annotation.added') t.true([...sent].length >= event.annotation!.end_index)
      }
      // The SSE face writes the same bytes.
      const frames = new ResponsesStream(options(implementation))
      const sse =
        frames.startSse() +
        batches(TOKENS, size)
          .map((batch) => frames.pushSse(batch))
          .join('') +
        frames.finishSse()
      t.is(sse, responsesFrames(events), `${size} ids a step: the SSE face`)
    }
  })

  test(`${implementation}: an SsePool writes a cited stream as its adapter does, off the lane; without the option, on it`, (t) => {
    const alone = new ResponsesStream(options(implementation))
    const expected = alone.startSse() + TOKENS.map((id) => alone.pushSse([id])).join('') + alone.finishSse()
    for (const cited of [true, false]) {
      const pool = new SsePool({ implementation })
      const adapter = new ResponsesStream(options(implementation, cited))
      const id = pool.add(adapter)
      let written = ''
      let laneFrames = 0
      let laneSteps = 0
      for (const token of TOKENS) {
        const frames = pool.step(Uint32Array.of(id), Uint32Array.of(0, 1), Uint32Array.of(token))
        const frame = frames.frame(0)
        if (typeof frame !== 'string' && frame.length > 0) laneFrames++
        written += Buffer.from(frame).toString()
        // The template the lane (the pool's, and pushSse's own) writes the open message's next text with.
        if (adapter.laneTemplate() !== null) laneSteps++
      }
      written += pool.finish(id)
      if (cited) {
        t.is(written, expected)
        t.is(laneFrames + laneSteps, 0, 'no text of a cited stream goes by the lane')
      } else {
        t.true(laneSteps > 0, 'without citedPage the answers stream on the lane: the replacement is never entered')
        if (implementation === 'native') t.true(laneFrames > 0)
        t.true(written.includes('tall 【1†L1】'))
      }
    }
  })
}

test('an answer cut by a failure keeps what went out; with log probabilities every token still gets its own', (t) => {
  const stream = new ResponsesStream(options('js'))
  const cut = harmony('<|channel|>final<|message|>tall 【1†L1】 per 【1†L')
  stream.push(cut)
  const failed = stream.error('the engine failed')
  const response = (failed.at(-1) as unknown as { response: ResponseObject }).response
  const message = response.output.at(-1) as unknown as Message
  t.is(message.content[0]!.text, 'tall 【1†L1】 per ', 'no page shown: the first marker as written; the second never went out')

  const logprobs = new ResponsesStream({ ...options('js'), logprobs: true })
  const ids = harmony(
    '<|channel|>analysis to=browser.open code<|message|>{}<|call|><|start|>browser.open to=assistant<|channel|>analysis<|message|>[0] x<|end|><|start|>assistant<|channel|>final<|message|>a 【0†L1】 b【1†<|return|>',
  )
  const events: { type: string; delta?: string; logprobs?: unknown[] }[] = []
  for (const id of ids) {
    for (const event of logprobs.push({ tokens: Uint32Array.of(id), logprobs: [{ logprob: -0.5, top: [] }] })) events.push(event as never)
  }
  for (const event of logprobs.finish()) events.push(event as never)
  const deltas = events.filter((event) => event.type === 'response.output_text.delta')
  t.is(deltas.map((event) => event.delta).join(''), 'a 【0†L1】 b【1†')
  const answerIds = harmony('a 【0†L1】 b【1†').length
  t.is(
    deltas.reduce((sum, event) => sum + (event.logprobs?.length ?? 0), 0),
    answerIds,
    'one log probability per answer token',
  )
})
