/**
 * The one option kit: every public constructor and function that takes an options object checks it here,
 * so a misspelt option fails at once, naming itself and the closest valid name, instead of a default
 * silently taken (`new HarmonyStreamParser({ Strict: true })` would otherwise run lenient).
 *
 *   const PARSER_OPTIONS = { strict: is.boolean, maxHeaderTokens: is.integer(1, 0xffff_ffff) }
 *   checkOptions(options, PARSER_OPTIONS, 'HarmonyStreamParser')
 *
 * Errors follow JavaScript's convention for bad arguments: `TypeError` (not an object, unknown option, wrong
 * type), `RangeError` (a number of the right type out of its range). Both carry `code` (`invalid-option`),
 * like Node's own argument errors, and a message `Where: option 'name' must be …, not …`.
 */

/** A check of one option's value; `what` completes "must be …" in the error. */
export interface Rule {
  readonly what: string
  test(value: unknown): boolean
  /** A number of the right type that fails `test` is out of range: RangeError instead of TypeError. */
  readonly range?: boolean
}

/** The options a function takes, by name. `undefined` always passes: every option is optional unless `required`. */
export type OptionSpec = Readonly<Record<string, Rule>>

const OPTION_ERROR_CODE = 'invalid-option'

/** A bad option: JavaScript's `TypeError` or `RangeError`, with `code: 'invalid-option'`. Every option check throws one. */
export function optionError(Kind: typeof TypeError | typeof RangeError, message: string): TypeError {
  return Object.assign(new Kind(message), { code: OPTION_ERROR_CODE })
}

/** Short, bounded text of a value for a message. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)
  if (typeof value === 'function') return 'a function'
  if (Array.isArray(value)) return 'an array'
  if (value === null) return 'null'
  if (typeof value === 'object') return 'an object'
  return String(value)
}

function rule(what: string, test: (value: unknown) => boolean, range = false): Rule {
  return { what, test, range }
}

export const is = {
  any: rule('anything', () => true),
  boolean: rule('a boolean', (v) => typeof v === 'boolean'),
  string: rule('a string', (v) => typeof v === 'string'),
  nonEmptyString: rule('a non-empty string', (v) => typeof v === 'string' && v !== ''),
  function: rule('a function', (v) => typeof v === 'function'),
  object: rule('an object', (v) => v !== null && typeof v === 'object' && !Array.isArray(v)),
  array: rule('an array', (v) => Array.isArray(v)),
  /** One of the listed values, e.g. `is.oneOf('native', 'js')`. */
  oneOf(...values: readonly unknown[]): Rule {
    return rule(values.map((v) => JSON.stringify(v)).join(' or '), (v) => values.includes(v))
  },
  /** An integer from `min` to `max` (a RangeError when it is a number out of that range). */
  integer(min: number, max = Number.MAX_SAFE_INTEGER): Rule {
    return rule(`an integer from ${min} to ${max}`, (v) => Number.isSafeInteger(v) && (v as number) >= min && (v as number) <= max, true)
  },
  /** A finite number from `min` to `max`. */
  number(min = Number.NEGATIVE_INFINITY, max = Number.POSITIVE_INFINITY): Rule {
    const bounds = Number.isFinite(min) && Number.isFinite(max) ? ` from ${min} to ${max}` : Number.isFinite(min) ? ` ≥ ${min}` : ''
    return rule(`a finite number${bounds}`, (v) => typeof v === 'number' && Number.isFinite(v) && v >= min && v <= max, true)
  },
  /** An array whose every element passes `element`. */
  arrayOf(element: Rule): Rule {
    return rule(`an array of ${element.what.replace(/^an? /, '')}s`, (v) => Array.isArray(v) && v.every((e) => element.test(e)))
  },
  /** `null` or what `inner` accepts. */
  nullable(inner: Rule): Rule {
    return rule(`${inner.what} or null`, (v) => v === null || inner.test(v), inner.range)
  },
  /** Either rule. */
  either(a: Rule, b: Rule): Rule {
    return rule(`${a.what} or ${b.what}`, (v) => a.test(v) || b.test(v), a.range || b.range)
  },
} as const

/**
 * Checks `options` (of `where`, e.g. `HarmonyStreamParser`) against `spec`: an object (or undefined, when
 * nothing is required), no unknown key, every present value passing its rule, every `required` one present.
 * Returns `options` (or `{}` for undefined) typed as `T`.
 */
export function checkOptions<T extends object>(options: unknown, spec: OptionSpec, where: string, required: readonly string[] = []): T {
  if (options === undefined && required.length === 0) return {} as T
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw optionError(TypeError, `${where}: options must be an object, not ${describe(options)}`)
  }
  const values = options as Record<string, unknown>
  // One pass over the keys given (usually a few), not over the spec: constructors call this on hot paths.
  for (const key in values) {
    if (!Object.hasOwn(values, key)) continue
    const check = Object.hasOwn(spec, key) ? spec[key] : undefined
    if (check === undefined) {
      const closest = closestName(key, Object.keys(spec))
      const hint = closest === null ? '' : ` (did you mean '${closest}'?)`
      throw optionError(TypeError, `${where}: unknown option '${key}'${hint}; the options are ${Object.keys(spec).join(', ')}`)
    }
    const value = values[key]
    if (value === undefined || check.test(value)) continue
    const Kind = check.range && typeof value === 'number' ? RangeError : TypeError
    throw optionError(Kind, `${where}: option '${key}' must be ${check.what}, not ${describe(value)}`)
  }
  for (const key of required) {
    if (values[key] === undefined) throw optionError(TypeError, `${where}: option '${key}' is required: ${spec[key]?.what ?? 'a value'}`)
  }
  return options as T
}

/**
 * The known name closest to `name`: the same but for case, at most two edits away (a typo), or the start
 * of it (`prefixPreserve` for `prefixPreserving`); null when none is that close.
 */
/** " (did you mean x?)" for a misspelt `name` of `known` (a command or a flag), or nothing when none is close. */
export function didYouMean(name: string, known: readonly string[]): string {
  const closest = closestName(name, known)
  return closest === null ? '' : ` (did you mean ${closest}?)`
}

/** The known name closest to `name` (a misspelling's "did you mean"), or null when none is close. */
function closestName(name: string, known: readonly string[]): string | null {
  const lower = name.toLowerCase()
  let best: string | null = null
  let bestDistance = 3
  for (const candidate of known) {
    const other = candidate.toLowerCase()
    if (other === lower) return candidate
    if (lower.length >= 4 && other.startsWith(lower) && bestDistance > 1) {
      best = candidate
      bestDistance = 1
      continue
    }
    const distance = editDistance(lower, other, bestDistance)
    if (distance < bestDistance) {
      best = candidate
      bestDistance = distance
    }
  }
  return best
}

/** Levenshtein distance, or `limit` as soon as it is known to be at least that (names are short). */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) >= limit) return limit
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    let rowMin = i
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      row[j] = Math.min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost)
      rowMin = Math.min(rowMin, row[j])
    }
    if (rowMin >= limit) return limit
    previous = row
  }
  return Math.min(previous[b.length], limit)
}
