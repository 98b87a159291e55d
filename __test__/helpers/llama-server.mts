/**
 * A real llama.cpp server for the engine integration tests: the binary and the bigram model that
 * scripts/llama-server.mjs builds (outside the repository), started on a free 127.0.0.1 port.
 *
 * The model's next id depends only on the current one (scripts/make-bigram-model.py): a test picks what it
 * generates by the last id of its prompt, from the named chains of the model's sidecar (`model.chains`), and
 * can compute greedy continuations from its edges (`model.greedy`).
 *
 * Not built: the tests skip, with a note saying how to build (`npm run test:engines`). Under CI
 * (process.env.CI) a missing build is a failure instead.
 *
 * To extend (constrained decoding, prefix cache, …): add a chain in make-bigram-model.py (its hash names the
 * model, so the next run rebuilds it), and pass server flags through `startLlamaServer({ args })`.
 */

import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { once } from 'node:events'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type test from 'ava'
import { type Engine, type GenerateRequest, LlamaCppEngine } from 'harmony-stream/engines'

const root = join(import.meta.dirname, '..', '..')

export interface LlamaBuild {
  server: string
  model: string
  chains: string
  /** The model that calls python at every turn (make-bigram-model.py --design tools), and its chains. */
  toolModel: string
  toolChains: string
}

/** One named chain: the prompt's last id that starts it, and the ids greedy decoding then generates. */
interface Chain {
  start: number
  /** Up to and including the first end-of-generation id (nothing more for `cycle` chains). */
  tokens: number[]
  /** Repeated without end after `tokens`. */
  cycle?: number[]
}

interface BigramModel {
  vocabSize: number
  chains: Record<string, Chain>
  /** The successors of `id` with their logits (every other id: logit 0). */
  successors(id: number): [number, number][]
  /** The `count` ids greedy decoding generates after `id` (end-of-generation ids not special-cased). */
  greedy(id: number, count: number): number[]
}

interface Sidecar {
  vocabSize: number
  edges: Record<string, [number, number][]>
  fallback: [number, number][]
  chains: Record<string, Chain>
}

/** What scripts/llama-server.mjs has built, or why the tests cannot run. */
function findLlamaBuild(): { build: LlamaBuild } | { missing: string } {
  const check = spawnSync(process.execPath, [join(root, 'scripts', 'llama-server.mjs'), '--check'], { encoding: 'utf8' })
  if (check.status !== 0) return { missing: `scripts/llama-server.mjs --check failed: ${check.stderr.trim()}` }
  const found = JSON.parse(check.stdout) as Record<keyof LlamaBuild, string | null>
  const absent = (Object.keys(found) as (keyof LlamaBuild)[]).filter((key) => found[key] === null)
  if (absent.length > 0) return { missing: `not built (${absent.join(', ')}): run \`npm run test:engines\`, which builds them` }
  return { build: found as LlamaBuild }
}

/**
 * The build, or null where it is missing (with a note on stderr, once); under CI a missing build throws, so
 * the test file fails instead of skipping.
 */
export function llamaBuildOrSkip(): LlamaBuild | null {
  const found = findLlamaBuild()
  if ('build' in found) return found.build
  if (process.env.CI) throw new Error(`llama-server tests cannot run under CI: ${found.missing}`)
  console.warn(`llama-server tests skipped: ${found.missing}`)
  return null
}

function loadModel(build: LlamaBuild): BigramModel {
  const sidecar = JSON.parse(readFileSync(build.chains, 'utf8')) as Sidecar
  const successors = (id: number) => sidecar.edges[String(id)] ?? sidecar.fallback
  return {
    vocabSize: sidecar.vocabSize,
    chains: sidecar.chains,
    successors,
    greedy(id, count) {
      const ids: number[] = []
      for (let current = id; ids.length < count; ) {
        // The highest logit; ties (none in the model) would go to the lowest id, as llama.cpp's greedy sampler.
        const [next] = successors(current).reduce((best, edge) =>
          edge[1] > best[1] || (edge[1] === best[1] && edge[0] < best[0]) ? edge : best,
        )
        ids.push(next)
        current = next
      }
      return ids
    },
  }
}

export interface LlamaServerOptions {
  /** Total context (KV cache) in tokens; each slot gets ctxSize / parallel. Default 4096 (512 a slot). */
  ctxSize?: number
  /** Slots (sequences decoded together). Default 8. */
  parallel?: number
  /** CPU threads. Default 1: the machine's other core is the test's. */
  threads?: number
  /** More llama-server flags. */
  args?: string[]
}

export interface LlamaServer {
  /** Base URL, e.g. http://127.0.0.1:41234 */
  url: string
  /** Context per slot. */
  slotContext: number
  model: BigramModel
  /** `GET /slots`: one object per slot (`id`, `is_processing`, `next_token: [{n_decoded, n_remain, …}]`, …). */
  slots(): Promise<Record<string, unknown>[]>
  /** POST `path` with a JSON body; the status and the parsed JSON (or the text). */
  post(path: string, body: unknown): Promise<{ status: number; json: unknown }>
  /** What the server wrote to stderr so far (for failure messages). */
  log(): string
  close(): Promise<void>
}

