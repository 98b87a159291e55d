/**
 * harmony-stream: a streaming parser for the Harmony format of OpenAI's gpt-oss models.
 *
 *   import { HarmonyStreamParser } from 'harmony-stream'
 *   const parser = new HarmonyStreamParser()          // after a prompt ending in <|start|>assistant
 *   for await (const tokens of engine) handle(parser.push(tokens))
 *   handle(parser.finish())
 */
export { HarmonyError, HarmonyParseError, HarmonyStateError } from './errors'
export { implementation } from './loader'
export { HarmonyStreamParser, parseCompletion } from './parser'
export { HarmonyTokens, STOP_TOKENS, ASSISTANT_ACTION_STOP_TOKENS } from './special-tokens'
export type {
  HarmonyBatch,
  HarmonyDiagnostic,
  HarmonyMessage,
  HarmonySegment,
  HarmonyStreamParserOptions,
  Implementation,
  ParserState,
  Role,
  Terminator,
} from './types'
