/**
 * The public streaming parser. It turns engine output (`engine.ts`) into segments, messages and
 * diagnostics, identically for both implementations, and owns argument checking and typed errors.
 */
import {
  EVENT_CLOSE,
  EVENT_OPEN,
  EVENT_TEXT,
  type Engine,
  OUT_BAD_INDEX,
  OUT_DIAGNOSTICS,
  OUT_EVENTS,
  OUT_FIRST_EVENT,
  OUT_HEADERS,
  OUT_STATUS,
  type RawDiagnostic,
  type RawHeader,
  STATE_CONTENT,
  STATE_HEADER,
  STATUS_FINISHED,
  STATUS_INVALID_TOKEN,
  STATUS_PARSE_ERROR,
  TERMINATOR_CALL,
  TERMINATOR_END,
  TERMINATOR_RETURN,
  outCapacity,
} from './engine'
import { HarmonyError, HarmonyParseError, HarmonyStateError } from './errors'
import { DEFAULT_MAX_HEADER_TOKENS } from './fallback/stream-parser'
import { LAST_TOKEN } from './fallback/tokens'
import { createEngine, implementation as defaultImplementation } from './loader'
import type {
  HarmonyBatch,
  HarmonyDiagnostic,
  HarmonyMessage,
  HarmonyStreamParserOptions,
  Implementation,
  ParserState,
  Terminator,
} from './types'

const ROLES = ['user', 'assistant', 'system', 'developer', 'tool']
const TERMINATORS: Terminator[] = []
TERMINATORS[TERMINATOR_END] = 'end'
TERMINATORS[TERMINATOR_RETURN] = 'return'
TERMINATORS[TERMINATOR_CALL] = 'call'

// Scratch arrays shared by all parsers of this thread: calls are synchronous, so one at a time uses them.
let out = new Uint32Array(outCapacity(64))
let scratchTokens = new Uint32Array(64)

function outFor(tokens: number): Uint32Array {
  const needed = outCapacity(tokens)
  if (out.length < needed) out = new Uint32Array(Math.max(needed, out.length * 2))
  return out
}

/** Checks and converts the tokens argument; a Uint32Array is passed through (the engine checks its range). */
function tokenArray(tokens: unknown): Uint32Array {
  // Memory another thread may write to is copied first: the engines validate ids, then read them again.
  if (tokens instanceof Uint32Array && !(tokens.buffer instanceof SharedArrayBuffer)) return tokens
  if (!Array.isArray(tokens) && !(ArrayBuffer.isView(tokens) && !(tokens instanceof DataView))) {
    throw new TypeError('tokens must be a Uint32Array or an array of token ids')
  }
  const list = tokens as ArrayLike<unknown>
  if (scratchTokens.length < list.length) scratchTokens = new Uint32Array(Math.max(list.length, scratchTokens.length * 2))
  for (let i = 0; i < list.length; i++) {
    const id = list[i]
    if (typeof id !== 'number' || !Number.isInteger(id)) {
      throw new TypeError(`token at index ${i} is not an integer token id: ${String(id)}`)
    }
    if (id < 0 || id > LAST_TOKEN) {
      throw new RangeError(`token id ${id} at index ${i} is outside the vocabulary (0..=${LAST_TOKEN})`)
    }
    scratchTokens[i] = id
  }
  return scratchTokens.subarray(0, list.length)
}

/** A failure inside an engine call (a bug, never bad input) becomes `internal-error`. */
function internalError(cause: unknown): HarmonyError {
  const reason = cause instanceof Error ? cause.message : String(cause)
  return new HarmonyError('internal-error', `harmony-stream internal error: ${reason}`, { cause })
}

interface OpenMessage {
  index: number
  header: RawHeader
  content: string
}

function messageOf(open: OpenMessage, terminator: number): HarmonyMessage {
  const { header } = open
  // Absent fields are left out, as in the reference's JSON; the key order is fixed.
  return {
    role: header.role,
    ...(header.name != null && { name: header.name }),
    ...(header.channel != null && { channel: header.channel }),
    ...(header.recipient != null && { recipient: header.recipient }),
    ...(header.contentType != null && { contentType: header.contentType }),
    content: open.content,
    terminator: TERMINATORS[terminator] ?? null,
  }
}

function diagnosticOf(raw: RawDiagnostic): HarmonyDiagnostic {
  const diagnostic: HarmonyDiagnostic = { code: raw.code, message: raw.message, tokenOffset: raw.tokenOffset }
  if (raw.text != null) diagnostic.text = raw.text
  return diagnostic
}

function checkOptions(options: HarmonyStreamParserOptions): void {
  if (options === null || typeof options !== 'object') throw new TypeError('options must be an object')
  const { role, strict, maxHeaderTokens, implementation, toolNames } = options
  if (role !== undefined && role !== null && !ROLES.includes(role as string)) {
    throw new TypeError(`role must be one of ${ROLES.join(', ')}, or null; got ${JSON.stringify(role)}`)
  }
  if (strict !== undefined && typeof strict !== 'boolean') throw new TypeError('strict must be a boolean')
  if (maxHeaderTokens !== undefined && (!Number.isInteger(maxHeaderTokens) || maxHeaderTokens < 1 || maxHeaderTokens > 0xffff_ffff)) {
    throw new RangeError(`maxHeaderTokens must be an integer from 1 to ${0xffff_ffff}; got ${String(maxHeaderTokens)}`)
  }
  // Lone surrogates would reach Rust as U+FFFD but stay as they are in JavaScript: refused, like empty names.
  const wellFormed = (name: unknown) => typeof name === 'string' && name !== '' && !/\p{Surrogate}/u.test(name)
  if (toolNames !== undefined && (!Array.isArray(toolNames) || !toolNames.every(wellFormed))) {
    throw new TypeError('toolNames must be an array of non-empty, well-formed strings')
  }
  if (implementation !== undefined && implementation !== 'native' && implementation !== 'js') {
    throw new TypeError(`implementation must be 'native' or 'js'; got ${JSON.stringify(implementation)}`)
  }
}

