/**
 * The backend's results as the object API's: a `ResultVisitor` that builds each batch's lists (opened headers,
 * segments, completed messages), the open message's content and every message completed so far, and the public
 * forms of a backend's headers and diagnostics. `parser.ts` drives it; `pool.ts` shares the public forms.
 */

import {
  type RawDiagnostic,
  type RawHeader,
  type ResultVisitor,
  TERMINATOR_CALL,
  TERMINATOR_END,
  TERMINATOR_RETURN,
} from '../backend/protocol'
import type {
  HarmonyBatch,
  HarmonyDiagnostic,
  HarmonyHeader,
  HarmonyMessage,
  HarmonyOpened,
  HarmonySegment,
  Terminator,
} from '../base/types'

/** A message's terminator by the backend's code. */
const TERMINATORS: Terminator[] = []
TERMINATORS[TERMINATOR_END] = 'end'
TERMINATORS[TERMINATOR_RETURN] = 'return'
TERMINATORS[TERMINATOR_CALL] = 'call'

/** A batch with nothing in it (fresh lists: callers may keep them). */
export function emptyBatch(): HarmonyBatch {
  return { opened: [], segments: [], completed: [], diagnostics: [] }
}

export interface OpenMessage {
  index: number
  header: RawHeader
  /**
   * The content so far, joined when the message closes. Appending to a string on every call would make a
   * cons string per call, all alive until the message ends, so the young-generation collector copies each
   * of them twice; the array only points to the pieces (often the vocabulary's own strings).
   */
  pieces: string[]
}

/**
 * The pieces as one string. `+=` rather than `Array#join`: on V8 join costs about three times as much per
 * short piece, and the result is the same string (flattened when first read as a whole).
 */
function joinPieces(pieces: string[]): string {
  let text = ''
  for (let i = 0; i < pieces.length; i++) text += pieces[i]
  return text
}

/** The public form of a header: absent fields left out, fixed key order. */
export function publicHeader(header: RawHeader): HarmonyHeader {
  const out: HarmonyHeader = { role: header.role }
  if (header.name != null) out.name = header.name
  if (header.channel != null) out.channel = header.channel
  if (header.recipient != null) out.recipient = header.recipient
  if (header.contentType != null) out.contentType = header.contentType
  return out
}

function openedOf(messageIndex: number, header: RawHeader): HarmonyOpened {
  const opened = publicHeader(header) as HarmonyOpened
  opened.messageIndex = messageIndex
  return opened
}

function messageOf(open: OpenMessage, terminator: number): HarmonyMessage {
  // Absent fields are left out, as in the reference's JSON; the key order is fixed. Built field by field:
  // object spread is several times slower in V8, and this runs once per message.
  const message = publicHeader(open.header) as HarmonyMessage
  message.content = joinPieces(open.pieces)
  message.terminator = TERMINATORS[terminator] ?? null
  return message
}

/**
 * Builds the object API's results from a backend's (a `ResultVisitor`): each batch's lists, the open
 * message's content, and every message completed so far. A batch's lists are made when their first
 * element is (at batch 1 most calls have one segment and nothing else): a literal of one element is a
 * single small allocation, where pushing to an empty array allocates room for 16. Empty lists are still
 * fresh arrays.
 */
export class BatchAssembler implements ResultVisitor {
  /** Every message completed so far. */
  readonly messages: HarmonyMessage[] = []
  private current: OpenMessage | null = null
  private opened: HarmonyOpened[] | null = null
  private segments: HarmonySegment[] | null = null
  private completed: HarmonyMessage[] | null = null

  open(index: number, header: RawHeader): void {
    this.current = { index, header, pieces: [] }
    const opened = openedOf(index, header)
    if (this.opened === null) this.opened = [opened]
    else this.opened.push(opened)
  }

  text(index: number, text: string): void {
    const current = this.current!
    current.pieces.push(text)
    const { header } = current
    const segment: HarmonySegment = {
      messageIndex: index,
      role: header.role,
      channel: header.channel ?? null,
      recipient: header.recipient ?? null,
      contentType: header.contentType ?? null,
      text,
    }
    if (this.segments === null) this.segments = [segment]
    else this.segments.push(segment)
  }

  close(_index: number, terminator: number): void {
    const message = messageOf(this.current!, terminator)
    this.current = null
    this.messages.push(message)
    if (this.completed === null) this.completed = [message]
    else this.completed.push(message)
  }

  /** The message being read, if any. */
  openMessage(): OpenMessage | null {
    return this.current
  }

  /** Text of the open message that reached the parser without a batch (`pushText`, `SsePool`'s lane). */
  appendText(text: string): void {
    if (this.current !== null && text !== '') this.current.pieces.push(text)
  }

  /** The batch of a call that only added `text` to the open message (`BackendStream.takeText`). */
  textBatch(text: string): HarmonyBatch {
    const current = this.current!
    this.text(current.index, text)
    const segments = this.segments!
    this.segments = null
    return { opened: [], segments, completed: [], diagnostics: [] }
  }

  /** The batch of everything reported since the last call; starts the next one. */
  take(diagnostics: HarmonyDiagnostic[]): HarmonyBatch {
    const batch: HarmonyBatch = {
      opened: this.opened ?? [],
      segments: this.segments ?? [],
      completed: this.completed ?? [],
      diagnostics,
    }
    this.opened = null
    this.segments = null
    this.completed = null
    return batch
  }
}

/**
 * `pushText`'s visitor: a batch of ordinary tokens inside a message can only add text to it, which goes to
 * the open message without a batch; anything else would be a backend bug.
 */
export class TextOnly implements ResultVisitor {
  collected = ''

  constructor(private readonly assembler: BatchAssembler) {}

  open(): void {
    throw new Error('a message opened in a batch of ordinary tokens inside a message')
  }

  text(_message: number, text: string): void {
    this.collected += text
    this.assembler.appendText(text)
  }

  close(): void {
    throw new Error('a message closed in a batch of ordinary tokens inside a message')
  }
}

export function diagnosticOf(raw: RawDiagnostic): HarmonyDiagnostic {
  const diagnostic: HarmonyDiagnostic = { code: raw.code, message: raw.message, tokenOffset: raw.tokenOffset }
  if (raw.text != null) diagnostic.text = raw.text
  return diagnostic
}
