/**
 * The native implementation behind one `HarmonyStreamParser`: a stream in this thread's Rust pool, driven
 * by the `parser*` functions of crate/node. Tokens go in and results come out through two arrays bound
 * once per thread (and again when a batch needs more room), so a push passes no argument at all: the
 * stream id and the count go in the input's first slots.
 */
import {
  COMPACT_BAD_INDEX,
  COMPACT_FIRST_RECORD,
  COMPACT_RECORD_SLOTS,
  COMPACT_RECORDS,
  COMPACT_STATE,
  COMPACT_STATUS,
  COMPACT_STATUS_INVALID_TOKEN,
  compactCapacity,
  NAME_NOT_INTERNED,
  RECORD_CLOSE,
  RECORD_OPEN,
  RECORD_TEXT,
} from './compact'
import { FRAMES_ENDS, FRAMES_NO_ROOM, FRAMES_STATUS, type FrameTemplate, type LaneProgress } from './frames'
import { NameMirror } from './name-mirror'
import {
  type BackendStream,
  type LaneStepper,
  type PoolBackend,
  type RawDiagnostic,
  type RawHeader,
  type RawParseError,
  type ResultVisitor,
  STATE_EXPECT_START,
  STATE_HEADER,
  TERMINATOR_NONE,
} from './protocol'
import { END_OF_TEXT, FIRST_SPECIAL, LAST_TOKEN, MESSAGE, START, terminatorOf } from './tokens'

export interface NativeBinding {
  loadVocabulary(path: string): void
  NativePool: new () => PoolBackend
  parserBind(input: Uint32Array, output: Uint32Array): void
  parserOpen(role: string | null, strict: boolean, maxHeaderTokens: number, toolNames: string[]): number
  parserClose(id: number): boolean
  /** Parses for the stream and tokens written in the bound input (`INPUT_*` slots). */
  parserPush(): string
  /** `parserFinish` of the stream in the bound input, which it closes too when nothing is left to take (REPLY_RELEASED). */
  parserEnd(): string
  /** `parserOpen` with no tool names and the role (`OPEN_ROLE_*`), bound and strictness in the bound input. */
  parserOpenBound(): number
  parserFinish(id: number): string
  parserTakeDiagnostics(id: number): RawDiagnostic[]
  parserTakeHeaders(id: number): RawHeader[]
  parserTakeError(id: number): RawParseError | null
  parserState(id: number): number
  parserNames(from: number): string[]
  parserDebugPanic(id: number): number
  encodeOrdinary(text: string): Uint32Array
  /**
   * Keeps a frame template for `parserSetLaneBound`: its literals joined by U+0000; its slot (below
   * MAX_TEMPLATES), the count and kinds of its slots in the bound input.
   */
  parserDefineTemplate(literals: string): void
  /** Sets a lane: the stream, template slot (or TEMPLATE_NONE) and counter in the bound input. */
  parserSetLaneBound(): boolean
  /** What a lane did: its text; tokens, counter and whether it has a lane in the bound input. */
  parserTakeLaneBound(): string
  parserClaim(id: number, owner: number): boolean
  /** Copies the step's frames into the chunk bound; where they start, or FRAMES_NO_ROOM. */
  parserStepFrames(owner: number, streams: Uint32Array, offsets: Uint32Array, tokens: Uint32Array, ends: Uint32Array): number
  parserBindFrames(chunk: Uint8Array): void
}

/**
 * Slots of the bound input: the stream id, the count of tokens, the ordinary tokens taken as plain content
 * since the stream's last push (`takeText`), the reply (REPLY_* bits, written by Rust), then the tokens.
 * Mirror INPUT_* in crate/node/src/lib.rs. @mirrored
 */
export const INPUT_STREAM = 0
/** Compared with its Rust twin by __test__/parser/constants.test.mts. @mirrored */
export const INPUT_COUNT = 1
/** Compared with its Rust twin by __test__/parser/constants.test.mts. @mirrored */
export const INPUT_SKIPPED = 2
/** Compared with its Rust twin by __test__/parser/constants.test.mts. @mirrored */
export const INPUT_REPLY = 3
/** Compared with its Rust twin by __test__/parser/constants.test.mts. @mirrored */
export const INPUT_ROOM = 4
/** Compared with its Rust twin by __test__/parser/constants.test.mts. @mirrored */
export const INPUT_TOKENS = 5
/** Reply bit: after the push the stream takes plain content (`takeText` may serve it). Mirrors REPLY_PLAIN in crate/node/src/lib.rs. @mirrored */
export const REPLY_PLAIN = 1
/**
 * Reply bit: the push was ordinary tokens taken from plain content and back to it, so its text is theirs in any
 * message (a token's own text, or a character split across them). Mirrors REPLY_OWN_TEXT in crate/node/src/lib.rs. @mirrored
 */
