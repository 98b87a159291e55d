/**
 * `harmony-stream inspect [file]`: reads token ids (a JSON array, whitespace-separated numbers, or a
 * replay file `[{ "tokens": [...] }, …]`) from a file or stdin and prints the parsed messages, each
 * channel in its own colour (plain when the output is not a terminal or NO_COLOR is set), diagnostics
 * highlighted; with `--events chat|responses`, the wire events a gateway would send instead.
 */
import { readFileSync } from 'node:fs'
import { HarmonyStreamParser } from './api/parser'
import { HarmonyTextParser } from './api/text-parser'
import { LAST_TOKEN } from './backend/tokens'
import { HarmonyParseError } from './base/errors'
import { didYouMean } from './base/options'
import { type HarmonyDiagnostic, type HarmonyMessage, type Implementation, ROLES, type Role } from './base/types'
import { ChatCompletionsStream } from './wire/chat'
import { ResponsesStream } from './wire/responses'

export const HELP = `Usage: harmony-stream inspect [file] [options]

Parses Harmony token ids and prints the messages. Reads the file, or stdin when no file is given;
when stdin is a terminal, it says so on stderr and waits for ids typed or pasted there, up to Ctrl-D
(Ctrl-Z then Enter on Windows).
Input: a JSON array of token ids, token ids separated by whitespace or commas, or a replay file
[{ "tokens": [...] }, ...] (each completion is parsed on its own). The ids are the completion after
<|start|>assistant, as an engine returns them (use --role none if they start with <|start|>).
With --text, the input is Harmony text whose markers are text (<|channel|>final<|message|>…), as
llama.cpp or Ollama stream it.

Options:
  --events chat|responses   print the Chat Completions chunks or Responses events instead (one JSON per line)
  --text                    the input is Harmony text, not token ids
  --strict                  report the reference parser's errors instead of recovering
  --role <role>|none        role of the first message (default assistant)
  --implementation native|js
  --no-color                plain output even on a terminal (also: NO_COLOR=1)
  -h, --help                this text

Exit status: 0 when parsed, 1 on a strict-mode error, 2 on bad input or usage.`

/** `harmony-stream --help` (or no command): the commands. */
export const COMMANDS_HELP = `Usage: harmony-stream <command> [options]

Commands:
  inspect [file]   parse Harmony token ids (or text) and print the messages, or the wire events a gateway sends
  serve            an OpenAI-compatible gateway for gpt-oss in front of an inference engine
                   (with the package harmony-stream-gateway installed)

  harmony-stream <command> --help   the command's options
  harmony-stream --version          the version`

const COMMANDS = ['inspect', 'serve']

interface CliOptions {
  file: string | null
  text: boolean
  events: 'chat' | 'responses' | null
  strict: boolean
  role: Role | null
  implementation: Implementation | undefined
  color: boolean
}

export class UsageError extends Error {}

const INSPECT_OPTIONS = ['--events', '--text', '--strict', '--role', '--implementation', '--no-color', '--help']

export function parseArguments(args: string[], isTty: boolean, env: NodeJS.ProcessEnv): CliOptions | 'help' | 'commands' {
  const options: CliOptions = {
    file: null,
    text: false,
    events: null,
    strict: false,
    role: 'assistant',
    implementation: undefined,
    color: isTty && !env.NO_COLOR,
  }
  const rest = [...args]
  if (rest.length === 0 || rest[0] === '-h' || rest[0] === '--help') return 'commands'
  if (rest[0] === 'inspect') rest.shift()
  else
    throw new UsageError(
      `unknown command ${rest[0]}${didYouMean(rest[0]!, COMMANDS)}; the commands: inspect, serve (harmony-stream --help)`,
    )
  while (rest.length > 0) {
    const arg = rest.shift()!
    const value = () => {
      const v = rest.shift()
      if (v === undefined) throw new UsageError(`${arg} needs a value`)
      return v
    }
    if (arg === '-h' || arg === '--help') return 'help'
    else if (arg === '--events') {
      const v = value()
      if (v !== 'chat' && v !== 'responses') throw new UsageError('--events takes chat or responses')
      options.events = v
    } else if (arg === '--strict') options.strict = true
    else if (arg === '--text') options.text = true
    else if (arg === '--role') {
      const v = value()
      if (v !== 'none' && !(ROLES as readonly string[]).includes(v)) throw new UsageError(`--role takes one of ${ROLES.join(', ')} or none`)
      options.role = v === 'none' ? null : (v as Role)
    } else if (arg === '--implementation') {
      const v = value()
      if (v !== 'native' && v !== 'js') throw new UsageError('--implementation takes native or js')
      options.implementation = v
    } else if (arg === '--no-color') options.color = false
    else if (arg.startsWith('-'))
      throw new UsageError(`unknown option ${arg}${didYouMean(arg, INSPECT_OPTIONS)} (harmony-stream inspect --help)`)
    else if (options.file === null) options.file = arg
    else throw new UsageError(`one file at most (got ${options.file} and ${arg})`)
  }
  return options
}

