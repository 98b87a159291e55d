/**
 * gpt-oss's own `browser` tool, run by the gateway: `search`, `open` and `find`, answered with pages as the
 * model was trained to read them (openai/gpt-oss gpt_oss/tools/simple_browser/simple_browser_tool.py): each page
 * numbered by a cursor, `[{cursor}] {title} ({url})`, a `**viewing lines [a - b] of n**` bar, then lines of at
 * most 80 characters numbered `L{i}: `, about 1,024 tokens at a time; links as `【{id}†{text}†{domain}】`, which
 * `open` follows by id. The model cites `【{cursor}†L{a}-L{b}】`; `citedPage` names the page of such a cursor,
 * for the Responses adapter to replace the marker with a link and annotate it (wire/responses/citations.ts).
 *
 * Where pages come from is a `SearchBackend`. `LocalSearch` is one that needs no service: a collection of
 * documents (a JSON Lines file of `{ url, title, text }`) in an SQLite FTS5 index in memory.
 */
import { readFileSync } from 'node:fs'

import { HarmonySetupError } from '../../base/errors'
import { requireOptional } from '../../base/optional-package'
import { jsonObjectOf } from '../../base/records'
import { failed, type ToolResult } from './result'

/** The search backend failed, or a page could not be fetched: the call fails (the model reads why). */
class BackendFailure extends Error {}

/** A search result: a page's address, title and the passage that matched. */
export interface SearchHit {
  url: string
  title: string
  snippet: string
}

/** A page's text, as the model reads it. */
export interface BrowserPage {
  url: string
  title: string
  /** Its links written as `【id†text†domain】`, id being the place in `links`. */
  text: string
  /** The addresses of the links its text shows, by id (`browser.open` follows them). */
  links?: readonly string[]
}

/** Where the browser's pages come from. Failures reject; the model is told what failed. */
export interface SearchBackend {
  search(query: string, topn: number): Promise<SearchHit[]>
  /** The page at `url`; null when there is none. */
  open(url: string): Promise<BrowserPage | null>
}

/** A page the browser has shown: its text in lines, and the links it shows by id. */
interface ShownPage {
  url: string
  title: string
  lines: string[]
  links: Map<number, string>
  /** A search's or a find's results: `find` does not search them. */
  results: boolean
}

/** Lines as the trained browser wraps them. */
const LINE_WIDTH = 80
/** Roughly how much of a page one view shows (the trained browser shows 1,024 tokens). */
const VIEW_CHARACTERS = 4_096
/** Search results per search (the trained browser asks its backend for 20 whatever `topn` says). */
const SEARCH_RESULTS = 20

/**
 * One response's browser: the pages it has shown, by cursor. `call` runs one of the model's calls and gives the
 * page (or the error) it sees; it never rejects.
 */
export class BrowserSession {
  readonly #pages: ShownPage[] = []
  /** How many pages had been shown after each call, in the order of the calls. */
  readonly #shownAfter: number[] = []

  constructor(private readonly backend: SearchBackend) {}

  /** The address of the page shown at `cursor`, if there is one (for citations). */
  urlAt(cursor: number): { url: string; title: string } | null {
    const page = this.#pages[cursor]
    return page === undefined || page.url === '' ? null : { url: page.url, title: page.title }
  }