export const REPLY_OWN_TEXT = 2
/** Reply bit: the same, except that they only began a character (no text yet). Mirrors REPLY_BEGINS_CHARACTER in crate/node/src/lib.rs. @mirrored */
export const REPLY_BEGINS_CHARACTER = 4
/** Reply bit: a `<|start|>` would open a header silently now. Mirrors REPLY_OPENS in crate/node/src/lib.rs. @mirrored */
export const REPLY_OPENS = 8

/** Reply bit of `parserEnd`: the stream was closed too. Mirrors REPLY_RELEASED in crate/node/src/lib.rs. @mirrored */
export const REPLY_RELEASED = 16

/** `parserOpenBound`'s role codes (INPUT_STREAM): none, as `role: null`. Mirrors OPEN_ROLE_NONE in crate/node/src/lib.rs. @mirrored */
export const OPEN_ROLE_NONE = 0
/** `parserOpenBound`'s role code for `assistant`. Mirrors OPEN_ROLE_ASSISTANT in crate/node/src/lib.rs. @mirrored */
export const OPEN_ROLE_ASSISTANT = 1

/** A token the parser takes silently in a header with room, in both modes (as `silent_room` in stream_parser.rs). */
function isHeaderToken(token: number): boolean {
  return token <= LAST_TOKEN && token !== MESSAGE && token !== END_OF_TEXT && token !== START && terminatorOf(token) === TERMINATOR_NONE
}

/**
 * `takeText` serves at most this many tokens: at 8 and more a crossing into Rust costs no more than looking
 * up and joining the texts here (docs/PERFORMANCE.md, "Native at one token per step"), and Rust has the parse.
 */
const PLAIN_BATCH = 4

/**
 * The chunks lane steps copy their frames into: frames of many steps share one, each a view of its part,
 * so a socket still writing one keeps the chunk alive (a quarter of a MiB, the frames of ~1,300 text
 * deltas), and a step whose frames do not fit starts the next.
 */
const FRAMES_CHUNK = 256 * 1024

/** Frame templates Rust keeps for this thread's lanes, by slot. Mirrors MAX_TEMPLATES in crate/node/src/lib.rs. @mirrored */
export const MAX_TEMPLATES = 4096
/** `parserSetLaneBound`'s slot for no template. Mirrors TEMPLATE_NONE in crate/node/src/lib.rs. @mirrored */
export const TEMPLATE_NONE = 0xffff_ffff

/** Where a template says which slot of this thread's it was defined in (`Channel.templateSlot`). */
const TEMPLATE_SLOT = Symbol('harmony-stream.native-template-slot')
type SlottedTemplate = FrameTemplate & { [TEMPLATE_SLOT]?: number }

/** Parsers `Channel.track` keeps before it registers them at once. */
const PENDING_PARSERS = 256

/** Entries of `Channel.pieces` at most. */
const MAX_PIECES = 4096

/**
 * What ordinary tokens taken from plain content give when they leave a character pending (REPLY_BEGINS_CHARACTER)
 * or complete one begun by the earlier of them (REPLY_OWN_TEXT): `text` (whole characters only) and whether the
 * stream takes plain content again after them (`complete`).
 */
interface Piece {
  readonly text: string
  readonly complete: boolean
}

/** What all native parsers of this thread share: the binding, the bound arrays and the names. */
class Channel {
  input = new Uint32Array(INPUT_TOKENS + 64)
  out = new Uint32Array(compactCapacity(64))
  readonly names: NameMirror
  /**
   * The text of each ordinary token that Rust reported as its own (REPLY_OWN_TEXT), by id: what `takeText`
   * serves without a crossing. Filled as tokens are seen, at most one string per token of the vocabulary
   * (preallocated holey, so that it never becomes a slow dictionary).
   */
  readonly texts: (string | undefined)[] = new Array(FIRST_SPECIAL)
  /**
   * The same for characters split across tokens, by the ids from the first piece on (taken from plain content,
   * joined with ','): a token that leaves a character pending (with the text of the whole characters before
   * it, often none), and the pieces up to each later one. Bounded: emptied when full.
   */
  readonly pieces = new Map<string, Piece>()
  /** Releases a parser's stream in the Rust pool when the parser is collected. */
  readonly streams: FinalizationRegistry<number>
  /**
   * Parsers not yet in `streams`: registering one and taking it out again cost about a fifth of a native
   * parser's fixed cost, and most parsers made in a stretch of synchronous code are finished (released) before
   * it ends. They are registered at the next microtask, unless closed by then, or here once there are
   * PENDING_PARSERS of them; until then this list keeps them alive.
   */
  private pending: NativeStream[] = []
  private flushQueued = false

