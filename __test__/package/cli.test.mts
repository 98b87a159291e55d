/** `harmony-stream inspect`: the command a gateway engineer points at a captured completion. */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

import test from 'ava'

import { harmony } from '../helpers/harmony.mjs'

const root = join(import.meta.dirname, '..', '..')
const bin = join(root, 'bin', 'harmony-stream.cjs')
const dir = mkdtempSync(join(tmpdir(), 'harmony-cli-'))
const completion = harmony(
  '<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a":1}<|call|>',
)

function cli(args: string[], input?: string) {
  return spawnSync(process.execPath, [bin, ...args], { cwd: root, encoding: 'utf8', input, env: { ...process.env, NO_COLOR: '' } })
}

test('inspect prints each message with its header, plain when not a terminal', (t) => {
  const file = join(dir, 'one.json')
  writeFileSync(file, JSON.stringify(completion))
  const run = cli(['inspect', file])
  t.is(run.status, 0, run.stderr)
  t.is(run.stdout, 'assistant [analysis] (end)\n  Think.\nassistant [commentary] to=functions.f <json> (call)\n  {"a":1}\n')
  t.false(run.stdout.includes('\x1b['), 'no colour codes when piped')
  // Whitespace-separated ids on stdin give the same.
  t.is(cli(['inspect'], completion.join(' ')).stdout, run.stdout)
})

test('inspect reads replay files, highlights diagnostics, and colours channels on a terminal', async (t) => {
  const file = join(dir, 'replay.json')
  writeFileSync(file, JSON.stringify([{ tokens: completion }, { tokens: harmony('<|channel|>final<|message|>cut') }]))
  const run = cli(['inspect', file])
  t.regex(run.stdout, /── completion 0 \(\d+ tokens\)/)
  t.regex(run.stdout, /assistant \[final\] \(end of stream\)\n {2}cut/)
  const { run: runCli } = (await import(join(root, 'dist', 'cli.js'))) as { run: (args: string[], io: object) => number }
  let out = ''
  const status = runCli(['inspect'], {
    stdout: { isTTY: true, write: (s: string) => (out += s) },
    stdin: () => harmony('<|channel|>final<|message|>x<|return|>junk').join(' '),
    env: {},
  })
  t.is(status, 0)
  t.true(out.includes('\x1b[32massistant [final]'), 'final in green')
  t.true(out.includes('\x1b[1;33m! stray-tokens at token '), 'diagnostics in bold yellow')
  t.regex(out, /! stray-tokens at token \d+/)
})

test('inspect --events chat|responses prints the wire events as JSON lines', (t) => {
  const file = join(dir, 'events.json')
  writeFileSync(file, JSON.stringify(completion))
  const chat = cli(['inspect', '--events', 'chat', file])
    .stdout.trim()
    .split('\n')
    .map((line) => JSON.parse(line))
  t.is(chat.at(-2).choices[0].finish_reason, 'tool_calls')
  t.is(chat.find((c) => c.choices[0]?.delta.tool_calls)?.choices[0].delta.tool_calls[0].function.name, 'f')
  const events = cli(['inspect', '--events', 'responses', file])
    .stdout.trim()
    .split('\n')
    .map((line) => JSON.parse(line))
  t.is(events[0].type, 'response.created')
  t.is(events.at(-1).type, 'response.completed')
  // Diagnostics and errors go to stderr, so stdout stays JSON lines.
  const noisy = cli(['inspect', '--events', 'chat'], harmony('<|channel|>final<|message|>x<|return|>junk').join(' '))
  t.notThrows(() =>
    noisy.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line)),
  )
  t.regex(noisy.stderr, /stray-tokens/)
  const strict = cli(['inspect', '--strict', '--events', 'chat'], harmony('<|channel|>final<|message|>x<|return|>junk').join(' '))
  t.is(strict.status, 1)
  t.regex(strict.stderr, /unexpected-token/)
})

test('the command line lists its commands, says its version, and names the flag a misspelling meant', (t) => {
  for (const args of [['--help'], ['-h']]) {
    const help = cli(args)
    t.is(help.status, 0)
    t.regex(help.stdout, /Commands:\n {2}inspect \[file\][^\n]*\n {2}serve /)
  }
  const none = cli([])
  t.is(none.status, 2, 'no command is a usage error')
  t.regex(none.stderr, /Commands:/)
  const version = cli(['--version'])
  t.is(version.status, 0)
  t.is(version.stdout.trim(), JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version)
  t.regex(cli(['serv']).stderr, /unknown command serv \(did you mean serve\?\)/)
  const misspelt = cli(['inspect', '--strikt'])
  t.is(misspelt.status, 2)
  t.regex(misspelt.stderr, /unknown option --strikt \(did you mean --strict\?\)/)
  const serve = cli(['serve', '--engin', 'vllm'])
  t.is(serve.status, 2)
  t.regex(serve.stderr, /unknown option "--engin" \(did you mean --engine\?\)/)
})