  /**
   * The page a citation's cursor names, for an answer written after the first `calls` calls' results: a page
   * shown by then, with an address (a search's results have none); else null. A cursor shown only by a later
   * call names nothing, so a streamed answer and the whole one cite the same pages.
   */
  citedPage(cursor: number, calls: number): { url: string; title: string } | null {
    const shown = calls === 0 ? 0 : (this.#shownAfter[calls - 1] ?? this.#pages.length)
    return cursor < shown ? this.urlAt(cursor) : null
  }

  /** A call's page, or its error: the model's mistakes as output, the backend's (`BackendFailure`) as a failure. */
  async call(tool: string, args: string): Promise<ToolResult> {
    try {
      return await this.#call(tool, args)
    } finally {
      this.#shownAfter.push(this.#pages.length)
    }
  }

  async #call(tool: string, args: string): Promise<ToolResult> {
    const fields = jsonObjectOf(args)
    if (fields === null) return { output: JSON.stringify({ error: 'Invalid function arguments' }) }
    try {
      if (tool === 'browser.search') return { output: await this.#search(fields) }
      if (tool === 'browser.open') return { output: await this.#open(fields) }
      if (tool === 'browser.find') return { output: this.#find(fields) }
      return { output: JSON.stringify({ error: `Unknown function: ${tool.slice('browser.'.length)}` }) }
    } catch (error) {
      const { message } = error as Error
      return error instanceof BackendFailure ? failed(message) : { output: message }
    }
  }

  async #search(fields: Record<string, unknown>): Promise<string> {
    const query = typeof fields.query === 'string' ? fields.query : ''
    if (query === '') throw new Error('`query` must be a non-empty string.')
    let hits: SearchHit[]
    try {
      hits = await this.backend.search(query, SEARCH_RESULTS)
    } catch (error) {
      throw new BackendFailure(`Error during search for \`${query}\`: ${truncate(String((error as Error).message ?? error))}`)
    }
    const links = new Map<number, string>()
    const text = ['URL: ', '# Search Results', '']
    hits.forEach((hit, id) => {
      links.set(id, hit.url)
      text.push(`  * ${link(id, hit.title, domainOf(hit.url))} ${oneLine(hit.snippet)}`)
    })
    if (hits.length === 0) text.push('No results.')
    return this.#show({ url: '', title: query, lines: wrap(text.join('\n')), links, results: true }, 0)
  }

  async #open(fields: Record<string, unknown>): Promise<string> {
    const loc = integerOr(fields.loc, -1)
    const cursor = integerOr(fields.cursor, -1)
    let url: string
    if (typeof fields.id === 'string') url = fields.id
    else {
      const current = this.#page(cursor)
      const id = integerOr(fields.id, -1)
      if (id < 0) return this.#show(current, Math.max(loc, 0))
      const target = current.links.get(id)
      if (target === undefined) throw new Error(`Invalid link id \`${id}\`.`)
      url = target
    }
    const known = this.#pages.find((page) => page.url === url && !page.results)
    let page = known
    if (page === undefined) {
      let opened: BrowserPage | null
      try {
        opened = await this.backend.open(url)
      } catch (error) {
        throw new BackendFailure(`Error fetching URL \`${truncate(url)}\`: ${truncate(String((error as Error).message ?? error))}`)
      }
      if (opened === null) throw new BackendFailure(`Error fetching URL \`${truncate(url)}\`: not found`)
      const links = new Map((opened.links ?? []).map((link, id) => [id, link] as const))
      page = { url: opened.url, title: opened.title, lines: wrap(opened.text), links, results: false }
    }
    return this.#show(page, Math.max(loc, 0))
  }

  #find(fields: Record<string, unknown>): string {
    const pattern = typeof fields.pattern === 'string' ? fields.pattern.toLowerCase() : ''
    if (pattern === '') throw new Error('`pattern` must be a non-empty string.')
    const page = this.#page(integerOr(fields.cursor, -1))
    if (page.results) throw new Error('Cannot run `find` on search results page or find results page')
    const chunks: string[] = []
    const links = new Map<number, string>()
    // As the trained browser: each match with the 4 lines from it, the next search after them; at most 50.
    for (let line = 0; line < page.lines.length && chunks.length < 50; line++) {
      if (!page.lines[line]!.toLowerCase().includes(pattern)) continue
      links.set(chunks.length, page.url)
      chunks.push(`# 【${chunks.length}†match at L${line}】\n${page.lines.slice(line, line + 4).join('\n')}`)
      line += 3
    }
    const text = chunks.length > 0 ? chunks.join('\n\n') : `No \`find\` results for pattern: \`${pattern}\``
    const title = `Find results for text: \`${pattern}\` in \`${page.title}\``
    return this.#show({ url: `${page.url}/find?pattern=${encodeURIComponent(pattern)}`, title, lines: wrap(text), links, results: true }, 0)
  }

  /** The page at `cursor` (-1: the last shown). */
  #page(cursor: number): ShownPage {
    if (this.#pages.length === 0) throw new Error('No pages to access!')
    if (cursor === -1) return this.#pages.at(-1)!
    const page = this.#pages[cursor]
    if (page === undefined)
      throw new Error(`Cursor \`${cursor}\` is out of range. Available cursor indices: [0 - ${this.#pages.length - 1}].`)
    return page
  }

  /** Shows `page` from line `loc` under a new cursor: the display the model reads. */
  #show(page: ShownPage, loc: number): string {
    const total = page.lines.length
    if (loc >= total) throw new Error(`Invalid location parameter: \`${loc}\`. Cannot exceed page maximum of ${total - 1}.`)
    let end = loc
    let size = 0
    while (end < total && (end === loc || size + page.lines[end]!.length <= VIEW_CHARACTERS)) size += page.lines[end++]!.length + 1
    this.#pages.push(page)
    const cursor = this.#pages.length - 1
    const body = page.lines
      .slice(loc, end)
      .map((line, i) => `L${loc + i}: ${line}`)
      .join('\n')
    const where = page.url === '' ? '' : ` (${truncate(safeDecode(page.url))})`
    return `[${cursor}] ${page.title}${where}\n**viewing lines [${loc} - ${end - 1}] of ${total - 1}**\n\n${body}`
  }
}