  constructor(readonly binding: NativeBinding) {
    binding.parserBind(this.input, this.out)
    this.names = new NameMirror((from) => binding.parserNames(from))
    this.streams = new FinalizationRegistry((id) => binding.parserClose(id))
  }

  /**
   * The frame templates Rust keeps (`parserDefineTemplate`), by slot, and each template's slot: an adapter's
   * templates cross once. The slots are reused in turn; a template whose slot went to another is defined again.
   */
  private readonly templates: (FrameTemplate | undefined)[] = []
  private nextTemplateSlot = 0

  /** The slot under which Rust keeps `template`. */
  templateSlot(template: FrameTemplate): number {
    const known = (template as SlottedTemplate)[TEMPLATE_SLOT]
    if (known !== undefined && this.templates[known] === template) return known
    const slot = this.nextTemplateSlot
    this.nextTemplateSlot = (slot + 1) % MAX_TEMPLATES
    const { literals, slots } = template
    if (INPUT_TOKENS + slots.length > this.input.length) this.grow(slots.length)
    const input = this.input
    input[INPUT_STREAM] = slot
    input[INPUT_COUNT] = slots.length
    for (let i = 0; i < slots.length; i++) input[INPUT_TOKENS + i] = slots[i]
    // One string: the literals are JSON and SSE text, which never holds U+0000 unescaped.
    this.binding.parserDefineTemplate(literals.join('\u0000'))
    this.templates[slot] = template
    // On the template itself: a WeakMap's set cost 0.6 µs, half of defining it in Rust.
    ;(template as SlottedTemplate)[TEMPLATE_SLOT] = slot
    return slot
  }

  /** The chunk lane steps copy frames into (`parserBindFrames`), bound when first needed. */
  private chunk: Uint8Array | null = null

  /** The frames of the lane step just made (`parserStepFrames` answered `at`, and wrote their ends in `ends`). */
  framesOfStep(at: number, ends: Uint32Array, streams: number): Uint8Array {
    const length = streams === 0 || ends[FRAMES_STATUS] !== 0 ? 0 : ends[FRAMES_ENDS + streams - 1]
    if (at === FRAMES_NO_ROOM) {
      // The step's frames wait in Rust for a chunk with room: bound, it gets them at its start.
      this.bindChunk(length)
      at = 0
    }
    return this.chunk!.subarray(at, at + length)
  }

  /** Binds a chunk before the first lane step, and when one is full. */
  bindChunk(room = 0): void {
    // Not zeroed (zeroing measured 10% of a step of 256 streams): only the parts Rust wrote are ever shown.
    const chunk = Buffer.allocUnsafeSlow(Math.max(FRAMES_CHUNK, room))
    this.binding.parserBindFrames(chunk)
    this.chunk = chunk
  }

  get hasChunk(): boolean {
    return this.chunk !== null
  }

  /** Registers `stream` in `streams` soon (`pending`). */
  track(stream: NativeStream): void {
    this.pending.push(stream)
    if (this.pending.length >= PENDING_PARSERS) this.flush()
    else if (!this.flushQueued) {
      this.flushQueued = true
      queueMicrotask(() => {
        this.flushQueued = false
        this.flush()
      })
    }
  }

  private flush(): void {
    const pending = this.pending
    this.pending = []
    for (const stream of pending) stream.registerUnlessClosed(this.streams)
  }

  /** Rebinds arrays with room for `count` tokens. */
  grow(count: number): void {
    // Both arrays first, then bind, then keep them: a failed allocation must leave the old pair bound.
    const size = Math.max(count, this.input.length * 2)
    const input = new Uint32Array(INPUT_TOKENS + size)
    const out = new Uint32Array(compactCapacity(size))
    this.binding.parserBind(input, out)
    this.input = input
    this.out = out
  }
}

