/**
 * Bounds on a request, checked before any rendering work, so that no request can make the renderer's work
 * grow faster than its size, overflow the stack, or hold the thread for seconds: each bound exceeded is a
 * `HarmonyRequestError` (HTTP 400) naming the field and the limit. All are options (`limits`) of the
 * renderers; docs/API.md lists them with the measurements behind the defaults.
 *
 * - `maxDepth`: nesting of any JSON value (tool schemas, arguments, tool_choice…). The schema-to-TypeScript
 *   rendering and JSON.stringify recurse; a body nested thousands deep would overflow the stack.
 * - `maxMessages`, `maxTools`: counts of messages (Chat) or input items (Responses), and of tools.
 * - `maxIdentifierLength`: tool names, call ids, message names.
 * - `maxRunLength`: the longest run of characters of one class the tokenizer reads as one piece (letters,
 *   whitespace, or punctuation). Byte-pair encoding of one piece costs more than linear time (gpt-tokenizer:
 *   ~0.2 s for 16,384 letters, ~3 s for 65,536, ~50 s for 262,144 on this project's 2-core machine), and
 *   tiktoken-rs's pre-tokenizer recurses on long whitespace runs (a stack overflow at about a million spaces).
 *   Digits are read three at a time, so a run of digits is not bounded.
 */
import { HarmonyRequestError } from '../base/errors'
import { is, type OptionSpec } from '../base/options'
import type { RenderCache } from './cache'

export interface RenderLimits {
  /** Deepest nesting of any JSON value in the request (an object or array inside another counts one level). Default 64. */
  maxDepth: number
  /** Most messages (Chat `messages`, Responses `input` items; a conversation's messages). Default 10,000. */
  maxMessages: number
  /** Most tools (OpenAI allows 128 functions). Default 128. */
  maxTools: number
  /** Longest tool name, call id or message name, in characters. Default 256. */
  maxIdentifierLength: number
  /** Longest run of letters, of whitespace or of punctuation in any string of the request, in characters. Default 4,096. */
  maxRunLength: number
}

export const DEFAULT_RENDER_LIMITS: Readonly<RenderLimits> = Object.freeze({
  maxDepth: 64,
  maxMessages: 10_000,
  maxTools: 128,
  maxIdentifierLength: 256,
  maxRunLength: 4096,
})

/** The `limits` option: any of the bounds, each a positive integer. */
export const LIMIT_OPTIONS: OptionSpec = {
  maxDepth: is.integer(1, 10_000),
  maxMessages: is.integer(1),
  maxTools: is.integer(0),
  maxIdentifierLength: is.integer(1),
  maxRunLength: is.integer(1),
}

function tooBig(message: string, param: string | null): never {
  throw new HarmonyRequestError(message, param)
}

