import type { ServerResponse } from 'node:http'
import { HttpError } from '../../http/errors'

/** Answers with one JSON body. */
export function sendJson(response: ServerResponse, status: number, body: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' })
  response.end(JSON.stringify(body))
}

/** A 405 naming what the path accepts (its `allow` header set). */
export function methodNotAllowed(response: ServerResponse, path: string, method: string | undefined, allow: string): HttpError {
  response.setHeader('allow', allow)
  return new HttpError(405, `${path} accepts ${allow}, not ${method}`, { code: 'method-not-allowed' })
}
