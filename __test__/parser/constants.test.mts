/**
 * The constants the Rust core and the TypeScript side both know (the compact format, the lane's frames, the
 * backend protocol's codes, token ids, limits both backends enforce) are written twice, once per language.
 * This test is what keeps the copies equal: it reads the Rust sources as text, evaluates each constant, and
 * compares it with the value of the TypeScript module that mirrors it, by the explicit map below. Every
 * constant of the files read must be either in the map or listed as one-sided with the reason, so that a
 * new constant cannot be copied by hand without being compared.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { isDeepStrictEqual } from 'node:util'

import test from 'ava'
import * as compact from '../../src/backend/compact.ts'
import * as frames from '../../src/backend/frames.ts'
import * as header from '../../src/backend/js/header.ts'
import * as pool from '../../src/backend/js/pool.ts'
import * as streamParser from '../../src/backend/js/stream-parser.ts'
import * as native from '../../src/backend/native.ts'
import * as protocol from '../../src/backend/protocol.ts'
import * as tokens from '../../src/backend/tokens.ts'
import * as types from '../../src/base/types.ts'

const root = join(import.meta.dirname, '..', '..')

/** Rust constants (`file:NAME`, `file:Container::NAME` inside an impl, mod or fn) and their TypeScript mirrors (`module:NAME`, `module:Class.NAME`). */
const PAIRS: readonly (readonly [rust: string, typescript: string])[] = [
  // The compact format (compact.rs, compact.ts).
  ['core/compact.rs:HEADER_SLOTS', 'backend/compact:COMPACT_FIRST_RECORD'],
  ['core/compact.rs:AT_RECORDS', 'backend/compact:COMPACT_RECORDS'],
  ['core/compact.rs:AT_STATUS', 'backend/compact:COMPACT_STATUS'],
  ['core/compact.rs:AT_DIAGNOSTICS', 'backend/compact:COMPACT_DIAGNOSTICS'],
  ['core/compact.rs:AT_STATE', 'backend/compact:COMPACT_STATE'],
  ['core/compact.rs:AT_BAD_INDEX', 'backend/compact:COMPACT_BAD_INDEX'],
  ['core/compact.rs:RECORD_SLOTS', 'backend/compact:COMPACT_RECORD_SLOTS'],
  ['core/compact.rs:OPEN', 'backend/compact:RECORD_OPEN'],
  ['core/compact.rs:TEXT', 'backend/compact:RECORD_TEXT'],
  ['core/compact.rs:CLOSE', 'backend/compact:RECORD_CLOSE'],
  ['core/compact.rs:FIELDS', 'backend/compact:RECORD_FIELDS'],
  ['core/compact.rs:STREAM', 'backend/compact:RECORD_STREAM'],
  ['core/compact.rs:STATUS_OK', 'backend/compact:COMPACT_STATUS_OK'],
  ['core/compact.rs:STATUS_PARSE_ERROR', 'backend/compact:COMPACT_STATUS_PARSE_ERROR'],
  ['core/compact.rs:STATUS_INVALID_TOKEN', 'backend/compact:COMPACT_STATUS_INVALID_TOKEN'],
  ['core/compact.rs:STATUS_FINISHED', 'backend/compact:COMPACT_STATUS_FINISHED'],
  ['core/compact.rs:STATUS_INTERNAL_ERROR', 'backend/compact:COMPACT_STATUS_INTERNAL_ERROR'],
  ['core/compact.rs:STATUS_UNKNOWN_STREAM', 'backend/compact:COMPACT_STATUS_UNKNOWN_STREAM'],
  ['core/compact.rs:STATUS_BAD_OFFSETS', 'backend/compact:COMPACT_STATUS_BAD_OFFSETS'],
  ['core/compact.rs:STATUS_REPEATED_STREAM', 'backend/compact:COMPACT_STATUS_REPEATED_STREAM'],
  ['core/compact.rs:NOT_INTERNED', 'backend/compact:NAME_NOT_INTERNED'],
  ['core/compact.rs:MAX_RECORDS_PER_TOKEN', 'backend/compact:MAX_RECORDS_PER_TOKEN'],
  ['core/compact.rs:NameTable::MAX_NAMES', 'backend/compact:NameTable.MAX_NAMES'],
  ['core/compact.rs:NameTable::MAX_NAME_BYTES', 'backend/compact:NameTable.MAX_NAME_BYTES'],
  // Token ids (tokens.rs, tokens.ts).
  ['core/tokens.rs:FIRST_SPECIAL', 'backend/tokens:FIRST_SPECIAL'],
  ['core/tokens.rs:LAST_TOKEN', 'backend/tokens:LAST_TOKEN'],
  ['core/tokens.rs:VOCAB_SIZE', 'backend/tokens:VOCAB_SIZE'],
  ['core/tokens.rs:RETURN', 'backend/tokens:RETURN'],
  ['core/tokens.rs:CONSTRAIN', 'backend/tokens:CONSTRAIN'],
  ['core/tokens.rs:CHANNEL', 'backend/tokens:CHANNEL'],
  ['core/tokens.rs:START', 'backend/tokens:START'],
  ['core/tokens.rs:END', 'backend/tokens:END'],
  ['core/tokens.rs:MESSAGE', 'backend/tokens:MESSAGE'],
  ['core/tokens.rs:CALL', 'backend/tokens:CALL'],
  ['core/tokens.rs:START_OF_TEXT', 'backend/tokens:START_OF_TEXT'],
  ['core/tokens.rs:END_OF_TEXT', 'backend/tokens:END_OF_TEXT'],
  ['core/tokens.rs:FIRST_RESERVED', 'backend/tokens:FIRST_RESERVED'],
  // Codes of the backend protocol (tokens.rs, stream_parser.rs, protocol.ts).
  ['core/tokens.rs:TERMINATOR_NONE', 'backend/protocol:TERMINATOR_NONE'],
  ['core/tokens.rs:Terminator::End', 'backend/protocol:TERMINATOR_END'],
  ['core/tokens.rs:Terminator::Return', 'backend/protocol:TERMINATOR_RETURN'],
  ['core/tokens.rs:Terminator::Call', 'backend/protocol:TERMINATOR_CALL'],
  ['core/stream_parser.rs:State::ExpectStart', 'backend/protocol:STATE_EXPECT_START'],
  ['core/stream_parser.rs:State::Header', 'backend/protocol:STATE_HEADER'],
  ['core/stream_parser.rs:State::Content', 'backend/protocol:STATE_CONTENT'],
  ['node/lib.rs:STATE_NOT_OPEN', 'backend/protocol:STATE_NOT_OPEN'],
  // Limits both backends enforce.
  ['core/stream_parser.rs:DEFAULT_MAX_HEADER_TOKENS', 'backend/protocol:DEFAULT_MAX_HEADER_TOKENS'],
  ['core/stream_parser.rs:MAX_STRAY_BYTES', 'backend/js/stream-parser:MAX_STRAY_BYTES'],
  // Stream ids (pool.rs, js/pool.ts; js/lane.ts numbers its lanes alike).
  ['core/pool.rs:INDEX_BITS', 'backend/js/pool:INDEX_BITS'],
  ['core/pool.rs:INDEX_MASK', 'backend/js/pool:INDEX_MASK'],
  // Header words (header.rs, js/header.ts).
  ['core/header.rs:ROLES', 'base/types:ROLES'],
  ['core/header.rs:CHANNELS', 'backend/js/header:CHANNELS'],
  ['core/header.rs:CHANNEL_MARKER', 'backend/js/header:CHANNEL_MARKER'],
  ['core/header.rs:CONSTRAIN_MARKER', 'backend/js/header:CONSTRAIN_MARKER'],
  ['core/header.rs:FUNCTIONS', 'backend/js/header:FUNCTIONS'],
  // The fast lane's frames (pool.rs, node/lib.rs, frames.ts).
  ['core/pool.rs:LaneReport::TEXT', 'backend/frames:LANE_TEXT'],
  ['node/lib.rs:FRAME_TEXT', 'backend/frames:FRAME_TEXT'],
  ['node/lib.rs:FRAME_COUNTER', 'backend/frames:FRAME_COUNTER'],
  ['node/lib.rs:FRAMES_STATUS', 'backend/frames:FRAMES_STATUS'],
  ['node/lib.rs:FRAMES_BAD_INDEX', 'backend/frames:FRAMES_BAD_INDEX'],
  ['node/lib.rs:FRAMES_SLOW', 'backend/frames:FRAMES_SLOW'],
  ['node/lib.rs:FRAMES_ENDS', 'backend/frames:FRAMES_ENDS'],
  ['node/lib.rs:FRAMES_SLOTS_PER_STREAM', 'backend/frames:FRAMES_SLOTS_PER_STREAM'],
  ['node/lib.rs:FRAMES_NO_ROOM', 'backend/frames:FRAMES_NO_ROOM'],
  ['node/lib.rs:MAX_TEMPLATES', 'backend/native:MAX_TEMPLATES'],
  ['node/lib.rs:TEMPLATE_NONE', 'backend/native:TEMPLATE_NONE'],
  // The native parser's bound input (node/lib.rs, native.ts).
  ['node/lib.rs:INPUT_STREAM', 'backend/native:INPUT_STREAM'],
  ['node/lib.rs:INPUT_COUNT', 'backend/native:INPUT_COUNT'],
  ['node/lib.rs:INPUT_SKIPPED', 'backend/native:INPUT_SKIPPED'],
  ['node/lib.rs:INPUT_REPLY', 'backend/native:INPUT_REPLY'],
  ['node/lib.rs:INPUT_ROOM', 'backend/native:INPUT_ROOM'],
  ['node/lib.rs:INPUT_TOKENS', 'backend/native:INPUT_TOKENS'],
  ['node/lib.rs:REPLY_PLAIN', 'backend/native:REPLY_PLAIN'],
  ['node/lib.rs:REPLY_OWN_TEXT', 'backend/native:REPLY_OWN_TEXT'],
  ['node/lib.rs:REPLY_BEGINS_CHARACTER', 'backend/native:REPLY_BEGINS_CHARACTER'],
  ['node/lib.rs:REPLY_OPENS', 'backend/native:REPLY_OPENS'],
  ['node/lib.rs:REPLY_RELEASED', 'backend/native:REPLY_RELEASED'],
  ['node/lib.rs:OPEN_ROLE_NONE', 'backend/native:OPEN_ROLE_NONE'],
  ['node/lib.rs:OPEN_ROLE_ASSISTANT', 'backend/native:OPEN_ROLE_ASSISTANT'],
]

