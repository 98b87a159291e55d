/**
 * Reading a JSON request body without trusting the client: the content type must be JSON (415), the body
 * at most `limit` bytes (413: refused from `content-length` before reading, or as soon as the bytes read pass
 * the limit, so an endless or huge body never sits in memory), valid JSON (400) and an object (400).
 */
import type { IncomingMessage } from 'node:http'
import { checkOptions, is, type OptionSpec } from '../base/options'

import { HttpError } from './errors'

export const DEFAULT_BODY_LIMIT = 4 * 1024 * 1024

export interface ReadJsonOptions {
  /** Largest body accepted, in bytes. Default 4 MiB. */
  limit?: number
}

const READ_JSON_OPTIONS: OptionSpec = { limit: is.integer(0) }

function isJsonContentType(header: string | undefined): boolean {
  if (header === undefined) return false
  const type = header.split(';')[0].trim().toLowerCase()
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'))
}

export async function readJsonBody(request: IncomingMessage, options: ReadJsonOptions = {}): Promise<Record<string, unknown>> {
  return parseJsonBody(await readJsonBytes(request, options, 'readJsonBody'))
}

/**
 * `readJsonBody` without the parsing: the body's bytes, after the same 415 and 413 checks. For a body to be
 * parsed elsewhere, e.g. off the event loop by `RenderWorkers.prepare` (JSON.parse of a few MiB of small
 * objects holds the thread for a tenth of a second and more).
 */
export async function readJsonBytes(request: IncomingMessage, options: ReadJsonOptions = {}, where = 'readJsonBytes'): Promise<Buffer> {
  const limit = checkOptions<ReadJsonOptions>(options, READ_JSON_OPTIONS, where).limit ?? DEFAULT_BODY_LIMIT
  if (!isJsonContentType(request.headers['content-type'])) {
    throw new HttpError(
      415,
      `the request body must be JSON (content-type: application/json), not ${JSON.stringify(request.headers['content-type'] ?? 'none')}`,
      { code: 'unsupported-media-type' },
    )
  }
  const declared = Number(request.headers['content-length'])
  if (Number.isFinite(declared) && declared > limit)
    throw new HttpError(413, `the request body is ${declared} bytes; the limit is ${limit}`, { code: 'body-too-large' })
  return await readAtMost(request, limit)
}

/** A request body's bytes as the JSON object it must be: 400 (`invalid-json`) for anything else. */
export function parseJsonBody(bytes: Uint8Array): Record<string, unknown> {
  let body: unknown
  try {
    body = JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'))
  } catch (error) {
    throw new HttpError(400, `the request body is not valid JSON: ${(error as Error).message}`, { code: 'invalid-json' })
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new HttpError(400, 'the request body must be a JSON object', { code: 'invalid-json' })
  return body as Record<string, unknown>
}

/**
 * The body's bytes, refusing past `limit`: the request is paused (the client is held back by TCP, nothing more
 * is buffered) and the caller answers 413; send it with `connection: close` (as `sendError` does), so Node
 * drops the connection with the unread rest. A client that goes away mid-body ends the read with an error.
 */
function readAtMost(request: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const done = (error: Error | null) => {
      request.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose)
      if (error === null) resolve(Buffer.concat(chunks, size))
      else reject(error)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.length
      if (size <= limit) return void chunks.push(chunk)
      request.pause()
      chunks.length = 0
      done(new HttpError(413, `the request body is larger than the limit of ${limit} bytes`, { code: 'body-too-large' }))
    }
    const onEnd = () => done(null)
    const onError = (error: Error) =>
      done(new HttpError(400, `the request body could not be read: ${error.message}`, { code: 'body-unreadable' }))
    const onClose = () =>
      done(new HttpError(400, 'the client closed the connection before the whole body arrived', { code: 'body-unreadable' }))
    request.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose)
  })
}
