/**
 * The reference's conversation model (system content, developer content with tools, then messages) and its
 * rendering to tokens: each message as `Render<Message>` does it (encoding.rs), piece by piece, every piece
 * of text encoded on its own (so BPE never merges across a piece), special tokens inserted between them.
 */

import type { OrdinaryEncoder } from '../backend/encoder'
import { CALL, CHANNEL, CONSTRAIN, END, MESSAGE, START } from '../backend/tokens'
import type { Implementation } from '../base/types'
import type { RenderCache } from './cache'
import { type DeveloperContent, developerMessageText } from './developer'
import { type SystemContent, systemMessageText } from './system'

export interface SystemMessage {
  role: 'system'
  /** The reference's system content, or text taken as the whole body. */
  content: SystemContent | string
}

export interface DeveloperMessage {
  role: 'developer'
  /** Instructions and function tools, or text taken as the whole body. */
  content: DeveloperContent | string
}

/** A message with text content, like the parser's `HarmonyMessage` (its `terminator` is ignored). */
export interface TextMessage {
  role: 'user' | 'assistant' | 'tool'
  /** The author's name; for a tool message, the tool (e.g. `functions.get_weather`), which is required. */
  name?: string
  /** Who the message is for (`functions.get_weather`; `assistant` for a tool result). */
  recipient?: string
  channel?: string
  /** As the reference writes it: `<|constrain|>json` renders the constrain token, anything else is text. */
  contentType?: string
  content: string
}

export type ConversationMessage = SystemMessage | DeveloperMessage | TextMessage

/** One message reduced to what its tokens depend on; also the cache key's fields. */
interface MessageParts {
  role: string
  /** What follows `<|start|>`: the role, or a tool message's name. */
  author: string
  name: string | undefined
  recipient: string | undefined
  channel: string | undefined
  contentType: string | undefined
  body: string
  terminator: number
}

const CONSTRAIN_MARKER = '<|constrain|>'

function hasFunctionTools(messages: readonly ConversationMessage[]): boolean {
  return messages.some((m) => m.role === 'developer' && typeof m.content === 'object' && (m.content.tools?.length ?? 0) > 0)
}

function messageParts(message: ConversationMessage, functionTools: boolean): MessageParts {
  const base = { name: undefined, recipient: undefined, channel: undefined, contentType: undefined, terminator: END }
  if (message.role === 'system') {
    const body = typeof message.content === 'string' ? message.content : systemMessageText(message.content, functionTools)
    return { ...base, role: 'system', author: 'system', body }
  }
  if (message.role === 'developer') {
    const body = typeof message.content === 'string' ? message.content : developerMessageText(message.content)
    return { ...base, role: 'developer', author: 'developer', body }
  }
  return {
    role: message.role,
    // A tool message's author is its name alone (`functions.x`), never `tool`.
    author: message.role === 'tool' ? (message.name as string) : message.role,
    name: message.role === 'tool' ? undefined : message.name,
    recipient: message.recipient,
    channel: message.channel,
    contentType: message.contentType,
    body: message.content,
    // An assistant message with a recipient is a tool call, even with recipient `all`.
    terminator: message.role === 'assistant' && message.recipient !== undefined ? CALL : END,
  }
}

/** Collision-free: every field is length-prefixed, absent ones marked. */
function cacheKey(parts: MessageParts): string {
  let key = ''
  for (const field of [parts.author, parts.name, parts.recipient, parts.channel, parts.contentType]) {
    key += field === undefined ? '-' : `${field.length}:${field}`
  }
  return `${key}${parts.terminator}|${parts.body}`
}

/** Renders messages to tokens, one array per message, through a cache of whole messages. */
export class MessageRenderer {
  /** Header pieces (`assistant`, ` to=functions.x`, `commentary`) recur in every message: encoded once. */
  #pieces = new Map<string, ArrayLike<number>>()

  constructor(
    readonly encoder: OrdinaryEncoder,
    readonly cache: RenderCache | null,
  ) {}

  get implementation(): Implementation {
    return this.encoder.implementation
  }

  /** Each message's tokens, in order. */
  render(messages: readonly ConversationMessage[]): Uint32Array[] {
    const functionTools = hasFunctionTools(messages)
    const perMessage: Uint32Array[] = []
    for (const message of messages) {
      const parts = messageParts(message, functionTools)
      const key = this.cache === null ? '' : cacheKey(parts)
      let tokens = this.cache?.get(key)
      if (tokens === undefined) {
        tokens = this.#renderParts(parts)
        this.cache?.set(key, tokens)
      }
      perMessage.push(tokens)
    }
    return perMessage
  }

  /** How many of a text message's tokens are `<|start|>` and its author (`assistant`, `:name`): the training mask's prompt part. */
  authorLength(message: TextMessage): number {
    const parts = messageParts(message, false)
    return 1 + this.piece(parts.author).length + (parts.name === undefined ? 0 : this.piece(`:${parts.name}`).length)
  }

  /** The tokens of a header piece (`assistant`, ` to=functions.x`), encoded once per renderer. */
  piece(text: string): ArrayLike<number> {
    let tokens = this.#pieces.get(text)
    if (tokens === undefined) {
      tokens = this.encoder.encode(text)
      // Bounded: names and recipients come from requests, so a client could send endless distinct ones.
      if (this.#pieces.size >= 4096) this.#pieces.clear()
      this.#pieces.set(text, tokens)
    }
    return tokens
  }

  #renderParts(parts: MessageParts): Uint32Array {
    const pieces: (number | ArrayLike<number>)[] = [START, this.piece(parts.author)]
    if (parts.name !== undefined) pieces.push(this.piece(`:${parts.name}`))
    if (parts.recipient !== undefined && parts.recipient !== 'all') pieces.push(this.piece(` to=${parts.recipient}`))
    if (parts.channel !== undefined) pieces.push(CHANNEL, this.piece(parts.channel))
    if (parts.contentType !== undefined) {
      if (parts.contentType.startsWith(CONSTRAIN_MARKER)) {
        // The reference: a space, the constrain token, then the rest (if any) as text.
        const rest = parts.contentType.slice(CONSTRAIN_MARKER.length)
        pieces.push(this.piece(' '), CONSTRAIN)
        if (rest !== '') pieces.push(this.piece(rest))
      } else {
        pieces.push(this.piece(` ${parts.contentType}`))
      }
    }
    pieces.push(MESSAGE, this.encoder.encode(parts.body), parts.terminator)
    return concat(pieces)
  }
}

export function concat(pieces: readonly (number | ArrayLike<number>)[]): Uint32Array {
  let length = 0
  for (const piece of pieces) length += typeof piece === 'number' ? 1 : piece.length
  const out = new Uint32Array(length)
  let at = 0
  for (const piece of pieces) {
    if (typeof piece === 'number') out[at++] = piece
    else if (piece instanceof Uint32Array) {
      out.set(piece, at)
      at += piece.length
    } else {
      for (let i = 0; i < piece.length; i++) out[at++] = piece[i]
    }
  }
  return out
}

/** `<|start|>assistant`: where a prompt for the model's next turn ends. */
export function nextTurnTokens(renderer: MessageRenderer, role: string): ArrayLike<number>[] {
  return [[START], renderer.piece(role)]
}
