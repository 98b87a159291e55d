/**
 * The one HTTP client of the engine clients: a JSON POST whose answer streams back as server-sent events,
 * read only as fast as the caller asks for them (the socket is paused between reads, so a slow gateway holds
 * the engine back through TCP instead of buffering its output), with connect and idle timeouts, an
 * AbortSignal that destroys the connection (the engine sees it close and frees the sequence), and every
 * failure as an `EngineError`.
 */
import { type ClientRequest, type IncomingMessage, request as httpRequest } from 'node:http'
import { request as httpsRequest } from 'node:https'

import { EngineError } from './errors'
import { type SseEvent, SseReader } from './sse'

export interface HttpOptions {
  /** Time to get a connection and the response head. Default 10 s. */
  connectTimeoutMs?: number
  /** Longest silence while reading the stream. Default 120 s (a long prompt can take a while to prefill). */
  readTimeoutMs?: number
  /** Extra request headers, e.g. `authorization`. */
  headers?: Record<string, string>
  /** Largest single event accepted (bytes). Default 1 MiB. */
  maxEventBytes?: number
}

export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000
export const DEFAULT_READ_TIMEOUT_MS = 120_000
/** How much of an error body is read to find the engine's message. */
const MAX_ERROR_BODY = 64 * 1024

/**
 * POSTs `body` to `url` and yields the response's events. `engineMessage` extracts the engine's own error
 * text from a JSON error body. Breaking out of the loop, or aborting `signal`, closes the connection.
 */
export async function* postEvents(
  engine: string,
  url: URL,
  body: unknown,
  options: HttpOptions,
  signal: AbortSignal | undefined,
  engineMessage: (json: unknown) => string | null,
): AsyncGenerator<SseEvent> {
  if (signal?.aborted) throw new EngineError('engine-aborted', `${engine}: the request was aborted before it was sent`, { engine })
  const response = await open(engine, url, body, options, signal)
  try {
    if (response.statusCode === undefined || response.statusCode < 200 || response.statusCode >= 300) {
      const text = await readSome(response, MAX_ERROR_BODY)
      let message: string | null = null
      try {
        message = engineMessage(JSON.parse(text))
      } catch {
        message = text.trim() === '' ? null : text.trim().slice(0, 1000)
      }
      throw new EngineError('engine-http-error', `${engine} answered HTTP ${response.statusCode}${message ? `: ${message}` : ''}`, {
        engine,
        status: response.statusCode ?? null,
        engineMessage: message,
      })
    }
    const reader = new SseReader(options.maxEventBytes ?? 1 << 20)
    const readTimeout = options.readTimeoutMs ?? DEFAULT_READ_TIMEOUT_MS
    for (;;) {
      const chunk = await nextChunk(engine, response, readTimeout, signal)
      if (chunk === null) break
      let events: SseEvent[]
      try {
        events = reader.push(chunk)
      } catch (error) {
        throw new EngineError('engine-protocol-error', `${engine}: ${(error as Error).message}`, { engine, cause: error })
      }
      for (const event of events) yield event
    }
    for (const event of reader.end()) yield event
  } finally {
    // Whatever ended the loop (done, break, error, abort): the connection goes, and with it the sequence.
    response.destroy()
  }
}

function open(engine: string, url: URL, body: unknown, options: HttpOptions, signal: AbortSignal | undefined): Promise<IncomingMessage> {
  const payload = Buffer.from(JSON.stringify(body))
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest
  return new Promise((resolve, reject) => {
    let request: ClientRequest
    const timer = setTimeout(() => {
      request.destroy()
      reject(new EngineError('engine-connect-timeout', `${engine}: no answer from ${url.origin} within ${options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS} ms`, { engine }))
    }, options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS)
    const onAbort = () => {
      request.destroy()
      reject(new EngineError('engine-aborted', `${engine}: the request was aborted`, { engine }))
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    request = send(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'content-length': payload.length, ...options.headers } }, (response) => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      // Paused: bytes are read only when `nextChunk` asks, so TCP holds the engine back.
      response.pause()
      resolve(response)
    })
    request.on('error', (error) => {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
      reject(new EngineError('engine-connection-error', `${engine}: cannot reach ${url.origin}: ${error.message}`, { engine, cause: error }))
    })
    request.end(payload)
  })
}

/** The next chunk of the body (null at its end), waiting at most `timeoutMs` for it. */
function nextChunk(engine: string, response: IncomingMessage, timeoutMs: number, signal: AbortSignal | undefined): Promise<Buffer | null> {
  // Aborted while the caller was busy with the last events (no listener was waiting then).
  if (signal?.aborted) return Promise.reject(new EngineError('engine-aborted', `${engine}: the request was aborted`, { engine }))
  const ready = response.read() as Buffer | null
  if (ready !== null) return Promise.resolve(ready)
  if (response.readableEnded) return Promise.resolve(null)
  return new Promise((resolve, reject) => {
    const done = () => {
      clearTimeout(timer)
      response.off('readable', onReadable).off('end', onEnd).off('error', onError).off('close', onClose)
      signal?.removeEventListener('abort', onAbort)
    }
    const onReadable = () => {
      const chunk = response.read() as Buffer | null
      if (chunk === null) return
      done()
      resolve(chunk)
    }
    const onEnd = () => {
      done()
      resolve(null)
    }
    const onError = (error: Error) => {
      done()
      reject(new EngineError('engine-connection-error', `${engine}: the stream broke: ${error.message}`, { engine, cause: error }))
    }
    const onClose = () => {
      done()
      if (response.complete) resolve(null)
      else reject(new EngineError('engine-connection-error', `${engine}: the connection closed before the stream ended`, { engine }))
    }
    const onAbort = () => {
      done()
      reject(new EngineError('engine-aborted', `${engine}: the request was aborted`, { engine }))
    }
    const timer = setTimeout(() => {
      done()
      reject(new EngineError('engine-read-timeout', `${engine}: nothing received for ${timeoutMs} ms`, { engine }))
    }, timeoutMs)
    response.on('readable', onReadable).on('end', onEnd).on('error', onError).on('close', onClose)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

/** At most `limit` bytes of a (small, error) body, as text. */
async function readSome(response: IncomingMessage, limit: number): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  response.resume()
  for await (const chunk of response as AsyncIterable<Buffer>) {
    chunks.push(chunk)
    size += chunk.length
    if (size >= limit) break
  }
  return Buffer.concat(chunks).toString('utf8').slice(0, limit)
}
