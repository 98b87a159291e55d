/**
 * The streaming state machine. Mirrors crate/core/src/stream_parser.rs method for method; see the
 * comments there. Strict mode reproduces the reference parser's errors; lenient mode (the default)
 * recovers from everything with a diagnostic and drops no content text.
 */
import { STATE_CONTENT, STATE_EXPECT_START, STATE_HEADER, TERMINATOR_END, TERMINATOR_NONE } from '../protocol'
import { CHANNEL, END_OF_TEXT, FIRST_SPECIAL, MESSAGE, START, terminatorOf } from '../tokens'
import { type Header, type HeaderProblem, parseHeader, problemCode, problemMessage, type RecoveredHeader, recoverHeader } from './header'
import { BatchOutput, type ParseError } from './output'
import { decodeLossy, Utf8Assembler, validUpTo } from './utf8'
import type { Vocabulary } from './vocabulary'

/**
 * Ignored text between messages is reported in diagnostics of at most this many bytes each (mirrors
 * MAX_STRAY_BYTES in crate/core/src/stream_parser.rs).
 * @mirrored
 */
export const MAX_STRAY_BYTES = 4096

const REPLACEMENT = '\uFFFD'

export interface ParserOptions {
  role: string | null
  strict: boolean
  maxHeaderTokens: number
  /** Tools the request offered (e.g. `functions.get_weather`): lets lenient mode split `to=functions.xjson`. */
  toolNames: readonly string[]
}

export type PushError = { kind: 'invalid-token'; index: number; id: number } | { kind: 'finished' } | { kind: 'parse'; error: ParseError }

/** A header decoded and parsed: a pure function of its tokens, the role given, strict or lenient and the tool names. */
interface ReadHeader {
  readonly text: string
  readonly invalidUtf8: boolean
  readonly header: Readonly<Header>
  readonly problems: readonly HeaderProblem[]
}

/**
 * Recent headers by what their reading depends on (mirrors the header cache of crate/core/src/header.rs): a
 * model writes the same few headers over and over, and decoding and parsing one costs more than the content
 * of a short message. Shared by the parsers of this thread, frozen, bounded (emptied when full); headers
 * longer than CACHED_HEADER_TOKENS (rare, often malformed) are parsed every time.
 */
const headerCache = new Map<string, ReadHeader>()
const CACHED_HEADERS = 256
const CACHED_HEADER_TOKENS = 32

/** Thrown inside the token loop to stop it; caught in `push`. */
class StrictFailure {
  constructor(readonly error: ParseError) {}
}

export class StreamParser {
  private readonly vocabulary: Vocabulary
  private readonly strict: boolean
  private readonly maxHeaderTokens: number
  private readonly toolNames: readonly string[]
  /** The tool names as part of a header cache key. */
  private readonly toolNamesKey: string
  private currentState: number
  /** Role for the next header: the constructor's (first message only) or `assistant` after a missing `<|start|>`. */
  private nextRole: string | null
  private headerTokens: number[] = []
  /** Offset of the `<|start|>` that opened the current header, if one did. */
  private headerStart: number | null = null
  private openMessage: number | null = null
  private nextMessageIndex = 0
  private readonly utf8 = new Utf8Assembler()
  private strayBytes: number[] = []
  private strayTokens = 0
  private strayStart = 0
  /**
   * Lenient: the last message closed with `<|end|>` and no header began since: text written now, where
   * `<|start|>` belongs, is an answer the model wrote without its header (`strand`).
   */
  private strandable = false
  /** Tokens consumed so far over all batches. */
  private offset = 0
  private finished = false
  readonly output = new BatchOutput()

  constructor(vocabulary: Vocabulary, options: ParserOptions) {
    this.vocabulary = vocabulary
    this.strict = options.strict
    this.maxHeaderTokens = options.maxHeaderTokens
    this.toolNames = options.toolNames
    this.toolNamesKey = options.toolNames.length === 0 ? '' : JSON.stringify(options.toolNames)
    this.currentState = options.role !== null ? STATE_HEADER : STATE_EXPECT_START
    this.nextRole = options.role
  }