/** Harmony markers or words: input that is text, for `--text`, not token ids. */
const LOOKS_LIKE_TEXT = /<\||[A-Za-z]{2,}/
const TEXT_HINT = '; this looks like text: add --text to read Harmony text'

/** The key that ends typed input on this platform's terminals. */
const END_OF_INPUT = process.platform === 'win32' ? 'Ctrl-Z then Enter' : 'Ctrl-D'

const EMPTY_INPUT = 'the input is empty: give token ids (a JSON array or numbers separated by spaces), a replay file, or text with --text'

/** The input of `--text`: any text but none. */
export function readText(text: string): string {
  if (text.trim() === '') throw new UsageError(EMPTY_INPUT)
  return text
}

/** The completions in the input: one, or several from a replay file. */
export function readCompletions(text: string): number[][] {
  const trimmed = text.trim()
  if (trimmed === '') throw new UsageError(EMPTY_INPUT)
  let value: unknown
  if (trimmed.startsWith('[')) {
    try {
      value = JSON.parse(trimmed)
    } catch (error) {
      throw new UsageError(`the input is not valid JSON: ${(error as Error).message}${LOOKS_LIKE_TEXT.test(trimmed) ? TEXT_HINT : ''}`)
    }
  } else {
    value = trimmed
      .split(/[\s,]+/)
      .filter((word) => word !== '')
      .map((word) => (/^\d+$/.test(word) ? Number(word) : word))
  }
  if (!Array.isArray(value)) throw new UsageError('expected an array of token ids or of { "tokens": [...] }')
  const isReplay = value.length > 0 && typeof value[0] === 'object' && value[0] !== null
  const completions = isReplay ? value.map((entry) => (entry as { tokens?: unknown } | null)?.tokens) : [value]
  return completions.map((tokens, n) => {
    if (!Array.isArray(tokens)) throw new UsageError(`completion ${n}: expected { "tokens": [...] } with an array of token ids`)
    const bad = tokens.findIndex((id) => !Number.isInteger(id) || id < 0 || id > LAST_TOKEN)
    if (bad >= 0) throw new UsageError(`${isReplay ? `completion ${n}, ` : ''}${badTokenId(bad, tokens[bad])}`)
    return tokens as number[]
  })
}

/** The first bad id, by position and value; words (or markers) there mean the input was text. */
function badTokenId(position: number, value: unknown): string {
  const shown = JSON.stringify(value) ?? String(value)
  const hint = typeof value === 'string' && LOOKS_LIKE_TEXT.test(value) ? TEXT_HINT : ''
  return `token ${position} is ${shown.length > 40 ? `${shown.slice(0, 40)}…` : shown}, not a token id (an integer from 0 to ${LAST_TOKEN})${hint}`
}

const COLORS: Record<string, string> = { analysis: '\x1b[2;36m', commentary: '\x1b[35m', final: '\x1b[32m' }
const TOOL = '\x1b[33m'
const WARN = '\x1b[1;33m'
const ERROR = '\x1b[1;31m'
const RESET = '\x1b[0m'

function paint(color: boolean, code: string, text: string): string {
  return color ? `${code}${text}${RESET}` : text
}

function describe(message: HarmonyMessage): string {
  const parts = [message.role, message.channel ? `[${message.channel}]` : '[no channel]']
  if (message.recipient) parts.push(`to=${message.recipient}`)
  if (message.contentType) parts.push(`<${message.contentType}>`)
  parts.push(`(${message.terminator ?? 'end of stream'})`)
  return parts.join(' ')
}