/**
 * One channel per thread, whatever the number of copies of this module (a cleared require cache, test
 * runners that reset modules): the Rust side binds one pair of arrays per thread, so a second channel
 * would silently unbind the first.
 */
const CHANNEL = Symbol.for('harmony-stream.native-channel')
const holder = globalThis as { [CHANNEL]?: Channel }

const EMPTY = new Uint32Array(0)

export class NativeStream implements BackendStream {
  private readonly channel: Channel
  /** The stream's id in this thread's Rust pool. */
  readonly id: number

  private closed = false
  /** Closed by `parserEnd` (REPLY_RELEASED). */
  private released = false
  /** In `Channel.streams` (`Channel.track`). */
  private registered = false
  /**
   * The parser's state after everything given so far (STATE_*), as Rust wrote it after each call and as the
   * tokens taken here leave it, so that reading it costs no crossing. Not kept once a lane stepper claimed
   * the stream (`laned`): its steps change the state without a call here.
   */
  private lastState: number
  private laned = false
  /**
   * Rust's reply to the last push: the stream takes plain content, so `takeText` may take ordinary tokens
   * whose text is known here; `skipped` counts them until the next crossing tells Rust (INPUT_SKIPPED).
   * Never again once a lane stepper claimed the stream (`giveToLane`): its steps do not pass through here.
   */
  private plain = false
  private skipped = 0
  /**
   * Tokens that produce nothing yet, kept back for the next crossing, which sends them first (`takeSilently`, and
   * `takeText` for the first piece of a split character); and Rust's last word on what it would take
   * silently: whether a `<|start|>` opens a header (REPLY_OPENS), and the room left in the header being read.
   */
  private readonly held: number[] = []
  /**
   * When `held` are the pieces of a character begun from plain content (taken by `takeText`), their ids joined
   * with ',' (the key of `Channel.pieces`), and how much of their text (UTF-16 units) was returned already;
   * '' and 0 otherwise. Rust, given them later, writes that text again: `push` cuts it off.
   */
  private pieces = ''
  private returned = 0
  private opens = false
  private room = 0
  private readonly maxHeaderTokens: number

  constructor(binding: NativeBinding, role: string | null, strict: boolean, maxHeaderTokens: number, toolNames: string[]) {
    const channel = (holder[CHANNEL] ??= new Channel(binding))
    this.channel = channel
    this.maxHeaderTokens = maxHeaderTokens
    // As a new parser starts (stream_parser.rs): reading the given role's header, or expecting `<|start|>`.
    this.opens = role === null
    this.room = role === null ? 0 : maxHeaderTokens
    this.lastState = role === null ? STATE_EXPECT_START : STATE_HEADER
    if (toolNames.length === 0 && (role === null || role === 'assistant')) {
      // Most parsers: the options go in the bound input, as a push's do (arguments cost more than the open).
      const input = channel.input
      input[INPUT_STREAM] = role === null ? OPEN_ROLE_NONE : OPEN_ROLE_ASSISTANT
      input[INPUT_COUNT] = maxHeaderTokens
      input[INPUT_SKIPPED] = strict ? 1 : 0
      this.id = binding.parserOpenBound()
    } else this.id = binding.parserOpen(role, strict, maxHeaderTokens, toolNames)
    channel.track(this)
  }

  /** For `Channel.track`: puts a live stream in the registry that releases it when the parser is collected. */
  registerUnlessClosed(streams: FinalizationRegistry<number>): void {
    if (this.closed || this.released) return
    streams.register(this, this.id, this)
    this.registered = true
  }

  /** Releases the Rust stream now rather than at garbage collection. */
  close(): void {
    if (this.closed) return
    this.closed = true
    if (this.released) return
    if (this.registered) this.channel.streams.unregister(this)
    this.channel.binding.parserClose(this.id)
  }

  get out(): Uint32Array {
    return this.channel.out
  }

