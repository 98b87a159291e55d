/** Engine client options, checked at construction: a TypeError naming the option. */
export function checkEngineOptions(options: unknown, where: string, known: readonly string[]): void {
  if (options === null || typeof options !== 'object') throw new TypeError(`${where}: options must be an object`)
  const o = options as Record<string, unknown>
  for (const key of Object.keys(o)) if (!known.includes(key)) throw new TypeError(`${where}: unknown option '${key}' (known: ${known.join(', ')})`)
  if (typeof o.url !== 'string') throw new TypeError(`${where}: option 'url' is required, e.g. 'http://127.0.0.1:8000'`)
  let url: URL
  try {
    url = new URL(o.url)
  } catch {
    throw new TypeError(`${where}: option 'url' is not a URL: ${JSON.stringify(o.url)}`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError(`${where}: option 'url' must be http or https`)
  for (const key of ['connectTimeoutMs', 'readTimeoutMs', 'maxEventBytes', 'defaultMaxTokens']) {
    if (o[key] !== undefined && (!Number.isSafeInteger(o[key]) || (o[key] as number) < 1)) throw new TypeError(`${where}: option '${key}' must be a positive integer`)
  }
  if (o.model !== undefined && (typeof o.model !== 'string' || o.model === '')) throw new TypeError(`${where}: option 'model' must be a non-empty string`)
  if (o.headers !== undefined && (o.headers === null || typeof o.headers !== 'object' || Object.values(o.headers).some((v) => typeof v !== 'string'))) {
    throw new TypeError(`${where}: option 'headers' must map names to strings`)
  }
}