/**
 * A streaming parser for one completion. Feed it token ids as the engine produces them, in batches of any
 * size; each call returns the content text of that batch as segments (never mixing messages or channels),
 * the messages that ended, and diagnostics of what lenient mode recovered from.
 */
export class HarmonyStreamParser {
  /** The implementation running this parser. */
  readonly implementation: Implementation
  private readonly engine: Engine
  private open: OpenMessage | null = null
  private readonly completedMessages: HarmonyMessage[] = []
  private done = false

  constructor(options: HarmonyStreamParserOptions = {}) {
    checkOptions(options)
    this.implementation = options.implementation ?? defaultImplementation
    this.engine = createEngine(this.implementation, {
      role: options.role === undefined ? 'assistant' : options.role,
      strict: options.strict ?? false,
      maxHeaderTokens: options.maxHeaderTokens ?? DEFAULT_MAX_HEADER_TOKENS,
      toolNames: options.toolNames ? [...options.toolNames] : [],
    })
  }

  /**
   * Parses the next tokens of the stream. Throws `TypeError`/`RangeError` for bad ids (nothing consumed),
   * `HarmonyStateError` after `finish()`, and in strict mode `HarmonyParseError`.
   */
  push(tokens: Uint32Array | readonly number[]): HarmonyBatch {
    if (this.done) throw new HarmonyStateError('parser-finished', 'push() after finish(): create a new parser for a new stream')
    const ids = tokenArray(tokens)
    const buffer = outFor(ids.length)
    let text: string
    try {
      text = this.engine.push(ids, buffer)
    } catch (cause) {
      throw internalError(cause)
    }
    if (buffer[OUT_STATUS] === STATUS_INVALID_TOKEN) {
      const index = buffer[OUT_BAD_INDEX]
      throw new RangeError(`token id ${ids[index]} at index ${index} is outside the vocabulary (0..=${LAST_TOKEN})`)
    }
    return this.collect(text, buffer)
  }

  /** Ends the stream: flushes an unterminated message. Calling it again returns an empty batch. */
  finish(): HarmonyBatch {
    if (this.done) return { segments: [], completed: [], diagnostics: [] }
    this.done = true
    const buffer = outFor(0)
    let text: string
    try {
      text = this.engine.finish(buffer)
    } catch (cause) {
      throw internalError(cause)
    }
    return this.collect(text, buffer)
  }

  /** Every message completed so far (a copy). */
  get messages(): HarmonyMessage[] {
    return this.completedMessages.slice()
  }

  get state(): ParserState {
    const state = this.engine.state
    return state === STATE_HEADER ? 'header' : state === STATE_CONTENT ? 'content' : 'expect-start'
  }

  /** True once `finish()` was called. */
  get finished(): boolean {
    return this.done
  }

  private collect(text: string, buffer: Uint32Array): HarmonyBatch {
    const status = buffer[OUT_STATUS]
    if (status === STATUS_FINISHED) throw new HarmonyStateError('parser-finished', 'the parser is finished')
    const headers = buffer[OUT_HEADERS] > 0 ? this.engine.takeHeaders() : []
    const batch: HarmonyBatch = {
      segments: [],
      completed: [],
      diagnostics: buffer[OUT_DIAGNOSTICS] > 0 ? this.engine.takeDiagnostics().map(diagnosticOf) : [],
    }
    let nextHeader = 0
    let textStart = 0
    const end = OUT_FIRST_EVENT + 3 * buffer[OUT_EVENTS]
    for (let at = OUT_FIRST_EVENT; at < end; at += 3) {
      const kind = buffer[at]
      const index = buffer[at + 1]
      const argument = buffer[at + 2]
      if (kind === EVENT_OPEN) {
        this.open = { index, header: headers[nextHeader++], content: '' }
      } else if (kind === EVENT_TEXT) {
        const open = this.open!
        const piece = text.slice(textStart, argument)
        textStart = argument
        open.content += piece
        const { header } = open
        batch.segments.push({
          messageIndex: index,
          role: header.role,
          channel: header.channel ?? null,
          recipient: header.recipient ?? null,
          contentType: header.contentType ?? null,
          text: piece,
        })
      } else if (kind === EVENT_CLOSE) {
        const message = messageOf(this.open!, argument)
        this.open = null
        batch.completed.push(message)
        this.completedMessages.push(message)
      }
    }
    if (status === STATUS_PARSE_ERROR) {
      const error = this.engine.takeError()!
      throw new HarmonyParseError(error.code, error.message, error.tokenOffset, error.header ?? null, batch)
    }
    return batch
  }
}

/** Parses a whole completion (the tokens after `<|start|>{role}`) and returns its messages. */
export function parseCompletion(tokens: Uint32Array | readonly number[], options: HarmonyStreamParserOptions = {}): HarmonyMessage[] {
  const parser = new HarmonyStreamParser(options)
  parser.push(tokens)
  parser.finish()
  return parser.messages
}
