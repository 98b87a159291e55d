/**
 * The built-in tools one response runs on (gpt-oss's `python` and `browser`, where the gateway runs them): its
 * own python session and its own browser, ended with the response; and the citations of its answer, read from
 * the pages its browser showed.
 */
import { randomUUID } from 'node:crypto'

import { BrowserSession, citationsOf } from '../serving/tools/browser'
import type { ToolCaller } from '../serving/tools/loop'
import type { UrlCitation } from '../wire/responses'
import type { Gateway } from './context'

export interface ResponseTools extends ToolCaller {
  /** The `url_citation`s of an answer's text (none without a browser). */
  citations(text: string): UrlCitation[]
}

/** The tools of a new response, or null when the gateway runs none. */
export function responseTools(gateway: Gateway): ResponseTools | null {
  const { python, browser } = gateway
  if (python === null && browser === null) return null
  const session = randomUUID()
  const pages = browser === null ? null : new BrowserSession(browser)
  return {
    runs: (tool) => (tool === 'python' ? python !== null : tool.startsWith('browser.') && pages !== null),
    call: (tool, args) => (tool === 'python' ? python!.run(session, args) : pages!.call(tool, args)),
    end: () => python?.end(session),
    citations: (text) => (pages === null ? [] : citationsOf(text, pages)),
  }
}