  get state(): number {
    return this.currentState
  }

  isFinished(): boolean {
    return this.finished
  }

  /**
   * Whether pushing `tokens[from..to)` would produce nothing at all (as `takes_silently` in
   * stream_parser.rs): a `<|start|>` that opens a header with no stray tokens to report, and header tokens
   * other than `<|message|>` while the header has room (lenient: nor a stop token or `<|start|>`). Never
   * `<|endoftext|>`: the adapters end the completion there (wire/message-stream.ts), so it must reach them.
   */
  takesSilently(tokens: Uint32Array, from: number, to: number): boolean {
    let state = this.currentState
    let header = this.headerTokens.length
    for (let i = from; i < to; i++) {
      const token = tokens[i]
      if (state === STATE_EXPECT_START && token === START && this.strayTokens === 0) {
        state = STATE_HEADER
        header = 0
      } else if (
        state === STATE_HEADER &&
        token !== MESSAGE &&
        token !== END_OF_TEXT &&
        header < this.maxHeaderTokens &&
        (this.strict || (token !== START && terminatorOf(token) === TERMINATOR_NONE))
      ) {
        header++
      } else return false
    }
    return !this.finished
  }

  /**
   * `BackendStream.takeText`: the text of `tokens` if each is an ordinary token that only adds its own text
   * to the open message (as `appendContent` does with no part of a character pending), taken; else null
   * with nothing taken. The output of the last call is left as it was.
   */
  takeText(tokens: Uint32Array): string | null {
    if (this.currentState !== STATE_CONTENT || this.finished || !this.utf8.isEmpty()) return null
    if (tokens.length === 1) {
      const token = tokens[0]
      const text = token < FIRST_SPECIAL ? this.vocabulary.text(token) : null
      if (text !== null) this.offset++
      return text
    }
    let text = ''
    for (let i = 0; i < tokens.length; i++) {
      const token = tokens[i]
      const piece = token < FIRST_SPECIAL ? this.vocabulary.text(token) : null
      if (piece === null) return null
      text += piece
    }
    this.offset += tokens.length
    return text
  }

  push(tokens: Uint32Array): PushError | null {
    this.output.clear()
    if (this.finished) return { kind: 'finished' }
    for (let index = 0; index < tokens.length; index++) {
      if (!this.vocabulary.contains(tokens[index])) return { kind: 'invalid-token', index, id: tokens[index] }
    }
    try {
      for (let index = 0; index < tokens.length; index++) this.process(tokens[index], this.offset++)
    } catch (failure) {
      if (failure instanceof StrictFailure) return { kind: 'parse', error: failure.error }
      throw failure
    }
    return null
  }

  /** Ends the stream; a second call does nothing. */
  finish(): PushError | null {
    this.output.clear()
    if (this.finished) return null
    this.finished = true
    switch (this.currentState) {
      case STATE_CONTENT:
        this.closeMessage(TERMINATOR_NONE)
        break
      case STATE_HEADER:
        if (this.strict) {
          return {
            kind: 'parse',
            error: {
              code: 'unexpected-eos-in-header',
              message: 'Unexpected EOS while waiting for message header to complete',
              tokenOffset: this.offset,
              header: this.headerText(),
            },
          }
        }
        if (this.headerTokens.length > 0) {
          this.recoverUnfinishedHeader(TERMINATOR_NONE, this.offset, 'unterminated-header', 'the stream ended inside a message header')
        } else if (this.headerStart !== null) {
          this.diagnose('unterminated-header', 'the stream ended inside a message header', this.offset, '')
        }
        this.currentState = STATE_EXPECT_START
        break
      default:
        this.flushStray()
    }
    return null
  }

  private process(token: number, offset: number): void {
    switch (this.currentState) {
      case STATE_EXPECT_START:
        this.expectStart(token, offset)
        break
      case STATE_HEADER:
        this.header(token, offset)
        break
      default: {
        const terminator = terminatorOf(token)
        if (terminator !== TERMINATOR_NONE) this.closeMessage(terminator)
        else if (!this.strict && (token === START || token === CHANNEL)) {
          // Lenient: the model began a new message without closing this one (no token id can stand for
          // these as text, so this is never content the model meant).
          this.diagnose('missing-end', 'a new message began before <|end|>; the open message was closed', offset, null)
          this.closeMessage(TERMINATOR_NONE)
          this.expectStart(token, offset)
        } else this.appendContent(token)
      }
    }
  }