/** Constants of the Rust files read that have no TypeScript mirror, and why. */
const RUST_ONLY: Readonly<Record<string, string>> = {
  'core/stream_parser.rs:TYPICAL_TOKEN_BYTES': 'a capacity to reserve',
  'core/stream_parser.rs:recycled::MAX_KEPT': "the Rust parsers' buffer reuse",
  'core/stream_parser.rs:recycled::MAX_HEADER_TOKENS_KEPT': "the Rust parsers' buffer reuse",
  'core/output.rs:MAX_SPARE_HEADERS': "the Rust parsers' buffer reuse",
  'core/header.rs:cache::SLOTS': 'the TypeScript backend has no header cache',
  'core/header.rs:cache::MAX_TOKENS': 'the TypeScript backend has no header cache',
  'core/header.rs:cache::MAX_TEXT_BYTES': 'the TypeScript backend has no header cache',
  'core/frames.rs:write_json_string::HEX': 'JSON escapes, which JSON.stringify writes in TypeScript',
  'node/lib.rs:MAX_KEPT_UNITS': "the binding's buffer reuse",
}

/** Constants of the TypeScript modules read that have no Rust counterpart, and why. */
const TYPESCRIPT_ONLY: Readonly<Record<string, string>> = {
  'backend/protocol:EVENT_OPEN': "the TypeScript backend's event list; Rust's events are an enum without codes",
  'backend/protocol:EVENT_TEXT': "the TypeScript backend's event list; Rust's events are an enum without codes",
  'backend/protocol:EVENT_CLOSE': "the TypeScript backend's event list; Rust's events are an enum without codes",
}

