/**
 * Claude Code (the npm package `@anthropic-ai/claude-code` 2.1.332, its own binary) against the gateway with its
 * defaults, through Anthropic's Messages API (issue 35). Claude Code sends, every request, `POST
 * /v1/messages?beta=true` streamed, with adaptive thinking shown `omitted`, `context_management`, `output_config`,
 * a `role: 'system'` message inside `messages` (with its own `output_config`), a billing header as its first
 * system block, a dozen tools whose schemas carry `$schema` (one with `defer_loading`) and its own model name.
 * `claude -p` prints the stand-in's answer; a second run goes through a Bash tool loop, Claude Code running the
 * command and sending back the result with the thinking block it was given (a signature only).
 *
 * Claude Code is told to reach nothing but 127.0.0.1: no telemetry, no error reports, no update check, no
 * non-essential traffic, no retries.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import test, { type ExecutionContext } from 'ava'
import type { Engine } from 'harmony-stream/engines'
import { createGateway } from 'harmony-stream/server'

import { childOutput } from '../helpers/child-output.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { scripted } from '../helpers/scripted-engine.mjs'
import { decodeTokens } from '../helpers/token-bytes.mjs'

const CLAUDE = fileURLToPath(new URL('../../node_modules/.bin/claude', import.meta.url))

interface ClaudeRun {
  code: number | null
  result: Record<string, unknown> | null
  stdout: string
  stderr: string
}

/** `claude -p PROMPT --output-format json` with the gateway as its API, in a fresh home and working folder. */
function claude(baseUrl: string, prompt: string, flags: string[] = []): Promise<ClaudeRun> {
  const home = mkdtempSync(join(tmpdir(), 'harmony-claude-home-'))
  const child = spawn(CLAUDE, ['-p', prompt, '--output-format', 'json', ...flags], {
    cwd: home,
    env: {
      PATH: process.env.PATH,
      HOME: home,
      TERM: 'dumb',
      ANTHROPIC_BASE_URL: baseUrl,
      ANTHROPIC_API_KEY: 'sk-unused',
      DISABLE_TELEMETRY: '1',
      DISABLE_ERROR_REPORTING: '1',
      DISABLE_AUTOUPDATER: '1',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      CLAUDE_CODE_MAX_RETRIES: '0',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  return childOutput(child).then(({ code, stdout, stderr }) => {
    rmSync(home, { recursive: true, force: true })
    const line = stdout.split('\n').find((text) => text.startsWith('{'))
    return { code, result: line === undefined ? null : (JSON.parse(line) as Record<string, unknown>), stdout, stderr }
  })
}

/** The gateway with its defaults (and `options`); what it logged as errors, as not applied, and its answers' statuses. */
async function gateway(t: ExecutionContext, engine: Engine, options: Record<string, unknown> = {}) {
  const errors: unknown[] = []
  const notApplied = new Set<string>()
  const server = createGateway({
    ...options,
    engine,
    onError: (error) => errors.push(error),
    onDiagnostic: ({ code, message }) => {
      if (code === 'not-applied') notApplied.add(message.split(':')[0]!)
    },
  })
  const statuses: number[] = []
  server.on('request', (_request, response) => response.once('finish', () => statuses.push(response.statusCode)))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, errors, notApplied, statuses }
}

test('claude -p "say hi" prints the stand-in\'s answer through the gateway with its defaults', async (t) => {
  t.timeout(180_000, 'claude -p did not finish')
  const { engine, prompts } = scripted(
    () => '<|channel|>analysis<|message|>Greet back.<|end|><|start|>assistant<|channel|>final<|message|>Hi from gpt-oss.<|return|>',
  )
  const { baseUrl, errors, notApplied, statuses } = await gateway(t, engine)
  const run = await claude(baseUrl, 'say hi')
  const summary = JSON.stringify({ code: run.code, stdout: run.stdout.slice(-2000), stderr: run.stderr.slice(-2000), statuses })
  t.is(run.code, 0, summary)
  t.is(run.result?.is_error, false, summary)
  t.is(run.result?.result, 'Hi from gpt-oss.', summary)
  t.deepEqual(errors, [])
  t.deepEqual(statuses, [200], 'one request, served')
  // Its system prompt and tools reached the prompt; what gpt-oss cannot do was taken and said.
  const prompt = decodeTokens(prompts[0]!)
  t.regex(prompt, /type Bash = \(_: \{/)
  t.notRegex(prompt, /x-anthropic-billing-header/)
  t.true(notApplied.has('context_management'), [...notApplied].join(', '))
})

test('Claude Code runs a Bash tool loop through the gateway: the call, the result, the thinking sent back', async (t) => {
  t.timeout(180_000, 'claude -p did not finish')
  // Calls Bash until the prompt holds its result; then answers with what it printed.
  const { engine, prompts } = scripted((prompt) => {
    const result = /<\|start\|>functions\.Bash to=assistant<\|channel\|>commentary<\|message\|>([\s\S]*?)<\|end\|>/.exec(prompt)
    if (result !== null)
      return `<|channel|>analysis<|message|>It ran.<|end|><|start|>assistant<|channel|>final<|message|>The command printed ${result[1]!.trim()}.<|return|>`
    return '<|channel|>analysis<|message|>Run the echo.<|end|><|start|>assistant<|channel|>commentary to=functions.Bash <|constrain|>json<|message|>{"command":"echo claude-ran","description":"Print a word"}<|call|>'
  })
  const { baseUrl, errors, statuses } = await gateway(t, engine)
  const run = await claude(baseUrl, 'Run echo claude-ran and tell me what it printed.', ['--allowedTools', 'Bash'])
  const summary = JSON.stringify({ code: run.code, stdout: run.stdout.slice(-2000), stderr: run.stderr.slice(-2000), statuses })
  t.is(run.code, 0, summary)
  t.is(run.result?.result, 'The command printed claude-ran.', summary)
  t.is(run.result?.num_turns, 2, summary)
  t.deepEqual(errors, [])
  t.deepEqual(statuses, [200, 200])
  // The second prompt: the reasoning Claude Code was shown only as a signature, the call as the model wrote it
  // (the ids it generated, by default), the command's output.
  t.is(prompts.length, 2)
  t.regex(
    decodeTokens(prompts[1]!),
    /<\|channel\|>analysis<\|message\|>Run the echo\.<\|end\|><\|start\|>assistant<\|channel\|>commentary to=functions\.Bash <\|constrain\|>json<\|message\|>\{"command":"echo claude-ran","description":"Print a word"\}<\|call\|><\|start\|>functions\.Bash to=assistant<\|channel\|>commentary<\|message\|>claude-ran/,
  )
})

test("by default, Claude Code's tool loop is prompted with the exact ids the engine generated", async (t) => {
  t.timeout(180_000, 'claude -p did not finish')
  // The model spaces its JSON as a re-render would not: only the ids it generated keep the prefix.
  const call =
    '<|channel|>analysis<|message|>Run the echo.<|end|><|start|>assistant<|channel|>commentary to=functions.Bash <|constrain|>json<|message|>{"command": "echo claude-ran", "description": "Print a word"}<|call|>'
  const { engine, prompts } = scripted((prompt) =>
    prompt.includes('<|start|>functions.Bash to=assistant') ? '<|channel|>final<|message|>Done.<|return|>' : call,
  )
  const { baseUrl, errors } = await gateway(t, engine)
  const run = await claude(baseUrl, 'Run echo claude-ran.', ['--allowedTools', 'Bash'])
  t.is(run.result?.result, 'Done.', JSON.stringify({ code: run.code, stdout: run.stdout.slice(-2000), stderr: run.stderr.slice(-2000) }))
  t.deepEqual(errors, [])
  const [first, second] = prompts as [number[], number[]]
  const generated = harmony(call)
  t.deepEqual(second.slice(0, first.length + generated.length), [...first, ...generated])
  t.regex(
    decodeTokens(second.slice(first.length + generated.length)),
    /^<\|start\|>functions\.Bash to=assistant<\|channel\|>commentary<\|message\|>claude-ran/,
  )
})
