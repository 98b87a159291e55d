/**
 * Tool calls written as text (`textToolCalls: 'recover'`). Models sometimes write a call as JSON in the final
 * channel instead of a Harmony tool call (and prompt-based tool calling relies on exactly this). When the
 * request declared tools, a call of a declared tool is recovered from final text, trying in order: the whole
 * text as JSON; a fenced ```json block; a brace-balanced object starting at `{"tool"` or `{"name"`. The tool
 * is under `tool` or `name`, its arguments under `arguments` (an object or a JSON string) or `parameters`; a
 * doubly wrapped call (`arguments` holding `{ tool, arguments }`) is unwrapped; argument names the tool's
 * schema does not know are mapped onto its properties through alias groups or by spelling (case, `_`, `-`).
 * Undeclared tools, and arguments that lack a required property, stay text.
 *
 * Streaming: `TextCallHolder` holds back a message's text only while it can still become such a call and
 * releases it the moment it cannot; text that is not a call is released unchanged.
 */

import { isRecord } from '../base/records'
import { functionFields } from './options'
import { toolName } from './routing'

export interface DeclaredTool {
  name: string
  /** The schema's property names; null when only the name is known (no mapping, no required check). */
  properties: string[] | null
  required: string[]
}

export interface RecoveredCall {
  name: string
  /** The arguments as JSON text, names mapped onto the schema. */
  arguments: string
  /** The text the call was read from. */
  source: string
}

export type HeldOutput = { text: string } | { call: RecoveredCall }

/** Argument names that mean the same, as models write them. */
const ALIAS_GROUPS = [
  ['filepath', 'file_path', 'filePath', 'file'],
  ['path', 'directory', 'dir_path', 'dir', 'folder'],
  ['command', 'cmd', 'shell_command'],
  ['query', 'query_text', 'search_query'],
  ['unified_diff', 'diff', 'patch'],
  ['url', 'link', 'webpage', 'uri'],
  ['location', 'city', 'place'],
]

/** Held text longer than this is not a call in the making: released. */
const MAX_HELD = 64 * 1024

type Json = Record<string, unknown>

/** The declared tools of a request's `tools` (with schemas) and of tool names (names only). */
export function declaredTools(tools: readonly unknown[] | null | undefined, toolNames: readonly string[]): Map<string, DeclaredTool> {
  const declared = new Map<string, DeclaredTool>()
  for (const name of toolNames) {
    const bare = toolName(name)
    if (!name.includes('.') || bare !== name) declared.set(bare, { name: bare, properties: null, required: [] })
  }
  for (const tool of tools ?? []) {
    const fields = functionFields(tool)
    if (fields === null || typeof fields.name !== 'string') continue
    const schema = isRecord(fields.parameters) ? fields.parameters : {}
    const properties = isRecord(schema.properties) ? Object.keys(schema.properties) : []
    const required = Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === 'string') : []
    declared.set(fields.name, { name: fields.name, properties, required })
  }
  return declared
}

const normalize = (name: string) => name.toLowerCase().replace(/[_-]/g, '')

function mapArguments(args: Json, tool: DeclaredTool): Json {
  if (tool.properties === null) return args
  const properties = tool.properties
  const out: Json = {}
  for (const [key, value] of Object.entries(args)) {
    let target = key
    if (!properties.includes(key)) {
      const group = ALIAS_GROUPS.find((g) => g.includes(key))
      target =
        group?.find((alias) => properties.includes(alias) && !(alias in args) && !(alias in out)) ??
        properties.find((p) => normalize(p) === normalize(key) && !(p in args) && !(p in out)) ??
        key
    }
    out[target] = value
  }
  return out
}