/** The Rust files read (under crate/), everything before their `#[cfg(test)]` module. */
const RUST_FILES = [
  'core/compact.rs',
  'core/frames.rs',
  'core/header.rs',
  'core/output.rs',
  'core/pool.rs',
  'core/stream_parser.rs',
  'core/tokens.rs',
  'node/lib.rs',
]

/**
 * The TypeScript modules read, imported from src/ by name (so that knip sees the constants used): their exported
 * numbers, strings and lists of strings.
 */
const TYPESCRIPT_MODULES: Record<string, Record<string, unknown>> = {
  'backend/compact': compact,
  'backend/frames': frames,
  'backend/native': native,
  'backend/protocol': protocol,
  'backend/tokens': tokens,
  'backend/js/header': header,
  'base/types': types,
  'backend/js/pool': pool,
  'backend/js/stream-parser': streamParser,
}

type Value = number | string | readonly string[]

interface RustConstant {
  /** As written after `=` (or a variant's discriminant). */
  expression: string
  file: string
  container: string | null
}

/** `path` of a Rust file (under crate/) as its source sits in the repository. */
const rustPath = (file: string) => {
  const [crate, name] = file.split('/')
  return join(root, 'crate', crate, 'src', name)
}

/**
 * The constants of one Rust file: `const NAME: T = value;` at any visibility and depth (a constant inside an
 * impl, mod or fn is named after it: the nearest line above it that is indented less), and the variants of
 * enums with explicit discriminants, as `Enum::Variant`.
 */