/** `parent` + `key` as a JSON path (`messages[3].content`), for `param`. */
function pathOf(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`
  const safe = /^[A-Za-z_$][\w$]*$/.test(key) ? key : JSON.stringify(key)
  if (parent === '') return safe
  return safe === key ? `${parent}.${key}` : `${parent}[${safe}]`
}

const WHITESPACE = 1
const LETTER = 2
const OTHER = 3
const DIGIT = 4
const NON_ASCII_LETTER = /[\p{L}\p{M}]/u
const NON_ASCII_SPACE = /\s/u

/** Classes of the BMP's non-ASCII characters, worked out on first sight (0: not yet). */
const bmpClasses = new Uint8Array(0x10000)

function classOfChar(char: string): number {
  if (NON_ASCII_LETTER.test(char)) return LETTER
  if (NON_ASCII_SPACE.test(char)) return WHITESPACE
  return /\p{N}/u.test(char) ? DIGIT : OTHER
}

/** Classes of the ASCII characters, looked up rather than worked out: this runs over every character of a request. */
const ASCII_CLASSES = Uint8Array.from({ length: 128 }, (_, code) => {
  if (code === 32 || (code >= 9 && code <= 13)) return WHITESPACE
  if ((code >= 65 && code <= 90) || (code >= 97 && code <= 122)) return LETTER
  if (code >= 48 && code <= 57) return DIGIT
  return OTHER
})

function classOf(code: number, text: string, at: number): number {
  if (code < 128) return ASCII_CLASSES[code]
  if (code < 0xd800 || code > 0xdfff) return (bmpClasses[code] ||= classOfChar(String.fromCharCode(code)))
  return classOfChar(String.fromCodePoint(text.codePointAt(at) ?? code))
}

/**
 * The longest run of one class in `text`, read until a run passes `limit` (then that run: a hostile string is
 * not read to its end): linear.
 */
function longestRun(text: string, limit: number): number {
  let longest = 0
  let run = 0
  let previous = 0
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i)
    // A low surrogate continues the character before it (the run is measured at the next character).
    if (code >= 0xdc00 && code <= 0xdfff) {
      if (run > 0) run++
      continue
    }
    const kind = classOf(code, text, i)
    run = kind === previous && kind !== DIGIT ? run + 1 : 1
    previous = kind
    if (run > longest) {
      longest = run
      if (longest > limit) break
    }
  }
  return longest
}

/** Texts shorter than this are read again each time: a lookup would cost about as much. */
const RUN_MEMO_MIN_LENGTH = 256

/** Whether `text` has a run of one class longer than `limit`; `runs` remembers long texts read before. */
function runOver(text: string, limit: number, runs: RenderCache | null): boolean {
  if (text.length <= limit) return false
  if (runs === null || text.length < RUN_MEMO_MIN_LENGTH) return longestRun(text, limit) > limit
  let run = runs.runOf(text)
  if (run === undefined) {
    run = longestRun(text, limit)
    // A run cut short at the limit is not the text's longest: only a text within it is remembered.
    if (run <= limit) runs.rememberRun(text, run)
  }
  return run > limit
}

/**
 * Checks every value of `body` (a request, or a conversation's messages) against `maxDepth` and, with
 * `strings`, every string against `maxRunLength`, without recursion: the first value over a bound throws,
 * naming its path. `root` is the path of `body` itself ('' for a request body).
 */
function checkValueLimits(body: unknown, limits: RenderLimits, root = '', strings = true, runs: RenderCache | null = null): void {
  const stack: { value: unknown; path: string; depth: number }[] = [{ value: body, path: root, depth: 0 }]
  while (stack.length > 0) {
    const { value, path, depth } = stack.pop()!
    if (typeof value === 'string') {
      if (strings && runOver(value, limits.maxRunLength, runs)) {
        tooBig(
          `${path || 'the request'} has a run of more than ${limits.maxRunLength} characters of one kind (letters, spaces or punctuation): the limit is ${limits.maxRunLength} (limits.maxRunLength)`,
          path || null,
        )
      }
      continue
    }
    if (value === null || typeof value !== 'object') continue
    if (depth >= limits.maxDepth) {
      tooBig(`${path || 'the request'} is nested more than ${limits.maxDepth} levels deep (limits.maxDepth)`, path || null)
    }
    if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) stack.push({ value: value[i], path: pathOf(path, i), depth: depth + 1 })
    } else {
      const keys = Object.keys(value)
      for (let i = keys.length - 1; i >= 0; i--) {
        const key = keys[i]
        stack.push({ value: (value as Record<string, unknown>)[key], path: pathOf(path, key), depth: depth + 1 })
        if (key.length > limits.maxRunLength)
          tooBig(`a key of ${path || 'the request'} is longer than ${limits.maxRunLength} characters`, path || null)
      }
    }
  }
}

/** A count bound: `count` items of `param` against `limit` (named `name` in the message). */
function checkCount(count: number, limit: number, param: string, name: keyof RenderLimits): void {
  if (count > limit) tooBig(`${param} has ${count} entries; the limit is ${limit} (limits.${name})`, param)
}

/** An identifier bound: a name or id longer than `maxIdentifierLength`. */
function checkIdentifier(value: unknown, limits: RenderLimits, param: string): void {
  if (typeof value === 'string' && value.length > limits.maxIdentifierLength) {
    tooBig(`${param} is ${value.length} characters long; the limit is ${limits.maxIdentifierLength} (limits.maxIdentifierLength)`, param)
  }
}

/** Identifiers of a request body, by where they stand: the message or item fields and tool fields that name things. */
function identifiers(body: Record<string, unknown>, kind: RequestKind): [unknown, string][] {
  const found: [unknown, string][] = []
  const list = kind === 'responses' ? body.input : body.messages
  const listName = kind === 'responses' ? 'input' : 'messages'
  if (Array.isArray(list)) {
    list.forEach((entry, i) => {
      if (entry === null || typeof entry !== 'object') return
      const e = entry as Record<string, unknown>
      for (const key of ['name', 'tool_call_id', 'call_id', 'id']) found.push([e[key], `${listName}[${i}].${key}`])
      if (Array.isArray(e.tool_calls)) {
        e.tool_calls.forEach((call, j) => {
          if (call === null || typeof call !== 'object') return
          const c = call as Record<string, unknown>
          found.push([c.id, `${listName}[${i}].tool_calls[${j}].id`])
          const fn = c.function as Record<string, unknown> | undefined
          if (fn !== null && typeof fn === 'object') found.push([fn.name, `${listName}[${i}].tool_calls[${j}].function.name`])
        })
      }
    })
  }
  if (Array.isArray(body.tools)) {
    body.tools.forEach((tool, i) => {
      if (tool === null || typeof tool !== 'object') return
      const t = tool as Record<string, unknown>
      found.push([t.name, `tools[${i}].name`])
      const fn = t.function as Record<string, unknown> | undefined
      if (fn !== null && typeof fn === 'object') found.push([fn.name, `tools[${i}].function.name`])
    })
  }
  return found
}

/**
 * The requests whose bodies are bounded: Chat Completions, Responses, and `messages`: a body of another API whose
 * `messages` and `system` are read as Chat's (before a gateway translates it into a Chat request).
 */
export type RequestKind = 'chat' | 'responses' | 'messages'

/**
 * Every bound on a request body (`RequestKind`), before it is read for rendering. `strings`
 * false leaves out the one bound that reads every character (`maxRunLength` on string values): what must hold
 * before a body is copied to a render worker, which checks the rest (`RenderWorkers.render`).
 */
export function checkRequestLimits(
  body: unknown,
  kind: RequestKind,
  limits: RenderLimits,
  strings = true,
  runs: RenderCache | null = null,
): void {
  // Counts and names first: they are cheap, and a body with too many items is refused before it is walked.
  if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const request = body as Record<string, unknown>
    const list = kind === 'responses' ? request.input : request.messages
    if (Array.isArray(list)) checkCount(list.length, limits.maxMessages, kind === 'responses' ? 'input' : 'messages', 'maxMessages')
    if (Array.isArray(request.tools)) checkCount(request.tools.length, limits.maxTools, 'tools', 'maxTools')
    for (const [value, param] of identifiers(request, kind)) checkIdentifier(value, limits, param)
  }
  checkValueLimits(body, limits, '', strings, runs)
}

/** The bounds on a conversation given as messages (`renderConversation`, `renderForTraining`). */
export function checkConversationLimits(messages: unknown, limits: RenderLimits): void {
  if (Array.isArray(messages)) checkCount(messages.length, limits.maxMessages, 'messages', 'maxMessages')
  checkValueLimits(messages, limits, 'messages')
}