  push(tokens: Uint32Array): string {
    const channel = this.channel
    const held = this.held.length
    const count = held + tokens.length
    if (INPUT_TOKENS + count > channel.input.length) channel.grow(count)
    const input = channel.input
    input[INPUT_STREAM] = this.id
    input[INPUT_COUNT] = count
    input[INPUT_SKIPPED] = this.skipped
    this.skipped = 0
    if (held > 0) for (let i = 0; i < held; i++) input[INPUT_TOKENS + i] = this.held[i]
    // A loop beats TypedArray#set for the short batches that dominate streaming.
    if (tokens.length <= 16) for (let i = 0; i < tokens.length; i++) input[INPUT_TOKENS + held + i] = tokens[i]
    else input.set(tokens, INPUT_TOKENS + held)
    const text = channel.binding.parserPush()
    const out = channel.out
    // Nothing was consumed, the held tokens neither: they stay held, and everything here stays as it was.
    // Held ids were checked in range: the bad id is one of the caller's, at its index in `tokens`.
    if (out[COMPACT_STATUS] === COMPACT_STATUS_INVALID_TOKEN) out[COMPACT_BAD_INDEX] -= held
    else if (held > 0) this.held.length = 0
    else if (tokens.length !== 1) {
      // The common call of bigger batches: nothing held, and nothing to learn.
      this.takeReply(input, out)
      return text
    }
    return this.afterHeldOrOne(text, tokens, held)
  }

  /** Rust's reply to a push: what `takeText` and `takeSilently` may take now, and the state. */
  private takeReply(input: Uint32Array, out: Uint32Array): void {
    const reply = input[INPUT_REPLY]
    this.lastState = out[COMPACT_STATE]
    this.plain = (reply & REPLY_PLAIN) !== 0
    this.opens = (reply & REPLY_OPENS) !== 0
    this.room = input[INPUT_ROOM]
  }

  /**
   * The rest of a push that sent held tokens or a single token: the reply, what Rust said of the tokens' text
   * (kept for `takeText`), and the text of held pieces returned already cut off.
   */
  private afterHeldOrOne(text: string, tokens: Uint32Array, held: number): string {
    const channel = this.channel
    const input = channel.input
    const out = channel.out
    if (out[COMPACT_STATUS] === COMPACT_STATUS_INVALID_TOKEN) return text
    const pieces = this.pieces
    const returned = this.returned
    this.pieces = ''
    this.returned = 0
    this.takeReply(input, out)
    const reply = input[INPUT_REPLY]
    if ((reply & (REPLY_OWN_TEXT | REPLY_BEGINS_CHARACTER)) !== 0 && tokens.length === 1) {
      const complete = (reply & REPLY_OWN_TEXT) !== 0
      if (held === 0 && complete) channel.texts[tokens[0]] = text
      else if (held === 0 || pieces !== '') {
        // A token leaving a character pending, or the held pieces and the next: the keys `takeText` looks up.
        const known = channel.pieces
        if (known.size >= MAX_PIECES) known.clear()
        known.set(held === 0 ? String(tokens[0]) : `${pieces},${tokens[0]}`, { text, complete })
      }
    }
    return returned > 0 ? this.cutReturned(text, returned) : text
  }

  /**
   * The call's results without the first `returned` UTF-16 units of its text, which `takeText` returned
   * already for the held pieces that began it: the text of the first TEXT record, the open message's.
   */
  private cutReturned(text: string, returned: number): string {
    const out = this.channel.out
    const end = COMPACT_FIRST_RECORD + COMPACT_RECORD_SLOTS * out[COMPACT_RECORDS]
    let to = COMPACT_FIRST_RECORD
    for (let at = COMPACT_FIRST_RECORD; at < end; at += COMPACT_RECORD_SLOTS) {
      if (out[at] === RECORD_TEXT) {
        // The first record's start is 0: the pieces' text is where it begins. A record left empty goes.
        out[at + 2] = Math.max(out[at + 2] - returned, 0)
        out[at + 3] -= returned
        if (out[at + 2] === out[at + 3]) continue
      }
      if (to !== at) out.copyWithin(to, at, at + COMPACT_RECORD_SLOTS)
      to += COMPACT_RECORD_SLOTS
    }
    out[COMPACT_RECORDS] = (to - COMPACT_FIRST_RECORD) / COMPACT_RECORD_SLOTS
    return text.slice(returned)
  }

  /**
   * Keeps back `tokens` if Rust would take them all silently (a `<|start|>` that opens a header, header
   * tokens while the header has room, as Rust last said): they produce nothing now, and go to Rust with
   * the next call that needs it, as one crossing instead of one per token. False, with nothing kept, otherwise.
   */
  takeSilently(tokens: Uint32Array): boolean {
    let opens = this.opens
    let room = this.room
    if (!opens && room === 0) return false
    for (let i = 0; i < tokens.length; i++) {
      const token = tokens[i]
      if (opens && token === START) {
        opens = false
        room = this.maxHeaderTokens
      } else if (!opens && room > 0 && isHeaderToken(token)) {
        room--
      } else return false
    }
    this.opens = opens
    this.room = room
    for (let i = 0; i < tokens.length; i++) this.held.push(tokens[i])
    // A `<|start|>` opens a header, and header tokens leave the parser in one.
    if (tokens.length > 0) this.lastState = STATE_HEADER
    return true
  }