function rustConstants(file: string): Map<string, RustConstant> {
  const text = readFileSync(rustPath(file), 'utf8').split(/^#\[cfg\(test\)\]$/m)[0]
  const lines = text.split('\n')
  const found = new Map<string, RustConstant>()
  const add = (name: string, constant: RustConstant) => {
    const key = `${file}:${name}`
    if (found.has(key)) throw new Error(`${key} is declared twice`)
    found.set(key, constant)
  }
  const indent = (line: string) => line.length - line.trimStart().length
  lines.forEach((line, at) => {
    if (!/^\s*(pub(\([a-z]+\))?\s+)?const\s+[A-Z_][A-Z0-9_]*\s*:/.test(line)) return
    const declaration = /^\s*(?:pub(?:\([a-z]+\))?\s+)?const\s+([A-Z_][A-Z0-9_]*)\s*:[^=]+=\s*(.+);\s*(?:\/\/.*)?$/.exec(line)
    if (declaration === null) throw new Error(`${file}:${at + 1}: cannot read the constant (one line, \`const NAME: T = value;\`): ${line}`)
    let container: string | null = null
    if (indent(line) > 0) {
      const outer = lines
        .slice(0, at)
        .reverse()
        .find((above) => above.trim() !== '' && indent(above) < indent(line))
      const name = outer && /\b(?:impl|mod|fn|trait)\s+([A-Za-z_]\w*)/.exec(outer)
      if (!name) throw new Error(`${file}:${at + 1}: cannot tell what ${declaration[1]} is declared in`)
      container = name[1]
    }
    add(container === null ? declaration[1] : `${container}::${declaration[1]}`, { expression: declaration[2], file, container })
  })
  for (const enumeration of text.matchAll(/\benum\s+(\w+)\s*\{([^}]*)\}/g)) {
    for (const variant of enumeration[2].matchAll(/^\s*(\w+)\s*=\s*([^,\n]+),?\s*$/gm)) {
      add(`${enumeration[1]}::${variant[1]}`, { expression: variant[2].trim(), file, container: enumeration[1] })
    }
  }
  return found
}

/**
 * The value of a constant's expression: integer literals (`200_006`, `0xFFFF_FFFF`), `u32::MAX`, other
 * constants (of the same impl or mod, of the same file, or of any file read), `as` casts, `+ - * / << >> | &`
 * and parentheses (integers as BigInt, so `1 << 31` is 2^31 as in Rust); string literals; arrays of them.
 */
function evaluate(key: string, constants: Map<string, RustConstant>): Value {
  const constant = constants.get(key)
  if (constant === undefined) throw new Error(`no Rust constant ${key}`)
  const source = constant.expression.trim()
  if (source.startsWith('"')) return JSON.parse(source) as string
  if (source.startsWith('[')) {
    const items = /^\[\s*((?:"[^"\\]*"\s*,\s*)*"[^"\\]*")\s*,?\s*\]$/.exec(source)
    if (items === null) throw new Error(`${key}: only arrays of plain string literals are read: ${source}`)
    return items[1].split(',').map((item) => JSON.parse(item.trim()) as string)
  }
  const value = integer(key, constant, constants)
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`${key} is too large to compare: ${value}`)
  return Number(value)
}

