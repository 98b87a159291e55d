/** Public types of harmony-stream. */

/** Which implementation runs a parser: the Rust core through N-API, or the pure TypeScript one. */
export type Implementation = 'native' | 'js'

/** The roles of the reference parser. */
export const ROLES = Object.freeze(['user', 'assistant', 'system', 'developer', 'tool'] as const)
export type Role = (typeof ROLES)[number]

/** How a message ended: by `<|end|>`, `<|return|>` or `<|call|>`, or (null) by the end of the stream. */
export type Terminator = 'end' | 'return' | 'call' | null

/** Where the parser is in the stream: waiting for `<|start|>`, reading a header, or reading content. */
export type ParserState = 'expect-start' | 'header' | 'content'

/** A message header. Absent fields are left out. */
export interface HarmonyHeader {
  /** A role, or in lenient mode an unknown role word as the model wrote it (with a diagnostic). */
  role: string
  /** Author of a tool message, e.g. `functions.get_weather` (role `tool`). */
  name?: string
  channel?: string
  /** Who the message is for, e.g. `functions.get_weather`; `to=` removed. */
  recipient?: string
  /** Normalized: `json` for `<|constrain|>json`, `<|constrain|> json` and ` json`. */
  contentType?: string
}

export interface HarmonyMessage {
  /** A role, or in lenient mode an unknown role word as the model wrote it (with a diagnostic). */
  role: string
  /** Author of a tool message, e.g. `functions.get_weather` (role `tool`). */
  name?: string
  channel?: string
  /** Who the message is for, e.g. `functions.get_weather`; `to=` removed. */
  recipient?: string
  /** Normalized: `json` for `<|constrain|>json`, `<|constrain|> json` and ` json`. */
  contentType?: string
  content: string
  terminator: Terminator
}

/** A run of content text of one message within one batch. */
export interface HarmonySegment {
  /** Index of the message in this parser, counted from 0 in order. */
  messageIndex: number
  role: string
  channel: string | null
  recipient: string | null
  contentType: string | null
  text: string
}

/** A recovery made in lenient mode (codes: docs/SEMANTICS.md "Diagnostics catalogue"). */
export interface HarmonyDiagnostic {
  code: string
  message: string
  /** Offset in the parser's token stream, counted from 0 over all batches. */
  tokenOffset: number
  /** The raw text involved: ignored tokens, or the header that could not be parsed. */
  text?: string
}

/** A message whose header completed (`<|message|>` arrived) in a batch: known before any of its content. */
export interface HarmonyOpened extends HarmonyHeader {
  /** Index of the message in this parser, as in segments and completed messages. */
  messageIndex: number
}

export interface HarmonyBatch {
  /**
   * Messages whose header completed in this batch, in order: an adapter can announce a tool call (or open a
   * Responses item) as soon as the model has chosen it, before any argument token.
   */
  opened: HarmonyOpened[]
  /** Content text of this batch, in order, one segment per message touched. */
  segments: HarmonySegment[]
  /** Messages that ended in this batch. */
  completed: HarmonyMessage[]
  diagnostics: HarmonyDiagnostic[]
}

export interface HarmonyStreamParserOptions {
  /**
   * Role of the first message, as if the prompt ended with `<|start|>{role}` (the usual case for a
   * completion); null waits for `<|start|>`. Default `'assistant'`.
   */
  role?: Role | null
  /** Throw the reference parser's errors as `HarmonyParseError` instead of recovering. Default false. */
  strict?: boolean
  /** Longest header, in tokens, before it is treated as content (lenient) or an error (strict). Default 256. */
  maxHeaderTokens?: number
  /**
   * Names of the tools the request offered, e.g. `functions.get_weather`. Lenient mode uses them to split a
   * content type the model glued to the recipient (`to=functions.get_weatherjson`).
   */
  toolNames?: readonly string[]
  /** Run this parser on a given implementation instead of the process-wide one (`implementation`). */
  implementation?: Implementation
}