/** A parsed JSON value as a call of a declared tool, or null. */
function callOf(value: unknown, declared: ReadonlyMap<string, DeclaredTool>, source: string): RecoveredCall | null {
  if (!isRecord(value)) return null
  const rawName = typeof value.tool === 'string' ? value.tool : typeof value.name === 'string' ? value.name : null
  if (rawName === null) return null
  const tool = declared.get(toolName(rawName))
  if (tool === undefined) return null
  let args: unknown = value.arguments ?? value.parameters ?? {}
  if (typeof args === 'string') {
    try {
      args = JSON.parse(args)
    } catch {
      return null
    }
  }
  if (!isRecord(args)) return null
  // A call wrapped twice: `{"tool": "x", "arguments": {"tool": "x", "arguments": {…}}}`.
  if ((typeof args.tool === 'string' || typeof args.name === 'string') && 'arguments' in args) {
    const inner = callOf(args, declared, source)
    if (inner !== null) return inner
  }
  const mapped = mapArguments(args, tool)
  if (tool.required.some((name) => !(name in mapped))) return null
  return { name: tool.name, arguments: JSON.stringify(mapped), source }
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/**
 * Where the brace-balanced object starting at `from` (a `{`) ends (index of its `}`), -1 if the text ends
 * first. Braces inside strings do not count.
 */
function objectEnd(text: string, from: number): number {
  let depth = 0
  let inString = false
  for (let i = from; i < text.length; i++) {
    const c = text[i]
    if (inString) {
      if (c === '\\') i++
      else if (c === '"') inString = false
    } else if (c === '"') inString = true
    else if (c === '{') depth++
    else if (c === '}' && --depth === 0) return i
  }
  return -1
}

const CALL_KEYS = ['"tool"', '"name"']

/** After `{` at `at`: 'yes' if a `"tool"`/`"name"` key follows, 'maybe' while the text could still become one. */
function startsCallObject(text: string, at: number): 'yes' | 'maybe' | 'no' {
  let i = at + 1
  while (i < text.length && /\s/.test(text[i])) i++
  const rest = text.slice(i, i + 6)
  if (CALL_KEYS.some((key) => rest.startsWith(key))) return 'yes'
  return CALL_KEYS.some((key) => key.startsWith(rest)) ? 'maybe' : 'no'
}

/**
 * One message's text, fed as it streams: `feed` returns what can be released now, `end` the rest. Text is
 * released in order and unchanged, except the text of a recovered call, which becomes the call.
 */
export class TextCallHolder {
  private text = ''
  /** `text[0, released)` has been given out. */
  private released = 0
  /** Inside a fenced block of another language: its text is never a call, and its closing fence opens nothing. */
  private foreignFence = false
  /** A leading object that parsed as a call without a `"tool"`/`"name"` key first: a call only if nothing else follows. */
  private wholeCall: { end: number; call: RecoveredCall } | null = null

  constructor(private readonly declared: ReadonlyMap<string, DeclaredTool>) {}

  feed(piece: string): HeldOutput[] {
    this.text += piece
    return this.scan(false)
  }

  end(): HeldOutput[] {
    return this.scan(true)
  }

  private scan(atEnd: boolean): HeldOutput[] {
    const out: HeldOutput[] = []
    const release = (to: number) => {
      if (to > this.released) out.push({ text: this.text.slice(this.released, to) })
      this.released = Math.max(this.released, to)
    }
    const text = this.text
    if (this.wholeCall !== null) {
      if (text.slice(this.wholeCall.end).trim() === '') {
        if (!atEnd) return out
        out.push({ call: this.wholeCall.call })
        this.released = text.length
        this.wholeCall = null
        return out
      }
      this.wholeCall = null // more text came: the object was not the whole text
    }
    let at = this.released
    while (at < text.length) {
      if (this.foreignFence) {
        const close = text.indexOf('```', at)
        if (close < 0) {
          release(text.length)
          return out
        }
        this.foreignFence = false
        at = close + 3
        continue
      }
      const brace = text.indexOf('{', at)
      const fence = text.indexOf('```', at)
      const candidate = Math.min(brace < 0 ? Infinity : brace, fence < 0 ? Infinity : fence)
      // Whitespace before a leading object belongs to "the whole text as JSON": held with it.
      const leading = this.released === 0 && text.slice(0, Math.min(candidate, text.length)).trim() === ''
      if (candidate === Infinity) {
        if (leading && !atEnd) return out
        // A trailing "`" or "``" may still become a fence.
        const tail = text.endsWith('``') ? 2 : text.endsWith('`') ? 1 : 0
        release(atEnd ? text.length : text.length - tail)
        return out
      }
      if (!(leading && candidate === brace)) release(candidate)
      const held = text.length - candidate
      if (candidate === fence) {
        const step = this.fenceAt(candidate, atEnd || held > MAX_HELD, out)
        if (step === null) return out
        at = step
      } else {
        const step = this.objectAt(candidate, atEnd || held > MAX_HELD, out)
        if (step === null) return out
        at = step
      }
    }
    release(text.length)
    return out
  }

  /** A fence at `at`: the next index to scan from, or null to hold. `final`: nothing more will come. */
  private fenceAt(at: number, final: boolean, out: HeldOutput[]): number | null {
    const text = this.text
    const lineEnd = text.indexOf('\n', at)
    if (lineEnd < 0) return final ? this.giveUp(at + 3, out) : null
    const language = text
      .slice(at + 3, lineEnd)
      .trim()
      .toLowerCase()
    if (language !== '' && language !== 'json') {
      this.foreignFence = true
      return this.giveUp(lineEnd + 1, out)
    }
    const close = text.indexOf('```', lineEnd + 1)
    if (close < 0) return final ? this.giveUp(lineEnd + 1, out) : null
    const body = text.slice(lineEnd + 1, close)
    const call = callOf(parse(body), this.declared, text.slice(at, close + 3))
    if (call === null) return this.giveUp(close + 3, out)
    out.push({ call })
    this.released = close + 3
    return close + 3
  }

  /** A `{` at `at`: the next index to scan from, or null to hold. */
  private objectAt(at: number, final: boolean, out: HeldOutput[]): number | null {
    const text = this.text
    const leading = text.slice(0, at).trim() === ''
    const keyed = startsCallObject(text, at)
    if (keyed === 'no' && !leading) return this.giveUp(at + 1, out)
    if (keyed === 'maybe' && !final && !leading) return null
    const end = objectEnd(text, at)
    if (end < 0) return final ? this.giveUp(at + 1, out) : null
    const source = text.slice(at, end + 1)
    const call = callOf(parse(source), this.declared, source)
    if (call !== null && keyed === 'yes') {
      out.push({ call })
      this.released = end + 1
      return end + 1
    }
    if (call !== null && leading) {
      // The whole text as JSON: a call only if nothing but whitespace follows, which the end of the message tells.
      if (final && text.slice(end + 1).trim() === '') {
        out.push({ call })
        this.released = text.length
        return text.length
      }
      if (!final && text.slice(end + 1).trim() === '') {
        this.wholeCall = { end: end + 1, call }
        return null
      }
    }
    return this.giveUp(at + 1, out)
  }

  /** The candidate is not a call: release through `to` and scan on from there. */
  private giveUp(to: number, out: HeldOutput[]): number {
    if (to > this.released) out.push({ text: this.text.slice(this.released, to) })
    this.released = Math.max(this.released, to)
    return to
  }
}