test('inspect: help, bad input and strict errors have their exit codes', (t) => {
  const help = cli(['inspect', '--help'])
  t.is(help.status, 0)
  t.regex(help.stdout, /Usage: harmony-stream inspect/)
  t.is(cli(['inspect', '--events', 'xml']).status, 2)
  t.is(cli(['frobnicate']).status, 2)
  t.is(cli(['inspect', '--role', 'robot']).status, 2)
  t.is(
    cli(['inspect'], '200005, 17196, 200008, 13225, 200002,').stdout,
    'assistant [final] (return)\n  Hello\n',
    'a trailing comma is not token 0',
  )
  const bad = cli(['inspect'], '[1, 2, 999999]')
  t.is(bad.status, 2)
  t.regex(bad.stderr, /token 2 is 999999, not a token id \(an integer from 0 to 201088\)/)
  const replayBad = cli(['inspect'], JSON.stringify([{ tokens: [1] }, { tokens: [1, -3] }]))
  t.regex(replayBad.stderr, /completion 1, token 1 is -3/)
  t.notRegex(replayBad.stderr, /--text/, 'the "tokens" keys of a replay file are not text')
  t.regex(cli(['inspect'], JSON.stringify([{ tokens: [1] }, { ids: [2] }])).stderr, /completion 1: expected \{ "tokens": \[\.\.\.\] \}/)
  const words = cli(['inspect'], '200005 hello world')
  t.is(words.status, 2)
  t.regex(words.stderr, /token 1 is "hello", not a token id \(an integer from 0 to 201088\); this looks like text: add --text/)
  t.notRegex(cli(['inspect'], '[1, 2.5]').stderr, /--text/, 'a number is not text')
  const text = cli(['inspect'], '<|channel|>final<|message|>Hello<|return|>')
  t.is(text.status, 2)
  t.regex(text.stderr, /token 0 is "<\|channel\|>final<\|message\|>Hello<\|retur…, not a token id.*add --text/)
  for (const args of [['inspect'], ['inspect', '--text']]) {
    const empty = cli(args, '  \n')
    t.is(empty.status, 2, args.join(' '))
    t.regex(empty.stderr, /^harmony-stream: the input is empty: give token ids/, args.join(' '))
    t.is(empty.stdout, '', args.join(' '))
  }
  t.is(cli(['inspect', join(dir, 'missing.json')]).status, 2)
  const strict = cli(['inspect', '--strict'], harmony('<|channel|>final').join(' '))
  t.is(strict.status, 1)
  t.regex(strict.stdout, /unexpected-eos-in-header/)
})

test('inspect --text reads Harmony text whose markers are text', (t) => {
  const run = cli(
    ['inspect', '--text'],
    '<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a":1}<|call|>',
  )
  t.is(run.status, 0, run.stderr)
  t.is(run.stdout, 'assistant [analysis] (end)\n  Think.\nassistant [commentary] to=functions.f <json> (call)\n  {"a":1}\n')
  const events = cli(['inspect', '--text', '--events', 'chat'], '<|channel|>final<|message|>hi<|return|>')
    .stdout.trim()
    .split('\n')
    .map((l) => JSON.parse(l))
  t.is(events[0].choices[0].delta.content, 'hi')
})

test('inspect on a terminal with no file says on stderr that it waits for input on stdin, and how to end it', async (t) => {
  const { run: runCli } = (await import(join(root, 'dist', 'cli.js'))) as { run: (args: string[], io: object) => number }
  const inspect = (args: string[], stdinIsTTY: boolean) => {
    const out = { stdout: '', stderr: '' }
    const status = runCli(args, {
      stdout: { write: (s: string) => (out.stdout += s) },
      stderr: { write: (s: string) => (out.stderr += s) },
      stdin: () => harmony('<|channel|>final<|message|>Hi<|return|>').join(' '),
      stdinIsTTY,
      env: {},
    })
    return { status, ...out }
  }
  const typed = inspect(['inspect'], true)
  t.is(typed.status, 0)
  const endKey = process.platform === 'win32' ? 'Ctrl-Z then Enter' : 'Ctrl-D'
  t.is(typed.stderr, `harmony-stream: waiting for token ids on stdin; end with ${endKey} (or give a file: harmony-stream inspect <file>)\n`)
  t.is(typed.stdout, 'assistant [final] (return)\n  Hi\n', 'the note stays off stdout')
  t.regex(inspect(['inspect', '--text'], true).stderr, /waiting for Harmony text on stdin/)
  t.is(inspect(['inspect'], false).stderr, '', 'no note when stdin is piped')
  const file = join(dir, 'tty.json')
  writeFileSync(file, JSON.stringify(completion))
  t.is(inspect(['inspect', file], true).stderr, '', 'no note when a file is given')
  t.regex(
    cli(['inspect', '--help']).stdout,
    /when stdin is a terminal, it says so on stderr and waits for ids typed or pasted there, up to Ctrl-D/,
  )
})
