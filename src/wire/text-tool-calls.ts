/**
 * Tool calls written as text (`textToolCalls`, on by default where tools are declared). Models sometimes write a
 * call as JSON in the final channel instead of a Harmony tool call (vLLM #22337: `[{"name": …, "parameters":
 * …}]` as the answer; prompt-based tool calling relies on exactly this). When the request declared tools, a call
 * of a declared tool is recovered from final text, trying in order: the whole text as JSON; a leading JSON array
 * of calls; a fenced ```json block; a brace-balanced object starting at `{"tool"` or `{"name"`. The tool is
 * under `tool` or `name`, its arguments under `arguments` (an object or a JSON string) or `parameters`; a doubly
 * wrapped call (`arguments` holding `{ tool, arguments }`) is unwrapped; argument names the tool's schema does
 * not know are mapped onto its properties through alias groups or by spelling (case, `_`, `-`). Undeclared
 * tools, and arguments that lack a required property, stay text.
 *
 * A commentary message with no recipient (a preamble) whose whole text is a JSON object is a call too when it
 * names a declared tool, or when its keys fit exactly one declared tool's schema (TensorRT-LLM #9256: the
 * recipient was lost, the arguments were not): `PreambleCallHolder`.
 *
 * Streaming: the holders hold back a message's text only while it can still become such a call and release it
 * the moment it cannot; text that is not a call is released unchanged.
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

/** Where the bracket-balanced JSON value opened at `from` (`[` or `{`) ends, -1 if the text ends first. */
function valueEnd(text: string, from: number): number {
  let depth = 0
  let inString = false
  for (let i = from; i < text.length; i++) {
    const c = text[i]
    if (inString) {
      if (c === '\\') i++
      else if (c === '"') inString = false
    } else if (c === '"') inString = true
    else if (c === '{' || c === '[') depth++
    else if ((c === '}' || c === ']') && --depth === 0) return i
  }
  return -1
}

/** The calls of a JSON array whose every element is a call of a declared tool, or null. */
function callsOf(value: unknown, declared: ReadonlyMap<string, DeclaredTool>, source: string): RecoveredCall[] | null {
  if (!Array.isArray(value) || value.length === 0) return null
  const calls: RecoveredCall[] = []
  for (const element of value) {
    const call = callOf(element, declared, source)
    if (call === null) return null
    calls.push(call)
  }
  return calls
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
  /** The text not yet given out, and at its start what was given out in the last scan (`text[0, released)`). */
  private text = ''
  private released = 0
  /**
   * Text was given out (or read as a call) before `text`: no longer the start of the message. What was given
   * out is dropped after each scan, so a long answer is not scanned, or kept, again and again.
   */
  private started = false
  /** Inside a fenced block of another language: its text is never a call, and its closing fence opens nothing. */
  private foreignFence = false
  /** A leading object that parsed as a call without a `"tool"`/`"name"` key first: a call only if nothing else follows. */
  private wholeCall: { end: number; call: RecoveredCall } | null = null
  /** The text's first character was looked at for a leading array of calls (done once it is decided). */
  private arrayDecided = false

  constructor(private readonly declared: ReadonlyMap<string, DeclaredTool>) {}

  feed(piece: string): HeldOutput[] {
    // Prose after prose, or more of another language's fenced block: nothing held, and nothing in it that could
    // begin a call (or end the block).
    if (this.started && this.text === '' && !piece.includes('`') && (this.foreignFence || !piece.includes('{')))
      return piece === '' ? [] : [{ text: piece }]
    this.text += piece
    return this.scan(false)
  }

  end(): HeldOutput[] {
    return this.scan(true)
  }

  private scan(atEnd: boolean): HeldOutput[] {
    const out = this.scanText(atEnd)
    if (this.released > 0) {
      this.text = this.text.slice(this.released)
      if (this.wholeCall !== null) this.wholeCall = { ...this.wholeCall, end: this.wholeCall.end - this.released }
      this.released = 0
      this.started = true
    }
    return out
  }

  private scanText(atEnd: boolean): HeldOutput[] {
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
    if (!this.arrayDecided) {
      const step = this.leadingArray(atEnd, out)
      if (step === null) return out
      at = step
    }
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
      const leading = !this.started && this.released === 0 && text.slice(0, Math.min(candidate, text.length)).trim() === ''
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

  /**
   * Before anything is released: a text that opens with `[{` is held to the array's end and, when every element is
   * a call of a declared tool, becomes those calls. The next index to scan from, or null to hold.
   */
  private leadingArray(atEnd: boolean, out: HeldOutput[]): number | null {
    const text = this.text
    const open = text.search(/\S/)
    if (open < 0) return atEnd ? this.decided(0) : null
    if (text[open] !== '[') return this.decided(0)
    const next = text.slice(open + 1).search(/\S/)
    if (next < 0) return atEnd ? this.decided(0) : null
    if (text[open + 1 + next] !== '{') return this.decided(0)
    const end = valueEnd(text, open)
    if (end < 0) return atEnd || text.length - open > MAX_HELD ? this.decided(0) : null
    const source = text.slice(open, end + 1)
    const calls = callsOf(parse(source), this.declared, source)
    if (calls === null) return this.decided(0)
    for (const call of calls) out.push({ call })
    this.released = end + 1
    return this.decided(end + 1)
  }

  private decided(at: number): number {
    this.arrayDecided = true
    return at
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
    const leading = !this.started && text.slice(0, at).trim() === ''
    const keyed = startsCallObject(text, at)
    if (keyed === 'no' && !leading) return this.giveUp(at + 1, out)
    if (keyed === 'maybe' && !final && !leading) return null
    const end = valueEnd(text, at)
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

/**
 * A preamble's text (a commentary message with no recipient), fed as it streams. Prose is released as it comes;
 * a text that opens with `{` is held to the message's end (at most 64 KiB), when it becomes a call if it is one
 * of a declared tool as `TextCallHolder` reads calls, or if it is a JSON object whose keys fit exactly one
 * declared tool's schema (every key a property, every required property there).
 */
export class PreambleCallHolder {
  private text = ''
  private holding = true

  constructor(private readonly declared: ReadonlyMap<string, DeclaredTool>) {}

  feed(piece: string): HeldOutput[] {
    if (!this.holding) return piece === '' ? [] : [{ text: piece }]
    this.text += piece
    const first = this.text.search(/\S/)
    if ((first >= 0 && this.text[first] !== '{') || this.text.length > MAX_HELD) return this.release()
    return []
  }

  end(): HeldOutput[] {
    if (!this.holding) return []
    const value = parse(this.text)
    const call = callOf(value, this.declared, this.text) ?? argumentsCall(value, this.declared, this.text)
    return call === null ? this.release() : [{ call }]
  }

  private release(): HeldOutput[] {
    this.holding = false
    const text = this.text
    this.text = ''
    return text === '' ? [] : [{ text }]
  }
}

/** Arguments alone (`{"q": …}`): a call of the one declared tool whose schema they fit, or null. */
function argumentsCall(value: unknown, declared: ReadonlyMap<string, DeclaredTool>, source: string): RecoveredCall | null {
  if (!isRecord(value)) return null
  const keys = Object.keys(value)
  if (keys.length === 0) return null
  const fits = [...declared.values()].filter(
    (tool) =>
      tool.properties !== null && keys.every((key) => tool.properties!.includes(key)) && tool.required.every((name) => keys.includes(name)),
  )
  return fits.length === 1 ? { name: fits[0]!.name, arguments: JSON.stringify(value), source } : null
}
