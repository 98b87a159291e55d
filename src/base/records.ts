/** A JSON object as a request carries it: any non-null object that is not an array. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

/** The JSON object `text` holds (a tool call's arguments; empty text: `{}`), or null when it holds none. */
export function jsonObjectOf(text: string): Record<string, unknown> | null {
  try {
    const parsed: unknown = text.trim() === '' ? {} : JSON.parse(text)
    return isRecord(parsed) ? parsed : null
  } catch {
    return null
  }
}
