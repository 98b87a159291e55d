/**
 * Codex CLI (the npm package `@openai/codex` 0.171, its own binary) against the gateway with its defaults
 * (issue 29): a provider speaking the Responses API, as docs/CLIENTS.md configures it. Codex sends, every turn,
 * `store: false`, `include: ['reasoning.encrypted_content']`, `client_metadata`, `prompt_cache_key`, a
 * `reasoning.summary`, and tools of types the gateway does not run (`web_search`) beside its functions; it
 * builds its history from `response.output_item.done` and sends it back whole. One `codex exec` runs a shell
 * tool loop: the model calls `exec_command`, Codex runs it, and the next request carries the call, the
 * command's output and the reasoning sealed in the first answer.
 *
 * Codex is told to reach nothing but 127.0.0.1: no analytics, no plugin sync, no update check, no retries.
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

import test, { type ExecutionContext } from 'ava'
import { createGateway } from 'harmony-stream/server'

import { childOutput } from '../helpers/child-output.mjs'
import { recordingEngine } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'
import { decodeTokens } from '../helpers/token-bytes.mjs'

const CODEX = fileURLToPath(import.meta.resolve('@openai/codex/bin/codex.js'))

const CALL = harmony(
  '<|channel|>analysis<|message|>Run the echo.<|end|><|start|>assistant<|channel|>commentary to=functions.exec_command <|constrain|>json<|message|>{"cmd":"echo codex-ran"}<|call|>',
)
const ANSWER = harmony(
  '<|channel|>analysis<|message|>It printed.<|end|><|start|>assistant<|channel|>final<|message|>The command printed codex-ran.<|return|>',
)

interface CodexRun {
  code: number | null
  events: Record<string, unknown>[]
  stderr: string
}

/** `codex exec --json` with a provider at `baseURL`, in a fresh home and working folder; its JSONL events. */
function codexExec(baseURL: string, prompt: string): Promise<CodexRun> {
  const home = mkdtempSync(join(tmpdir(), 'harmony-codex-home-'))
  const work = mkdtempSync(join(tmpdir(), 'harmony-codex-work-'))
  const config = {
    model: 'gpt-oss',
    model_provider: 'harmony',
    'model_providers.harmony.name': 'harmony-stream',
    'model_providers.harmony.base_url': baseURL,
    'model_providers.harmony.env_key': 'HARMONY_API_KEY',
    'model_providers.harmony.request_max_retries': 0,
    'model_providers.harmony.stream_max_retries': 0,
    'analytics.enabled': false,
    check_for_update_on_startup: false,
  }
  const overrides = Object.entries(config).flatMap(([key, value]) => ['-c', `${key}=${JSON.stringify(value)}`])
  const args = ['exec', '--json', '--skip-git-repo-check', '--ephemeral', '--dangerously-bypass-approvals-and-sandbox']
  const child = spawn(process.execPath, [CODEX, ...args, '--disable', 'plugins', ...overrides, prompt], {
    cwd: work,
    env: { ...process.env, CODEX_HOME: home, HARMONY_API_KEY: 'unused' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  return childOutput(child).then(({ code, stdout, stderr }) => {
    rmSync(home, { recursive: true, force: true })
    rmSync(work, { recursive: true, force: true })
    const events = stdout
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
    return { code, events, stderr }
  })
}

/** The gateway with its defaults, serving `completions` in turn; what it logged as errors and as not applied. */
async function gateway(t: ExecutionContext, completions: number[][]) {
  const { engine, prompts } = recordingEngine(completions)
  const errors: unknown[] = []
  const notApplied = new Set<string>()
  const server = createGateway({
    engine,
    onError: (error) => errors.push(error),
    onDiagnostic: ({ code, message }) => {
      if (code === 'not-applied') notApplied.add(message.split(':')[0]!)
    },
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, prompts, errors, notApplied }
}

test('Codex CLI runs a shell tool loop through the gateway with its defaults', async (t) => {
  t.timeout(180_000, 'codex exec did not finish')
  const { baseURL, prompts, errors, notApplied } = await gateway(t, [CALL, ANSWER])
  const run = await codexExec(baseURL, 'Run echo codex-ran and tell me what it printed.')
  const items = run.events.filter((event) => event.type === 'item.completed').map((event) => event.item as Record<string, unknown>)
  const summary = JSON.stringify({ code: run.code, events: run.events, stderr: run.stderr.slice(-3000) })
  t.is(run.code, 0, summary)
  t.deepEqual(errors, [])
  // Codex ran the call the model made, and showed the answer the model gave after it.
  const command = items.find((item) => item.type === 'command_execution')
  t.regex(String(command?.command), /echo codex-ran/, summary)
  t.regex(String(command?.aggregated_output), /codex-ran/, summary)
  t.is(items.find((item) => item.type === 'agent_message')?.text, 'The command printed codex-ran.', summary)
  t.true(
    run.events.some((event) => event.type === 'turn.completed'),
    summary,
  )
  // Its reasoning setting asks for a summary: the raw reasoning reached Codex as one.
  t.true(
    items.some((item) => item.type === 'reasoning' && String(item.text).includes('Run the echo.')),
    summary,
  )
  // The second request was prompted with the first answer's reasoning (Codex sent it back sealed), the call, and
  // the command's output.
  t.is(prompts.length, 2)
  t.regex(decodeTokens(prompts[1]!), /<\|channel\|>analysis<\|message\|>Run the echo\.<\|end\|>.*to=functions\.exec_command.*codex-ran/s)
  // Token for token: the first prompt, the ids the engine generated, then the command's output (the call id cache,
  // on by default: Codex keeps nothing on the gateway and sends its history back whole).
  const [first, second] = prompts as [number[], number[]]
  t.deepEqual(second.slice(0, first.length + CALL.length), [...first, ...CALL])
  t.regex(decodeTokens(second.slice(first.length + CALL.length)), /^<\|start\|>functions\.exec_command to=assistant.*codex-ran/s)
  // What Codex offers that gpt-oss cannot use was left out and said, not refused.
  t.true(
    [...notApplied].some((param) => param.startsWith('tools[')),
    [...notApplied].join(', '),
  )
  // Its grouped tools are a Harmony namespace of their own.
  t.regex(decodeTokens(prompts[0]!), /## multi_agent_v1\n[\s\S]*namespace multi_agent_v1 \{[\s\S]*type close_agent = /)
})

test("Codex CLI routes a call to a tool of its namespace back to that tool (Harmony's namespaces, OpenAI's namespace field)", async (t) => {
  t.timeout(180_000, 'codex exec did not finish')
  const close = harmony(
    '<|channel|>analysis<|message|>Close it.<|end|><|start|>assistant<|channel|>commentary to=multi_agent_v1.close_agent <|constrain|>json<|message|>{"target":"bogus"}<|call|>',
  )
  const { baseURL, prompts, errors } = await gateway(t, [close, ANSWER])
  const run = await codexExec(baseURL, 'Close agent bogus.')
  const summary = JSON.stringify({ code: run.code, events: run.events, stderr: run.stderr.slice(-3000) })
  t.is(run.code, 0, summary)
  t.deepEqual(errors, [])
  t.is(prompts.length, 2, summary)
  // Codex ran its own close_agent (which refuses an id that is none), not "unsupported call": the call came
  // back to it with its namespace; and its result went to the model from that tool.
  const second = decodeTokens(prompts[1]!)
  t.regex(second, /to=multi_agent_v1\.close_agent.*\{"target":"bogus"\}<\|call\|>/s)
  t.regex(second, /<\|start\|>multi_agent_v1\.close_agent to=assistant<\|channel\|>commentary<\|message\|>[^<]*bogus/)
  t.notRegex(second, /unsupported call/)
})