  private expectStart(token: number, offset: number): void {
    if (token === START) {
      this.flushStray()
      this.beginHeader(offset)
    } else if (this.strict) {
      throw new StrictFailure({
        code: 'unexpected-token',
        message: `Unexpected token ${token} while expecting start token ${START}`,
        tokenOffset: offset,
        header: null,
      })
    } else if (token === CHANNEL) {
      // The model skipped `<|start|>assistant` between messages (vLLM PR #35901).
      this.flushStray()
      this.diagnose('missing-start', '<|channel|> without <|start|>: started an assistant message', offset, null)
      this.beginHeader(null)
      this.nextRole = 'assistant'
      this.headerTokens.push(token)
    } else {
      this.addStray(token, offset)
      if (token >= FIRST_SPECIAL) this.strandable = false
      else if (this.strandable && !this.vocabulary.tokenBytes(token).every(isAsciiWhiteSpace)) this.strand()
    }
  }

  /**
   * Lenient: text after a message's `<|end|>` without a header (SGLang #31019: `…analysis…<|end|>{"country":…}`)
   * is the final answer the model wrote without `<|start|>assistant<|channel|>final<|message|>`: the text held
   * since the `<|end|>` opens an assistant message on the final channel, its leading white space left out (it
   * stays in the diagnostic's text), and what follows is its content.
   */
  private strand(): void {
    const bytes = Uint8Array.from(this.strayBytes)
    let from = 0
    while (isAsciiWhiteSpace(bytes[from])) from++
    this.diagnose(
      'stranded-text',
      'text after <|end|> without a message header: read as the final answer',
      this.strayStart,
      decodeLossy(bytes),
    )
    this.strayBytes = []
    this.strayTokens = 0
    this.strandable = false
    const message = this.open({ role: 'assistant', name: null, channel: 'final', recipient: null, contentType: null })
    this.utf8.push(bytes, from, bytes.length, this.output)
    this.output.markText(message)
  }

  private header(token: number, offset: number): void {
    if (token === MESSAGE) {
      this.openFromHeader(offset)
      return
    }
    if (!this.strict) {
      const terminator = terminatorOf(token)
      if (terminator !== TERMINATOR_NONE) {
        this.recoverUnfinishedHeader(terminator, offset, 'header-without-message', 'a stop token ended a message header')
        return
      }
      if (token === START) {
        this.restartHeader(offset)
        return
      }
    }
    if (this.headerTokens.length < this.maxHeaderTokens) {
      // In strict mode stop tokens land here too, as in the reference.
      this.headerTokens.push(token)
      return
    }
    const message = `message header exceeded ${this.maxHeaderTokens} tokens without <|message|>`
    if (this.strict) {
      const header = this.headerText()
      this.resetHeader()
      throw new StrictFailure({ code: 'header-too-long', message, tokenOffset: offset, header })
    }
    // Bounded memory: the header so far becomes the start of a message and the stream continues as content.
    this.diagnose('header-too-long', message, offset, this.headerText())
    this.openRecoveredHeader(true)
    this.appendContent(token)
  }

  /**
   * Lenient: `<|start|>` inside a header. Right after `<|start|>` (or at the parser start) it is a doubled
   * `<|start|>` and ignored; later, the header so far never got `<|message|>`: if it holds text beyond a
   * role word, that text becomes a message (as for a stop token), and a new header begins.
   */
  private restartHeader(offset: number): void {
    if (this.headerTokens.length === 0) {
      this.diagnose('repeated-start', '<|start|> repeated; ignored', offset, '')
      return
    }
    const text = this.headerText()
    if (recoverHeader(text, this.nextRole, false).content === '') {
      this.diagnose('repeated-start', '<|start|> inside a header without text; the header was dropped', offset, text)
    } else {
      this.recoverUnfinishedHeader(TERMINATOR_NONE, offset, 'header-without-message', '<|start|> ended a message header')
    }
    this.nextRole = null
    this.beginHeader(offset)
  }

