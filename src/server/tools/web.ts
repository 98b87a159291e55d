/**
 * A `SearchBackend` over HTTP: searches through a search API an operator runs, and opens pages from the web,
 * turned into the text gpt-oss's browser shows (links as `【id†text†domain】`, which `browser.open` follows).
 *
 * Fetching a page the model names is a server-side request on its behalf, so it is bounded: http and https only;
 * every address the host resolves to is checked when the connection is made (`lookup`), so that a name cannot
 * point at the gateway's own network (loopback, private, link-local, carrier-grade NAT, unique-local) unless
 * the operator allows it; redirects are followed by hand, each checked again, up to a limit; the body is read up
 * to a byte limit; the whole fetch has a time limit. Failures reject with what happened, which the browser tells
 * the model.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
import { request as httpRequest, type IncomingMessage } from 'node:http'
import { request as httpsRequest } from 'node:https'
import { BlockList, isIP } from 'node:net'
import { requireOptional } from '../../base/optional-package'
import { checkOptions, is, type OptionSpec } from '../../base/options'
import type { BrowserPage, SearchBackend, SearchHit } from './browser'

export interface HttpSearchOptions {
  /**
   * The search API: POSTed `{ "query", "topn" }` as JSON, it answers `{ "results": [{ "url", "title", "snippet"
   * }] }` (extra fields ignored).
   */
  searchUrl: string
  /** Headers of every search request (an API key). Never sent to the pages opened. */
  headers?: Record<string, string>
  /** One search or one page, in ms (the page's redirects included). Default 10,000. */
  timeMs?: number
  /** A page's body is read up to this many bytes; a longer one is cut there (the model is shown what came). Default 1 MiB. */
  maxPageBytes?: number
  /** Redirects followed per page. Default 3. */
  maxRedirects?: number
  /** Open pages on loopback and private addresses too (a gateway searching its own network). Default false. */
  allowPrivateAddresses?: boolean
}

const OPTIONS: OptionSpec = {
  searchUrl: is.nonEmptyString,
  headers: is.object,
  timeMs: is.integer(1),
  maxPageBytes: is.integer(1),
  maxRedirects: is.integer(0),
  allowPrivateAddresses: is.boolean,
}

/** Where a page may not be fetched from, unless allowed: the addresses of the gateway's own networks. */
const PRIVATE = new BlockList()
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
] as const)
  PRIVATE.addSubnet(net, prefix, 'ipv4')
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
] as const)
  PRIVATE.addSubnet(net, prefix, 'ipv6')

/** Whether `address` is one of the gateway's own networks (an IPv4-mapped IPv6 address by its IPv4 one). */
function isPrivateAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped) return PRIVATE.check(mapped[1]!, 'ipv4')
  return PRIVATE.check(address, isIP(address) === 6 ? 'ipv6' : 'ipv4')
}

interface HtmlToText {
  convert(html: string, options: object): string
}

export class HttpSearch implements SearchBackend {
  readonly #options: Required<HttpSearchOptions>

  constructor(options: HttpSearchOptions) {
    checkOptions(options, OPTIONS, 'HttpSearch')
    this.#options = { headers: {}, timeMs: 10_000, maxPageBytes: 1024 * 1024, maxRedirects: 3, allowPrivateAddresses: false, ...options }
    // A missing package is a setup error when the gateway starts, not at the first page.
    requireOptional('html-to-text', 'the web search backend (HARMONY_BROWSER=search:URL)')
  }

  async search(query: string, topn: number): Promise<SearchHit[]> {
    const response = await fetch(this.#options.searchUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...this.#options.headers },
      body: JSON.stringify({ query, topn }),
      signal: AbortSignal.timeout(this.#options.timeMs),
      redirect: 'error',
    })
    if (!response.ok) throw new Error(`the search service answered ${response.status}`)
    const body = (await response.json()) as { results?: unknown }
    if (!Array.isArray(body.results)) throw new Error('the search service answered without a results array')
    return body.results.slice(0, topn).flatMap((hit) => {
      const { url, title, snippet } = (hit ?? {}) as Record<string, unknown>
      return typeof url === 'string'
        ? [{ url, title: typeof title === 'string' ? title : url, snippet: typeof snippet === 'string' ? snippet : '' }]
        : []
    })
  }

