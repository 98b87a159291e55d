/**
 * Test helpers: Harmony text → token ids (ordinary text encoded with gpt-tokenizer's o200k BPE, the seven
 * markers inserted as special ids; docs/SEMANTICS.md "Building token streams from text" says why not `allowedSpecial`),
 * batch replay, and a per-message view of results.
 */
import { statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import type test from 'ava'
import { encode } from 'gpt-tokenizer/encoding/o200k_base'

import {
  type HarmonyBatch,
  type HarmonyMessage,
  HarmonyStreamParser,
  type HarmonyStreamParserOptions,
  type Implementation,
} from 'harmony-stream'

/**
 * Whether the native addon loads. An install without cargo (or whose build failed) runs on js, so then the
 * tests do too: native cases are skipped with a note. Not in CI, which must test native. To try this path
 * where the addon is built: `HARMONY_TEST_NO_NATIVE=1` skips native cases only, while
 * `NAPI_RS_NATIVE_LIBRARY_PATH=/nonexistent` hides the addon from the package too, as on a machine without it.
 */
export const NATIVE = nativeLoads()

function nativeLoads(): boolean {
  let error: unknown = null
  if (process.env.HARMONY_TEST_NO_NATIVE === '1') error = new Error('HARMONY_TEST_NO_NATIVE=1')
  else {
    try {
      createRequire(import.meta.url)('../../native.cjs')
    } catch (cause) {
      error = cause
    }
  }
  if (error === null) return true
  if (process.env.CI) throw new Error(`the native addon does not load, and CI must test it: ${whyNativeFails(error)}`, { cause: error })
  noteOncePerRun(
    `harmony-stream tests: the native addon is not built here (${whyNativeFails(error)}); native test cases are skipped, the js ones run. Build it with: npm run build:native`,
  )
  return false
}

/** napi-rs's "Cannot find native binding" comes with advice about npm that does not apply here: name what is missing instead. */
function whyNativeFails(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error)
  if (message.startsWith('Cannot find native binding')) return `no native binary for ${process.platform}-${process.arch}`
  return message.split('\n')[0]!
}

/**
 * ava runs each test file in its own process, all children of one ava process: a marker file named after
 * that parent keeps the note to one per run instead of one per file. A marker older than an hour is from an
 * earlier run whose pid came round again. Any failure with the marker only costs a repeated note.
 */
function noteOncePerRun(note: string): void {
  const marker = join(tmpdir(), `harmony-stream-tests-native-note-${process.ppid}`)
  try {
    writeFileSync(marker, '', { flag: 'wx' })
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST' && writtenWithinAnHour(marker)) return
    try {
      writeFileSync(marker, '')
    } catch {
      // Not ours to write (another user's file): print anyway.
    }
  }
  console.warn(note)
}

function writtenWithinAnHour(file: string): boolean {
  try {
    return Date.now() - statSync(file).mtimeMs < 3_600_000
  } catch {
    return false
  }
}

export const IMPLEMENTATIONS: Implementation[] = NATIVE ? ['native', 'js'] : ['js']

/** `test` for a case that needs the native addon: skipped where it is not built (see NATIVE). */
export function nativeTest(avaTest: typeof test): typeof test {
  return NATIVE ? avaTest : (avaTest.skip as unknown as typeof test)
}

export const SPECIAL: Record<string, number> = {
  '<|return|>': 200002,
  '<|constrain|>': 200003,
  '<|channel|>': 200005,
  '<|start|>': 200006,
  '<|end|>': 200007,
  '<|message|>': 200008,
  '<|call|>': 200012,
}

const MARKER = /(<\|(?:return|constrain|channel|start|end|message|call)\|>)/

/** Token ids of Harmony text in which the seven markers are special tokens and all else is ordinary text. */
export function harmony(text: string): number[] {
  const tokens: number[] = []
  for (const part of text.split(MARKER)) {
    if (part === '') continue
    if (part in SPECIAL) tokens.push(SPECIAL[part])
    else tokens.push(...encode(part, { disallowedSpecial: new Set() }))
  }
  return tokens
}

/** Splits `tokens` into batches of `size` (the last may be shorter). */
export function batches<T>(tokens: readonly T[], size: number): T[][] {
  const out: T[][] = []
  for (let i = 0; i < tokens.length; i += size) out.push(tokens.slice(i, i + size))
  return out
}

export interface Replay {
  batches: HarmonyBatch[]
  messages: HarmonyMessage[]
  /** Concatenated segment text per message index. */
  textByMessage: string[]
}

/** Feeds `chunks` to a new parser, then finishes it. */
export function replay(chunks: readonly (readonly number[])[], options: HarmonyStreamParserOptions): Replay {
  const parser = new HarmonyStreamParser(options)
  const results = chunks.map((chunk) => parser.push(chunk))
  results.push(parser.finish())
  const textByMessage: string[] = []
  for (const batch of results) {
    for (const segment of batch.segments) textByMessage[segment.messageIndex] = (textByMessage[segment.messageIndex] ?? '') + segment.text
  }
  return { batches: results, messages: parser.messages, textByMessage }
}

// Kept here too: the parser tests have always taken it from this module.
export { random } from './random.mjs'

/** Cuts `tokens` at random places into batches of 1..maxSize. */
export function randomBatches(tokens: readonly number[], next: () => number, maxSize: number): number[][] {
  const out: number[][] = []
  for (let i = 0; i < tokens.length; ) {
    const size = 1 + Math.floor(next() * maxSize)
    out.push(tokens.slice(i, i + size))
    i += size
  }
  return out
}