  private beginHeader(start: number | null): void {
    this.strandable = false
    this.currentState = STATE_HEADER
    this.headerTokens.length = 0
    this.headerStart = start
  }

  /** As the reference on a failed header: tokens dropped, the role given for the first message kept. */
  private resetHeader(): void {
    this.headerTokens.length = 0
    this.currentState = STATE_EXPECT_START
  }

  private headerBytes(): Uint8Array {
    return this.vocabulary.concatBytes(this.headerTokens)
  }

  /**
   * The header so far as text, invalid bytes as U+FFFD. When every token is valid UTF-8 on its own (the
   * usual case) their texts are joined: nothing to copy or decode.
   */
  private headerText(): string {
    let text = ''
    for (const token of this.headerTokens) {
      const piece = this.vocabulary.text(token)
      if (piece === null) return decodeLossy(this.headerBytes())
      text += piece
    }
    return text
  }

  /** The header being read, decoded and parsed: from the cache of recent headers when it holds it. */
  private readHeader(): ReadHeader {
    const tokens = this.headerTokens
    if (tokens.length > CACHED_HEADER_TOKENS) return this.parseHeaderTokens()
    const key = `${this.nextRole ?? '\u0000'}\u0000${this.strict ? 1 : 0}\u0000${this.toolNamesKey}\u0000${tokens.join(',')}`
    let read = headerCache.get(key)
    if (read === undefined) {
      read = this.parseHeaderTokens()
      if (headerCache.size >= CACHED_HEADERS) headerCache.clear()
      headerCache.set(key, read)
    }
    return read
  }

  private parseHeaderTokens(): ReadHeader {
    const text = this.headerText()
    // Lossy decoding brings U+FFFD only for invalid bytes: a text without one came from valid bytes.
    const invalidUtf8 = text.includes(REPLACEMENT) && !isValidUtf8(this.headerBytes())
    const parsed = parseHeader(text, this.nextRole, { repair: !this.strict, toolNames: this.toolNames })
    return Object.freeze({ text, invalidUtf8, header: Object.freeze(parsed.header), problems: Object.freeze(parsed.problems) })
  }

  private openFromHeader(offset: number): void {
    const { text, invalidUtf8, header, problems } = this.readHeader()
    if (invalidUtf8) {
      if (this.strict) {
        this.resetHeader()
        throw new StrictFailure({ code: 'invalid-header-utf8', message: 'could not decode header', tokenOffset: offset, header: text })
      }
      this.diagnose('invalid-header-utf8', 'could not decode header: invalid UTF-8 replaced', offset, text)
    }
    if (this.strict && problems.length > 0) {
      const problem = problems[0]
      this.resetHeader()
      throw new StrictFailure({ code: problemCode(problem), message: problemMessage(problem), tokenOffset: offset, header: text })
    }
    for (const problem of problems) this.diagnose(problemCode(problem), problemMessage(problem), offset, text)
    this.nextRole = null
    this.headerTokens.length = 0
    this.open(header)
  }

  /** Lenient: a header ended without `<|message|>` becomes a message whose content is the header's text. */
  private recoverUnfinishedHeader(terminator: number, offset: number, code: string, what: string): void {
    if (this.headerTokens.length === 0) {
      this.diagnose(code, `${what} before any header text`, offset, '')
      this.resetHeader()
      this.nextRole = null
      return
    }
    const text = this.headerText()
    const recovered = this.recoveredHeader(false)
    if (terminator === TERMINATOR_END && isHeaderless(recovered)) {
      // gpt-oss ends only reasoning and preambles with `<|end|>`: text that never got its header and is ended
      // so is the reasoning it writes first (openai/harmony #80: refusals that skip `<|channel|>analysis<|message|>`).
      // The whole header is held until then (at most maxHeaderTokens), so this reads alike at every batch split.
      this.diagnose('headerless-reasoning', 'text without a message header, ended by <|end|>: read as reasoning', offset, text)
      recovered.header.channel = 'analysis'
    } else this.diagnose(code, `${what} before <|message|>; the header text was kept as content`, offset, text)
    this.openRecovered(recovered)
    this.closeMessage(terminator)
  }

