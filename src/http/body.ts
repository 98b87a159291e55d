/**
 * Reading a JSON request body without trusting the client: the content type must be JSON (415), the body
 * at most `limit` bytes (413: refused from `content-length` before reading, or as soon as the bytes read pass
 * the limit, so an endless or huge body never sits in memory), valid JSON (400) and an object (400).
 *
 * A body sent compressed (`Content-Encoding: gzip`, `deflate`) is inflated as it arrives, and the limit holds
 * for the inflated bytes too: a compression bomb is a 413 as soon as what it inflates to passes the limit, its
 * rest neither read nor inflated. A coding this reader does not decode is a 415 naming it; a body that is not
 * what its coding says is a 400.
 */
import type { IncomingMessage } from 'node:http'
import type { Transform } from 'node:stream'
import { createGunzip, createInflate } from 'node:zlib'
import { checkOptions, is, type OptionSpec } from '../base/options'

import { HttpError } from './errors'

export const DEFAULT_BODY_LIMIT = 4 * 1024 * 1024

export interface ReadJsonOptions {
  /** Largest body accepted, in bytes, as sent and once inflated. Default 4 MiB. */
  limit?: number
}

const READ_JSON_OPTIONS: OptionSpec = { limit: is.integer(0) }

/**
 * The content codings decoded (RFC 9110 §8.4.1): `gzip` (and `x-gzip`, which a recipient takes as `gzip`,
 * §8.4.1.3) and `deflate` (the zlib format, RFC 1950, §8.4.1.2). Each decoder holds at most a 32 KiB window.
 * `br` and `zstd` are refused: their decoders may hold a window of up to 16 MiB (Brotli, RFC 7932 §9.1: WBITS
 * up to 24) and 128 MiB (zstd's decoder by default, lib/zstd.h `ZSTD_WINDOWLOG_LIMIT_DEFAULT` 27) for one request
 * whose body is a few bytes; and Node 20's zlib has no zstd decoder (`createZstdDecompress` came in 22.15).
 */
const DECODERS: Readonly<Record<string, () => Transform>> = {
  gzip: createGunzip,
  'x-gzip': createGunzip,
  deflate: createInflate,
}

/** What a 415 for a coding says of it (RFC 9110 §15.5.16: and `accept-encoding` lists what would be taken). */
const REFUSED_CODINGS: Readonly<Record<string, string>> = {
  br: 'its decoder may hold a window of 16 MiB for a body of a few bytes; send gzip or deflate',
  zstd: "Node 20's zlib has no zstd decoder, and a zstd window may be 128 MiB; send gzip or deflate",
}

/** The codings one body may carry, `identity` aside: each is a decoder held while the body is read. */
const MAX_CODINGS = 3

const ACCEPT_ENCODING = 'gzip, deflate'

function isJsonContentType(header: string | undefined): boolean {
  if (header === undefined) return false
  const type = header.split(';')[0].trim().toLowerCase()
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'))
}

function unsupportedCoding(message: string): HttpError {
  return new HttpError(415, message, {
    param: 'content-encoding',
    code: 'unsupported-content-encoding',
    headers: { 'accept-encoding': ACCEPT_ENCODING },
  })
}

/**
 * The codings of a `Content-Encoding` header in the order they are to be undone: the header lists them in the
 * order they were applied (RFC 9110 §8.4), so the last is decoded first; `identity` (and an empty member of the
 * list) changes nothing. A coding that is not decoded here is a 415 naming it.
 */
function codingsOf(header: string | string[] | undefined): string[] {
  if (header === undefined) return []
  const listed = (Array.isArray(header) ? header.join(',') : header)
    .split(',')
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== '' && coding !== 'identity')
  for (const coding of listed) {
    if (Object.hasOwn(DECODERS, coding)) continue
    const why = Object.hasOwn(REFUSED_CODINGS, coding) ? `: ${REFUSED_CODINGS[coding]}` : ''
    throw unsupportedCoding(
      `the request body's content-encoding ${JSON.stringify(coding.slice(0, 100))} is not supported${why} (supported: ${ACCEPT_ENCODING}, identity)`,
    )
  }
  if (listed.length > MAX_CODINGS)
    throw unsupportedCoding(`the request body has ${listed.length} content codings; at most ${MAX_CODINGS} are decoded`)
  return listed.reverse()
}