  /**
   * At one token per call a crossing into Rust costs more than the parse of the token: a token that can
   * only add its own text to the open message is taken here, from the texts Rust gave for it before, and
   * counted in Rust at the next crossing. Rust keeps the offsets and everything else; it also says when
   * this may happen (REPLY_PLAIN), so nothing here needs to know the parser's rules.
   */
  takeText(tokens: Uint32Array): string | null {
    const count = tokens.length
    if (!this.plain) return this.pieces !== '' && count === 1 ? this.takePiece(tokens[0]) : null
    const texts = this.channel.texts
    if (count === 1) {
      const token = tokens[0]
      const text = texts[token]
      if (text === undefined) return this.takePiece(token)
      this.skipped++
      return text
    }
    if (count > PLAIN_BATCH) return null
    let text = ''
    for (let i = 0; i < count; i++) {
      const piece = texts[tokens[i]]
      if (piece === undefined || piece === '') return null
      text += piece
    }
    this.skipped += count
    return text
  }

  /**
   * A token that leaves a character pending, or the next piece of one whose earlier pieces are held, if Rust
   * gave what these tokens give before (`Channel.pieces`): the text of the whole characters not returned yet.
   * A character left pending is held (Rust gets its pieces with the next crossing, unless the pieces that
   * complete it are known here too); a completed one is counted with its pieces as taken, and Rust never sees
   * them. Null, with nothing taken, otherwise.
   */
  private takePiece(token: number): string | null {
    const key = this.pieces === '' ? String(token) : `${this.pieces},${token}`
    const piece = this.channel.pieces.get(key)
    if (piece === undefined) return null
    const text = this.returned === 0 ? piece.text : piece.text.slice(this.returned)
    if (piece.complete) {
      this.skipped += this.held.length + 1
      this.held.length = 0
      this.pieces = ''
      this.returned = 0
      this.plain = true
    } else {
      this.held.push(token)
      this.pieces = key
      this.returned = piece.text.length
      this.plain = false
    }
    return text
  }

  /** Tells Rust of the tokens taken or held here (a push of none): before any call that is not a push. */
  private settle(): void {
    if (this.skipped > 0 || this.held.length > 0) this.push(EMPTY)
  }

  /**
   * For a lane stepper's claim: what is held or counted here goes to Rust, and `takeText` and `takeSilently`
   * are off for good (Rust's replies keep them off for a claimed stream: its steps do not pass through here).
   */
  giveToLane(): void {
    this.settle()
    this.answerNothingHere()
    this.laned = true
  }

  /** `takeText` and `takeSilently` off until Rust's next reply says otherwise. */
  private answerNothingHere(): void {
    this.plain = false
    this.opens = false
    this.room = 0
  }

  finish(): string {
    this.settle()
    const text = this.channel.binding.parserFinish(this.id)
    this.lastState = this.channel.out[COMPACT_STATE]
    return text
  }

  read(tokens: Uint32Array | null, visitor: ResultVisitor): void {
    const text = tokens === null ? this.end() : this.push(tokens)
    this.visitRecords(text, visitor)
  }

  /**
   * The object API's finish, after which the parser is closed: when the call left nothing to take, Rust
   * closes the stream in the same crossing (REPLY_RELEASED), and `close` has nothing to do.
   */
  private end(): string {
    this.settle()
    const channel = this.channel
    channel.input[INPUT_STREAM] = this.id
    const text = channel.binding.parserEnd()
    this.lastState = channel.out[COMPACT_STATE]
    if ((channel.input[INPUT_REPLY] & REPLY_RELEASED) !== 0) {
      // Its id may name another stream from now on: the registry must never close it.
      this.released = true
      if (this.registered) channel.streams.unregister(this)
    }
    return text
  }