/** Control characters of model text made visible on a terminal, where they would act (escape sequences). */
function visible(text: string, color: boolean): string {
  if (!color) return text
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is this function's purpose
  return text.replace(/[\x00-\x08\x0b-\x1f\x7f\x9b]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`)
}

interface Output {
  write(s: string): unknown
  isTTY?: boolean
}

/**
 * Runs the command; returns the exit status. Results go to stdout; with `--events` (JSON lines, for tools
 * such as jq) diagnostics, errors and completion headings go to stderr.
 */
export function run(
  args: string[],
  io: { stdout: Output; stderr?: Output; stdin: () => string; stdinIsTTY?: boolean; env: NodeJS.ProcessEnv },
): number {
  const write = (line: string) => io.stdout.write(`${line}\n`)
  const stderr = io.stderr ?? io.stdout
  const note = (line: string) => stderr.write(`${line}\n`)
  let options: CliOptions | 'help' | 'commands'
  let completions: (number[] | string)[]
  try {
    options = parseArguments(args, io.stdout.isTTY === true, io.env)
    if (options === 'help' || options === 'commands') {
      // No command at all is a usage error: the commands, on stderr, and status 2.
      if (args.length === 0) {
        note(COMMANDS_HELP)
        return 2
      }
      write(options === 'help' ? HELP : COMMANDS_HELP)
      return 0
    }
    // Reading a terminal waits for typed input: say so, or it looks like a hang.
    if (options.file === null && io.stdinIsTTY)
      note(
        `harmony-stream: waiting for ${options.text ? 'Harmony text' : 'token ids'} on stdin; end with ${END_OF_INPUT} (or give a file: harmony-stream inspect <file>)`,
      )
    const input = options.file === null ? io.stdin() : readFileSync(options.file, 'utf8')
    completions = options.text ? [readText(input)] : readCompletions(input)
  } catch (error) {
    if (!(error instanceof UsageError) && !(error as NodeJS.ErrnoException).code) throw error
    note(`harmony-stream: ${(error as Error).message}`)
    return 2
  }
  const { color } = options
  const parserOptions = { role: options.role, strict: options.strict, implementation: options.implementation }
  let status = 0
  for (const [n, tokens] of completions.entries()) {
    const events = options.events
    const heading = paint(
      color,
      '\x1b[1m',
      `── completion ${n} (${typeof tokens === 'string' ? `${tokens.length} characters` : `${tokens.length} tokens`})`,
    )
    if (completions.length > 1) (events ? note : write)(heading)
    const input = typeof tokens === 'string' ? ('text' as const) : ('tokens' as const)
    if (events !== null) {
      const stream =
        events === 'chat'
          ? new ChatCompletionsStream({
              model: 'harmony-stream-inspect',
              id: `chatcmpl-inspect${n}`,
              created: 0,
              includeUsage: true,
              parser: parserOptions,
              input,
            })
          : new ResponsesStream({ model: 'harmony-stream-inspect', id: `resp_inspect${n}`, createdAt: 0, parser: parserOptions, input })
      try {
        for (const event of [...stream.push(tokens), ...stream.finish()]) write(JSON.stringify(event))
      } catch (error) {
        if (!(error instanceof HarmonyParseError)) throw error
        note(paint(color, ERROR, `✖ ${error.code} at token ${error.tokenOffset}: ${error.message}`))
        status = 1
      }
      for (const d of stream.diagnostics) note(paint(color, WARN, `! ${d.code}: ${d.message}`))
      continue
    }
    const parser = typeof tokens === 'string' ? new HarmonyTextParser(parserOptions) : new HarmonyStreamParser(parserOptions)
    const diagnostics: HarmonyDiagnostic[] = []
    try {
      const first = parser instanceof HarmonyTextParser ? parser.push(tokens as string) : parser.push(tokens as number[])
      diagnostics.push(...first.diagnostics, ...parser.finish().diagnostics)
    } catch (error) {
      if (!(error instanceof HarmonyParseError)) throw error
      write(paint(color, ERROR, `✖ ${error.code} at token ${error.tokenOffset}: ${error.message}`))
      status = 1
    }
    for (const message of parser.messages) {
      const tint = message.recipient ? TOOL : (COLORS[message.channel ?? ''] ?? '')
      write(paint(color, tint, visible(describe(message), color)))
      write(paint(color, tint, visible(message.content, color).replace(/^/gm, '  ')))
    }
    for (const d of diagnostics) write(paint(color, WARN, `! ${d.code} at token ${d.tokenOffset}: ${d.message}`))
  }
  return status
}