const LIMITS: Readonly<Record<string, bigint>> = {
  'u8::MAX': 0xffn,
  'u16::MAX': 0xffffn,
  'u32::MAX': 0xffff_ffffn,
}

/** The integer value of `constant` (named `key` in messages); the names it uses are looked up from where it is declared. */
function integer(key: string, constant: RustConstant, constants: Map<string, RustConstant>): bigint {
  const source = constant.expression.trim()
  const tokens = source.match(/0x[0-9a-fA-F_]+|\d[\d_]*|[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*|<<|>>|[-+*/|&()]/g) ?? []
  if (tokens.join('') !== source.replace(/\s+/g, '')) throw new Error(`${key}: cannot read ${source}`)
  let at = 0
  const peek = () => tokens[at]
  const next = () => tokens[at++]
  const binary = (operators: readonly string[], operand: () => bigint, apply: (op: string, a: bigint, b: bigint) => bigint) => () => {
    let value = operand()
    while (operators.includes(peek())) {
      const op = next()
      value = apply(op, value, operand())
    }
    return value
  }
  const primary = (): bigint => {
    const token = next()
    if (token === undefined) throw new Error(`${key}: ${source} ends too soon`)
    if (token === '(') {
      const value = or()
      if (next() !== ')') throw new Error(`${key}: unbalanced parentheses in ${source}`)
      return value
    }
    if (/^\d/.test(token)) return BigInt(token.replaceAll('_', ''))
    if (token in LIMITS) return LIMITS[token]
    return integer(`${key} → ${token}`, referenced(key, constant, token, constants), constants)
  }
  const cast = () => {
    const value = primary()
    while (peek() === 'as') {
      next()
      if (!/^(u8|u16|u32|u64|usize)$/.test(next() ?? '')) throw new Error(`${key}: only casts to unsigned integers are read: ${source}`)
    }
    return value
  }
  const arithmetic = (op: string, a: bigint, b: bigint) =>
    op === '*'
      ? a * b
      : op === '/'
        ? a / b
        : op === '+'
          ? a + b
          : op === '-'
            ? a - b
            : op === '<<'
              ? a << b
              : op === '>>'
                ? a >> b
                : op === '&'
                  ? a & b
                  : a | b
  const product = binary(['*', '/'], cast, arithmetic)
  const sum = binary(['+', '-'], product, arithmetic)
  const shift = binary(['<<', '>>'], sum, arithmetic)
  const and = binary(['&'], shift, arithmetic)
  const or: () => bigint = binary(['|'], and, arithmetic)
  const value = or()
  if (at !== tokens.length) throw new Error(`${key}: cannot read ${source}`)
  return value
}

/** The constant `name` refers to in the expression of `from`: its container first, then its file, then any file's top level. */
function referenced(key: string, from: RustConstant, name: string, constants: Map<string, RustConstant>): RustConstant {
  const bare = name.replace(/^Self::/, '')
  const candidates = [
    ...(from.container === null ? [] : [`${from.file}:${from.container}::${bare}`]),
    `${from.file}:${bare}`,
    ...[...constants.keys()].filter((other) => other.endsWith(`:${bare}`) && constants.get(other)!.container === null),
  ]
  for (const candidate of candidates) {
    const constant = constants.get(candidate)
    if (constant !== undefined) return constant
  }
  throw new Error(`${key}: no constant ${name}`)
}

const rust = new Map(RUST_FILES.flatMap((file) => [...rustConstants(file)]))

/** The exported constants of the TypeScript modules: numbers, strings, lists of strings, and classes' upper-case static numbers. */
async function typeScriptConstants(): Promise<Map<string, Value>> {
  const found = new Map<string, Value>()
  for (const [module, exports] of Object.entries(TYPESCRIPT_MODULES)) {
    for (const [name, value] of Object.entries(exports)) {
      if (typeof value === 'number' || typeof value === 'string') found.set(`${module}:${name}`, value)
      else if (Array.isArray(value) && value.every((item) => typeof item === 'string')) found.set(`${module}:${name}`, value)
      else if (typeof value === 'function') {
        for (const member of Object.getOwnPropertyNames(value)) {
          const field = (value as unknown as Record<string, unknown>)[member]
          if (/^[A-Z][A-Z0-9_]*$/.test(member) && typeof field === 'number') found.set(`${module}:${name}.${member}`, field)
        }
      }
    }
  }
  return found
}

test('every constant the Rust core shares with TypeScript has the same value on both sides', async (t) => {
  const typescript = await typeScriptConstants()
  const problems: string[] = []
  for (const [rustKey, typeScriptKey] of PAIRS) {
    if (!rust.has(rustKey)) problems.push(`${rustKey} is not declared in crate/ (gone or renamed?)`)
    if (!typescript.has(typeScriptKey)) problems.push(`${typeScriptKey} is not exported from src/ (gone or renamed?)`)
    if (!rust.has(rustKey) || !typescript.has(typeScriptKey)) continue
    const [inRust, inTypeScript] = [evaluate(rustKey, rust), typescript.get(typeScriptKey)]
    if (!isDeepStrictEqual(inRust, inTypeScript)) {
      problems.push(`${typeScriptKey} is ${JSON.stringify(inTypeScript)} but ${rustKey} is ${JSON.stringify(inRust)}`)
    }
  }
  t.deepEqual(problems, [])
})

test('every constant of the files compared is paired or known to be one-sided', async (t) => {
  const typescript = await typeScriptConstants()
  const pairedRust = new Set(PAIRS.map(([rustKey]) => rustKey))
  const pairedTypeScript = new Set(PAIRS.map(([, typeScriptKey]) => typeScriptKey))
  t.deepEqual(
    [...rust.keys()].filter((key) => !pairedRust.has(key) && !(key in RUST_ONLY)),
    [],
    'Rust constants neither in PAIRS nor in RUST_ONLY',
  )
  t.deepEqual(
    [...typescript.keys()].filter((key) => !pairedTypeScript.has(key) && !(key in TYPESCRIPT_ONLY)),
    [],
    'TypeScript constants neither in PAIRS nor in TYPESCRIPT_ONLY',
  )
  t.deepEqual(
    Object.keys(RUST_ONLY).filter((key) => !rust.has(key) || pairedRust.has(key)),
    [],
    'RUST_ONLY lists only constants that exist and are not paired',
  )
  t.deepEqual(
    Object.keys(TYPESCRIPT_ONLY).filter((key) => !typescript.has(key) || pairedTypeScript.has(key)),
    [],
    'TYPESCRIPT_ONLY lists only constants that exist and are not paired',
  )
})

test('the Rust reader evaluates the forms the sources use', (t) => {
  const constants = new Map<string, RustConstant>([
    ['x.rs:A', { expression: '1 << 31', file: 'x.rs', container: null }],
    ['x.rs:B', { expression: '0xFFFF_FFFF', file: 'x.rs', container: null }],
    ['x.rs:C', { expression: '(1 << B_BITS) - 1', file: 'x.rs', container: null }],
    ['x.rs:B_BITS', { expression: '24', file: 'x.rs', container: null }],
    ['x.rs:D', { expression: 'E as usize + 1', file: 'x.rs', container: null }],
    ['x.rs:E', { expression: '200_006', file: 'x.rs', container: null }],
    ['x.rs:F', { expression: 'u32::MAX', file: 'x.rs', container: null }],
    ['x.rs:T::G', { expression: 'Self::H * 2', file: 'x.rs', container: 'T' }],
    ['x.rs:T::H', { expression: '8', file: 'x.rs', container: 'T' }],
    ['x.rs:I', { expression: '["a", "b"]', file: 'x.rs', container: null }],
    ['x.rs:J', { expression: '"<|channel|>"', file: 'x.rs', container: null }],
  ])
  const value = (name: string) => evaluate(`x.rs:${name}`, constants)
  t.is(value('A'), 2 ** 31)
  t.is(value('B'), 2 ** 32 - 1)
  t.is(value('C'), 2 ** 24 - 1)
  t.is(value('D'), 200_007)
  t.is(value('F'), 2 ** 32 - 1)
  t.is(value('T::G'), 16)
  t.deepEqual(value('I'), ['a', 'b'])
  t.is(value('J'), '<|channel|>')
  constants.set('x.rs:K', { expression: 'NOWHERE + 1', file: 'x.rs', container: null })
  t.throws(() => value('K'), { message: /no constant NOWHERE/ })
})