/** Starts llama-server with the bigram model on a port of its choosing (`--port 0`) and waits for /health. */
export async function startLlamaServer(build: LlamaBuild, options: LlamaServerOptions = {}): Promise<LlamaServer> {
  const ctxSize = options.ctxSize ?? 4096
  const parallel = options.parallel ?? 8
  const args = [
    ['--model', build.model],
    ['--host', '127.0.0.1'],
    ['--port', '0'],
    ['--ctx-size', String(ctxSize)],
    ['--parallel', String(parallel)],
    ['--threads', String(options.threads ?? 1)],
    // Nothing the tests do not use: no web UI, no chat templates (prompts are ids), no warm-up run.
    ['--no-webui', '--no-jinja', '--no-warmup'],
    // Each slot its own ctxSize / parallel (not one pool the slots share), so a slot's limit is fixed.
    ['--no-kv-unified'],
    ['--slots'],
    options.args ?? [],
  ].flat()
  const child = spawn(build.server, args, { stdio: ['ignore', 'ignore', 'pipe'] })
  let log = ''
  child.stderr?.setEncoding('utf8').on('data', (text: string) => {
    log += text
    if (log.length > 1_000_000) log = log.slice(-500_000)
  })
  const exited = once(child, 'exit')
  try {
    const url = await listening(child, () => log)
    return {
      url,
      slotContext: Math.floor(ctxSize / parallel),
      model: loadModel(build),
      slots: async () => (await (await fetch(`${url}/slots`)).json()) as Record<string, unknown>[],
      post: async (path, body) => {
        const response = await fetch(new URL(path, url), {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        })
        const text = await response.text()
        let json: unknown = text
        try {
          json = JSON.parse(text)
        } catch {
          // Not JSON: the text stays.
        }
        return { status: response.status, json }
      },
      log: () => log,
      close: () => stop(child, exited),
    }
  } catch (error) {
    await stop(child, exited)
    throw error
  }
}

/**
 * Resolves once the server's log holds `pattern` (checked as each piece of stderr arrives), with its match;
 * rejects if the server exits first. Events, not polling: a loaded machine only makes it later.
 */
function logMatch(child: ChildProcess, log: () => string, pattern: RegExp, what: string): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    const check = () => {
      const found = pattern.exec(log())
      if (found === null) return
      done()
      resolve(found)
    }
    const exit = () => {
      done()
      reject(new Error(`llama-server exited before ${what}:\n${log()}`))
    }
    // After the listener that keeps the log (added first), so that `log()` already holds this piece.
    const done = () => {
      child.stderr?.off('data', check)
      child.off('exit', exit)
    }
    child.stderr?.on('data', check)
    child.once('exit', exit)
    check()
    if (child.exitCode !== null || child.signalCode !== null) exit()
  })
}

/**
 * The server's address, once it serves: llama-server logs `model loaded`, then `listening on http://…` when its
 * requests are served; /health (200) says so once more.
 */
async function listening(child: ChildProcess, log: () => string): Promise<string> {
  const [, url] = await logMatch(child, log, /listening on (http:\/\/127\.0\.0\.1:\d+)/, 'listening')
  const status = await fetch(`${url}/health`).then(
    (response) => response.status,
    () => 0,
  )
  if (status !== 200) throw new Error(`llama-server listens on ${url} but /health answers ${status}:\n${log()}`)
  return url!
}

/** Stops the server (SIGKILL: it keeps nothing worth a graceful end) and waits for it to exit. */
async function stop(child: ChildProcess, exited: Promise<unknown>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  child.kill('SIGKILL')
  await exited
}

/** One real llama-server for a test file: started before its tests (when `build` is there), closed after them. */
export function llamaServerForFile(avaTest: typeof test, build: LlamaBuild | null): () => LlamaServer {
  let server: LlamaServer | undefined
  avaTest.before(async () => {
    if (build) server = await startLlamaServer(build)
  })
  avaTest.after.always(async () => {
    await server?.close()
  })
  return () => server!
}

const TO = 316 // ' to', the first id of the bigram model's `tool` chain
const CHANNEL = 200_005
const CALL = 200_012
const RETURN = 200_002

/**
 * A real llama-server client that starts a call after `<|start|>assistant` and ends it with `<|call|>`, greedy:
 * the bigram model's `tool` chain, which a bias towards ` to` and `<|call|>` and against `<|channel|>` makes it
 * start (its fallback successor of any id off its chains, `<|return|>`, banned). It writes the call's header in
 * a form the reference does not render (` to=functions.get_weather json<|message|>`).
 */
export function callingEngine(url: string): Engine {
  const engine = new LlamaCppEngine({ url })
  return {
    name: 'llamacpp',
    generate: (request: GenerateRequest) =>
      engine.generate({ ...request, temperature: 0, logitBias: { [TO]: 10, [CALL]: 5, [CHANNEL]: -100, [RETURN]: -100 } }),
  }
}
