/**
 * Engine client options, checked at construction (a TypeError naming the option), so a typo in a
 * configuration fails at startup rather than on the first request, or never (an unknown option is an error,
 * not something quietly ignored).
 */
import { validateHeaderName, validateHeaderValue } from 'node:http'
import { checkOptions, describe, is, optionError } from '../base/options'

/**
 * Through the option kit: an object, and no option but `known` (an unknown one is named with the closest valid
 * name); the values are checked by the caller, each with the message its meaning needs.
 */
export function knownOptions(options: unknown, where: string, known: readonly string[]): Record<string, unknown> {
  // Every engine needs some option: no options at all is refused like any non-object.
  return checkOptions<Record<string, unknown>>(options ?? null, Object.fromEntries(known.map((key) => [key, is.any])), where)
}

/** The options every HTTP engine client takes (`HttpOptions` and the base `url`). */
export const HTTP_ENGINE_OPTIONS = [
  'url',
  'connectTimeoutMs',
  'readTimeoutMs',
  'headers',
  'maxEventBytes',
  'maxStreamBytes',
  'keepAlive',
] as const

/**
 * Checks what every HTTP engine client takes (`url`, timeouts, `headers`, `maxEventBytes`, `maxStreamBytes`,
 * `keepAlive`, and `model` where it is known) and that no other option is present; returns the base URL with a
 * trailing slash, so endpoint paths resolve under it (`http://host/prefix` + `generate` → `http://host/prefix/generate`).
 */
export function checkEngineOptions(options: unknown, where: string, known: readonly string[]): URL {
  const o = knownOptions(options, where, known)
  if (typeof o.url !== 'string') throw optionError(TypeError, `${where}: option 'url' is required, e.g. 'http://127.0.0.1:8000'`)
  let url: URL
  try {
    url = new URL(o.url.endsWith('/') ? o.url : `${o.url}/`)
  } catch {
    throw optionError(TypeError, `${where}: option 'url' is not a URL: ${JSON.stringify(o.url)}`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw optionError(TypeError, `${where}: option 'url' must be http or https, not ${url.protocol}`)
  if (url.search !== '' || url.hash !== '')
    throw optionError(TypeError, `${where}: option 'url' must be a base URL without query or fragment`)
  for (const key of ['connectTimeoutMs', 'readTimeoutMs', 'maxEventBytes', 'maxStreamBytes']) positiveInteger(o, key, where)
  if (o.keepAlive !== undefined && typeof o.keepAlive !== 'boolean')
    throw optionError(TypeError, `${where}: option 'keepAlive' must be true or false, not ${describe(o.keepAlive)}`)
  if (o.model !== undefined && (typeof o.model !== 'string' || o.model === ''))
    throw optionError(TypeError, `${where}: option 'model' must be a non-empty string`)
  if (
    o.headers !== undefined &&
    (o.headers === null || typeof o.headers !== 'object' || Object.values(o.headers).some((v) => typeof v !== 'string'))
  ) {
    throw optionError(TypeError, `${where}: option 'headers' must map header names to strings`)
  }
  if (o.headers !== undefined) checkHeaders(o.headers as Record<string, string>, where)
  return url
}

/**
 * The headers of a connection and of a body's framing, which the client sets itself (http.ts, and undici under it,
 * which refuses a request that names one: lib/core/request.js, `processHeader`).
 */
const FRAMING_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'expect', 'content-length'])

/** Each header a valid HTTP field (Node's own checks), and none of the client's own (`FRAMING_HEADERS`). */
function checkHeaders(headers: Record<string, string>, where: string): void {
  for (const [name, value] of Object.entries(headers)) {
    try {
      validateHeaderName(name)
      validateHeaderValue(name, value)
    } catch (error) {
      throw optionError(TypeError, `${where}: option 'headers': ${(error as Error).message}`)
    }
    if (FRAMING_HEADERS.has(name.toLowerCase()))
      throw optionError(TypeError, `${where}: option 'headers' cannot set ${name}: the client sets it for each request`)
  }
}

/** An optional option that must be a positive integer when present. */
export function positiveInteger(options: object, key: string, where: string): void {
  const value = (options as Record<string, unknown>)[key]
  if (value !== undefined && (!Number.isSafeInteger(value) || (value as number) < 1))
    throw optionError(TypeError, `${where}: option '${key}' must be a positive integer, not ${String(value)}`)
}