  /** Decodes the records of the last call for `visitor`. */
  private visitRecords(text: string, visitor: ResultVisitor): void {
    const out = this.channel.out
    let spilled: RawHeader[] | null = null
    let opened = 0
    const end = COMPACT_FIRST_RECORD + COMPACT_RECORD_SLOTS * out[COMPACT_RECORDS]
    for (let at = COMPACT_FIRST_RECORD; at < end; at += COMPACT_RECORD_SLOTS) {
      const kind = out[at]
      if (kind === RECORD_TEXT) {
        visitor.text(out[at + 1], text.slice(out[at + 2], out[at + 3]))
      } else if (kind === RECORD_OPEN) {
        let header = headerOf(this.channel.names, out, at)
        if (header === null) {
          spilled ??= this.takeHeaders()
          header = spilled[opened]
        }
        opened++
        visitor.open(out[at + 1], header)
        at += COMPACT_RECORD_SLOTS // the FIELDS record was read with it
      } else if (kind === RECORD_CLOSE) {
        visitor.close(out[at + 1], out[at + 2])
      }
    }
  }

  takeDiagnostics(): RawDiagnostic[] {
    return this.channel.binding.parserTakeDiagnostics(this.id)
  }

  takeHeaders(): RawHeader[] {
    return this.channel.binding.parserTakeHeaders(this.id)
  }

  takeError(): RawParseError | null {
    return this.channel.binding.parserTakeError(this.id)
  }

  get state(): number {
    if (!this.laned || this.released) return this.lastState
    this.settle()
    return this.channel.binding.parserState(this.id)
  }

  nameOf(id: number): string | null {
    return this.channel.names.nameOf(id)
  }

  debugPanic(): number {
    this.settle()
    // A broken stream takes nothing here: every later call must reach Rust, which refuses it.
    this.answerNothingHere()
    return this.channel.binding.parserDebugPanic(this.id)
  }

  setLane(template: FrameTemplate | null, counter: number): boolean {
    this.giveToLane()
    const channel = this.channel
    const slot = template === null ? TEMPLATE_NONE : channel.templateSlot(template)
    const input = channel.input
    input[INPUT_STREAM] = this.id
    input[INPUT_COUNT] = slot
    input[INPUT_SKIPPED] = counter
    return channel.binding.parserSetLaneBound()
  }

  takeLane(): LaneProgress | null {
    const channel = this.channel
    const input = channel.input
    input[INPUT_STREAM] = this.id
    const text = channel.binding.parserTakeLaneBound()
    return input[INPUT_REPLY] === 0 ? null : { text, tokens: input[INPUT_COUNT], counter: input[INPUT_SKIPPED] }
  }
}

/** Owner numbers of this thread's native lane steppers (a stepper serves only the streams it claimed). */
let lastOwner = 0

/** The native lanes: every native parser of this thread is a stream of one Rust pool, known by its id. */
export class NativeLaneStepper implements LaneStepper {
  private readonly owner = ++lastOwner

  constructor(private readonly binding: NativeBinding) {}

  add(stream: BackendStream): number {
    if (!(stream instanceof NativeStream)) throw new TypeError("this pool runs on the native implementation; the adapter's parser does not")
    const { id } = stream
    stream.giveToLane()
    if (!this.binding.parserClaim(id, this.owner)) throw new TypeError("this adapter's parser is closed or served by another pool")
    return id
  }

  /** Nothing to do: the stream is released with its parser, which no other stepper may claim meanwhile. */
  remove(): void {}

  step(ids: Uint32Array, offsets: Uint32Array, tokens: Uint32Array, ends: Uint32Array): Uint8Array {
    // Every stream added is a native parser, which made the thread's channel.
    const channel = holder[CHANNEL]!
    if (!channel.hasChunk) channel.bindChunk()
    return channel.framesOfStep(this.binding.parserStepFrames(this.owner, ids, offsets, tokens, ends), ends, ids.length)
  }
}

/** A header from interned field ids; null if a field was not interned (then it comes from takeHeaders). */
function headerOf(names: NameMirror, out: Uint32Array, at: number): RawHeader | null {
  const role = out[at + 2]
  const name = out[at + 3]
  const channel = out[at + 5]
  const recipient = out[at + 6]
  const contentType = out[at + 7]
  const X = NAME_NOT_INTERNED
  if (role === X || name === X || channel === X || recipient === X || contentType === X) return null
  return {
    role: names.nameOf(role)!,
    name: names.nameOf(name),
    channel: names.nameOf(channel),
    recipient: names.nameOf(recipient),
    contentType: names.nameOf(contentType),
  }
}