  /** Opens a message from the header so far; a character split at its end stays pending for the content. */
  private openRecoveredHeader(continues: boolean): void {
    this.openRecovered(this.recoveredHeader(continues))
  }

  private recoveredHeader(continues: boolean): RecoveredHeader {
    const bytes = this.headerBytes()
    const decoded = { text: '' }
    this.utf8.push(bytes, 0, bytes.length, decoded)
    return recoverHeader(decoded.text, this.nextRole, continues)
  }

  private openRecovered(recovered: RecoveredHeader): void {
    this.nextRole = null
    this.headerTokens.length = 0
    const message = this.open(recovered.header)
    this.output.text += recovered.content
    this.output.markText(message)
  }

  private open(header: Header): number {
    const message = this.nextMessageIndex++
    this.openMessage = message
    this.currentState = STATE_CONTENT
    this.output.open(message, header)
    return message
  }

  private appendContent(token: number): void {
    const message = this.openMessage!
    const text = this.utf8.isEmpty() ? this.vocabulary.text(token) : null
    if (text !== null) this.output.text += text
    else this.vocabulary.assemble(token, this.utf8, this.output)
    this.output.markText(message)
  }

  private closeMessage(terminator: number): void {
    const message = this.openMessage!
    this.openMessage = null
    this.utf8.flush(this.output)
    this.output.markText(message)
    this.output.close(message, terminator)
    this.currentState = STATE_EXPECT_START
    this.strandable = !this.strict && terminator === TERMINATOR_END
  }

  private diagnose(code: string, message: string, tokenOffset: number, text: string | null): void {
    this.output.diagnostics.push({ code, message, tokenOffset, text })
  }

  private addStray(token: number, offset: number): void {
    if (this.strayTokens === 0) this.strayStart = offset
    this.strayTokens++
    for (const byte of this.vocabulary.tokenBytes(token)) this.strayBytes.push(byte)
    if (this.strayBytes.length < MAX_STRAY_BYTES) return
    // A character cut by the bound goes whole into the next diagnostic, counted with the token that crossed it:
    // no diagnostic's text ends or begins inside a character, which would lose it.
    const end = completeEnd(this.strayBytes)
    if (end === this.strayBytes.length || this.strayTokens === 1) {
      this.flushStray()
      return
    }
    const tail = this.strayBytes.slice(end)
    this.strayBytes.length = end
    this.strayTokens--
    this.flushStray()
    this.strayBytes = tail
    this.strayTokens = 1
    this.strayStart = offset
  }

  private flushStray(): void {
    if (this.strayTokens === 0) return
    const text = decodeLossy(Uint8Array.from(this.strayBytes))
    const message = `ignored ${this.strayTokens} token(s) between messages, where <|start|> was expected`
    this.strayBytes = []
    this.strayTokens = 0
    this.diagnose('stray-tokens', message, this.strayStart, text)
  }
}

/** Where `bytes` end before a character they hold only the start of (`bytes.length` when none is cut). */
function completeEnd(bytes: readonly number[]): number {
  const length = bytes.length
  for (let back = 1; back <= Math.min(3, length); back++) {
    const byte = bytes[length - back]!
    if ((byte & 0xc0) === 0x80) continue
    const needs = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1
    return needs > back ? length - back : length
  }
  return length
}

/** An assistant's header read back with no channel and some text: words the model wrote where a header belongs. */
function isHeaderless(recovered: RecoveredHeader): boolean {
  return recovered.header.role === 'assistant' && recovered.header.channel === null && recovered.content !== ''
}

/** ASCII white space as the header parser splits on it (space, tab, line feed, form feed, carriage return). */
function isAsciiWhiteSpace(byte: number | undefined): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0c || byte === 0x0d
}

function isValidUtf8(bytes: Uint8Array): boolean {
  return validUpTo(bytes, 0, bytes.length) === bytes.length
}