  async open(url: string): Promise<BrowserPage | null> {
    const deadline = AbortSignal.timeout(this.#options.timeMs)
    let target = new URL(url)
    for (let redirects = 0; ; redirects++) {
      const response = await this.#get(target, deadline)
      const status = response.statusCode ?? 0
      if (status >= 300 && status < 400 && response.headers.location !== undefined) {
        response.resume()
        if (redirects >= this.#options.maxRedirects) throw new Error(`more than ${this.#options.maxRedirects} redirects`)
        target = new URL(response.headers.location, target)
        continue
      }
      if (status === 404 || status === 410) {
        response.resume()
        return null
      }
      if (status < 200 || status >= 300) {
        response.resume()
        throw new Error(`the page answered ${status}`)
      }
      const type = String(response.headers['content-type'] ?? '')
      const body = await this.#read(response)
      if (/html/i.test(type) || type === '') return htmlPage(target.href, body)
      if (/^text\//i.test(type)) return { url: target.href, title: target.host, text: body }
      throw new Error(`not a page of text (${type.split(';')[0]})`)
    }
  }

  /** One GET of `url`, connected only to an address the policy allows. */
  #get(url: URL, signal: AbortSignal): Promise<IncomingMessage> {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') return Promise.reject(new Error(`${url.protocol} addresses are not opened`))
    const allowPrivate = this.#options.allowPrivateAddresses
    // Checked where the connection is made: the addresses connected to are the ones checked.
    const lookup = (
      host: string,
      options: { all?: boolean },
      callback: (error: Error | null, address: string | LookupAddress[], family?: number) => void,
    ) => {
      dnsLookup(host, { ...options, all: true }, (error, addresses) => {
        if (error) return callback(error, [])
        const refused = addresses.find((entry) => !allowPrivate && isPrivateAddress(entry.address))
        if (refused !== undefined) return callback(new Error(`${host} is on a private network (${refused.address}): not opened`), [])
        if (options.all === true) callback(null, addresses)
        else callback(null, addresses[0]!.address, addresses[0]!.family)
      })
    }
    const literal = url.hostname.replace(/^\[|\]$/g, '')
    if (isIP(literal) !== 0 && !allowPrivate && isPrivateAddress(literal))
      return Promise.reject(new Error(`${literal} is on a private network: not opened`))
    const request = url.protocol === 'https:' ? httpsRequest : httpRequest
    return new Promise((resolve, reject) => {
      const outgoing = request(
        url,
        { method: 'GET', lookup, signal, headers: { accept: 'text/html, text/plain;q=0.9', 'user-agent': 'harmony-stream' } },
        resolve,
      )
      outgoing.on('error', reject).end()
    })
  }

  /** The body as text, up to the byte limit. */
  async #read(response: IncomingMessage): Promise<string> {
    const chunks: Buffer[] = []
    let size = 0
    for await (const chunk of response as AsyncIterable<Buffer>) {
      const room = this.#options.maxPageBytes - size
      chunks.push(chunk.length > room ? chunk.subarray(0, room) : chunk)
      size += Math.min(chunk.length, room)
      if (size >= this.#options.maxPageBytes) {
        response.destroy()
        break
      }
    }
    return new TextDecoder().decode(Buffer.concat(chunks))
  }
}

/** An HTML page as gpt-oss's browser reads it: its title, and its text with links as `【id†text†domain】`. */
function htmlPage(url: string, html: string): BrowserPage {
  const { convert } = requireOptional<HtmlToText>('html-to-text', 'the web search backend')
  const host = new URL(url).host
  const links: string[] = []
  // The page's own brackets must not read as links (gpt-oss's browser swaps them the same way).
  const text = convert(html.replaceAll('【', '〖').replaceAll('】', '〗'), {
    wordwrap: false,
    selectors: [
      { selector: 'a', format: 'harmonyLink' },
      { selector: 'img', format: 'skip' },
    ],
    formatters: {
      harmonyLink: (
        element: { attribs?: Record<string, string>; children: unknown[] },
        walk: (nodes: unknown[], builder: unknown) => void,
        builder: { addInline(text: string): void },
      ) => {
        const href = element.attribs?.href
        let target: URL | null = null
        try {
          target = href === undefined || href.startsWith('#') ? null : new URL(href, url)
        } catch {
          target = null
        }
        if (target === null || (target.protocol !== 'http:' && target.protocol !== 'https:')) return walk(element.children, builder)
        builder.addInline(`【${links.length}†`)
        links.push(target.href)
        walk(element.children, builder)
        builder.addInline(target.host === host ? '】' : `†${target.host}】`)
      },
    },
  })
  const title = /<title[^>]*>([^<]*)<\/title>/i.exec(html)?.[1]?.trim() || host
  return { url, title, text, links }
}