export async function readJsonBody(request: IncomingMessage, options: ReadJsonOptions = {}): Promise<Record<string, unknown>> {
  return parseJsonBody(await readJsonBytes(request, options, 'readJsonBody'))
}

/**
 * `readJsonBody` without the parsing: the body's bytes (inflated, when it came compressed), after the same 415
 * and 413 checks. For a body to be parsed elsewhere, e.g. off the event loop by `RenderWorkers.prepare`
 * (JSON.parse of a few MiB of small objects holds the thread for a tenth of a second and more).
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
  const codings = codingsOf(request.headers['content-encoding'])
  const declared = Number(request.headers['content-length'])
  if (Number.isFinite(declared) && declared > limit)
    throw new HttpError(413, `the request body is ${declared} bytes; the limit is ${limit}`, { code: 'body-too-large' })
  return await readAtMost(request, limit, codings)
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
 *
 * With `codings` (in the order they are undone), the bytes as sent go through one decoder per coding, piped in
 * turn, each held back by the next (a decoder inflates no more while its output waits); the bytes as sent and
 * the inflated ones are each held to `limit`. Past it, the decoders are destroyed at once: what they inflated is
 * at most `limit` and one chunk of each (16 KiB), whatever the body would inflate to.
 */
function readAtMost(request: IncomingMessage, limit: number, codings: readonly string[]): Promise<Buffer> {
  // Destroyed before its body was read (its client left while the request waited, as for a gateway's begin
  // budget), a request says nothing more: no data, no end, no close. Waited for, it would never settle.
  if (request.destroyed)
    return Promise.reject(new HttpError(400, 'the client closed the connection before the body was read', { code: 'body-unreadable' }))
  return new Promise((resolve, reject) => {
    const decoders = codings.map((coding) => DECODERS[coding]!())
    const first = decoders[0]
    const last = decoders.at(-1)
    for (let i = 1; i < decoders.length; i++) decoders[i - 1]!.pipe(decoders[i]!)
    const chunks: Buffer[] = []
    let sent = 0
    let size = 0
    let settled = false
    const done = (error: Error | null) => {
      if (settled) return
      settled = true
      request.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose)
      first?.off('drain', onDrain)
      last?.off('data', onInflated).off('end', onInflatedEnd)
      for (const decoder of decoders) {
        decoder.off('error', onDecodeError)
        // What a decoder says once it is destroyed has been answered already.
        decoder.on('error', () => {})
        if (error !== null) decoder.destroy()
      }
      if (error === null) return resolve(Buffer.concat(chunks, size))
      chunks.length = 0
      reject(error)
    }
    const tooLarge = (what: string) => {
      request.pause()
      done(new HttpError(413, `the request body ${what} the limit of ${limit} bytes`, { code: 'body-too-large' }))
    }
    // The body as it comes out of the last decoder (or as sent, without one).
    const onInflated = (chunk: Buffer) => {
      size += chunk.length
      if (size <= limit) return void chunks.push(chunk)
      tooLarge(last === undefined ? 'is larger than' : 'inflates to more than')
    }
    const onData = (chunk: Buffer) => {
      if (first === undefined) return onInflated(chunk)
      sent += chunk.length
      if (sent > limit) return tooLarge('is larger than')
      // The first decoder is full: the request waits for it to drain (TCP holds the client back meanwhile).
      if (!first.write(chunk)) request.pause()
    }
    const onDrain = () => request.resume()
    const onEnd = () => (first === undefined ? done(null) : first.end())
    const onInflatedEnd = () => done(null)
    const onError = (error: Error) =>
      done(new HttpError(400, `the request body could not be read: ${error.message}`, { code: 'body-unreadable' }))
    // A request closes after its end too (and a compressed body may still be inflating then): only a close
    // before the whole body arrived is a failure.
    const onClose = () => {
      if (!request.complete)
        done(new HttpError(400, 'the client closed the connection before the whole body arrived', { code: 'body-unreadable' }))
    }
    const onDecodeError = (error: Error) =>
      done(
        new HttpError(
          400,
          `the request body is not what its content-encoding (${[...codings].reverse().join(', ')}) says: ${error.message}`,
          {
            param: 'content-encoding',
            code: 'invalid-compressed-body',
          },
        ),
      )
    for (const decoder of decoders) decoder.on('error', onDecodeError)
    first?.on('drain', onDrain)
    last?.on('data', onInflated).on('end', onInflatedEnd)
    request.on('data', onData).on('end', onEnd).on('error', onError).on('close', onClose)
  })
}