/** What LocalSearch uses of node-sqlite3-wasm's `Database`. */
interface SqliteDatabase {
  all(sql: string, values: unknown[]): Record<string, unknown>[]
  run(sql: string, values: unknown[]): void
  exec(sql: string): void
}

/**
 * A collection of documents searched with SQLite's full-text index (FTS5, ranked by BM25), loaded into memory
 * from a JSON Lines file of `{ "url", "title", "text" }`: for a gateway with no search service, or its tests.
 */
export class LocalSearch implements SearchBackend {
  readonly #db: SqliteDatabase

  constructor(documents: readonly BrowserPage[]) {
    const { Database } = requireOptional<{ Database: new (path: string) => SqliteDatabase }>(
      'node-sqlite3-wasm',
      'the local search index (HARMONY_BROWSER=local:FILE)',
    )
    this.#db = new Database(':memory:')
    this.#db.exec("CREATE VIRTUAL TABLE pages USING fts5(url UNINDEXED, title, text, tokenize='porter unicode61')")
    for (const page of documents) this.#db.run('INSERT INTO pages VALUES (?, ?, ?)', [page.url, page.title, page.text])
  }

  /** The documents of a JSON Lines file, one `{ url, title, text }` a line; a bad line is a setup error naming it. */
  static fromFile(path: string): LocalSearch {
    const documents: BrowserPage[] = []
    readFileSync(path, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        if (line.trim() === '') return
        let page: unknown
        try {
          page = JSON.parse(line)
        } catch {
          page = null
        }
        const { url, title, text } = (page ?? {}) as Record<string, unknown>
        if (typeof url !== 'string' || typeof title !== 'string' || typeof text !== 'string')
          throw new HarmonySetupError('invalid-setting', `${path}: line ${i + 1} must be a JSON object with string url, title and text`)
        documents.push({ url, title, text })
      })
    return new LocalSearch(documents)
  }

  async search(query: string, topn: number): Promise<SearchHit[]> {
    // The query's words, each quoted (no FTS5 syntax from the model), any of them: ranked by BM25.
    const words = query.match(/[\p{L}\p{N}]+/gu) ?? []
    if (words.length === 0) return []
    const match = words.map((word) => `"${word}"`).join(' OR ')
    const rows = this.#db.all(
      "SELECT url, title, snippet(pages, 2, '', '', '…', 24) AS snippet FROM pages WHERE pages MATCH ? ORDER BY bm25(pages) LIMIT ?",
      [match, topn],
    )
    return rows.map((row) => ({ url: String(row.url), title: String(row.title), snippet: String(row.snippet) }))
  }

  async open(url: string): Promise<BrowserPage | null> {
    const [row] = this.#db.all('SELECT url, title, text FROM pages WHERE url = ? LIMIT 1', [url])
    return row === undefined ? null : { url: String(row.url), title: String(row.title), text: String(row.text) }
  }
}

/** A link as the trained browser shows one. */
function link(id: number, text: string, domain: string): string {
  const clean = oneLine(text).replaceAll('†', '‡').replaceAll('【', '〖').replaceAll('】', '〗')
  return domain === '' ? `【${id}†${clean}】` : `【${id}†${clean}†${domain}】`
}

function domainOf(url: string): string {
  try {
    return new URL(url).host
  } catch {
    return ''
  }
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim()
}

function integerOr(value: unknown, otherwise: number): number {
  return typeof value === 'number' && Number.isInteger(value) ? value : otherwise
}

function truncate(text: string, max = 1024): string {
  return text.length > max ? `${text.slice(0, max - 3)}...` : text
}

function safeDecode(url: string): string {
  try {
    return decodeURI(url)
  } catch {
    return url
  }
}

/** Lines of at most LINE_WIDTH characters, broken at spaces where a line has one (empty lines kept). */
function wrap(text: string): string[] {
  const out: string[] = []
  for (const line of text.split('\n')) {
    let rest = line
    while (rest.length > LINE_WIDTH) {
      const space = rest.lastIndexOf(' ', LINE_WIDTH)
      const cut = space > 0 ? space + 1 : LINE_WIDTH
      out.push(rest.slice(0, cut))
      rest = rest.slice(cut)
    }
    out.push(rest)
  }
  return out
}
