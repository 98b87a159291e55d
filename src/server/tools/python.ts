/**
 * gpt-oss's `python` tool, run by the gateway: a stateful notebook per session (one response: every call the
 * model makes in it sees the variables of the ones before), behind `PythonRunner`, which an operator can replace
 * (a container runner, a remote service). The one here, `PyodidePython`, runs each session in a child process
 * (python-sandbox.ts): Pyodide, standard library only, no host access (no environment, no file writes, no
 * processes, no way to JavaScript from Python), held to a time limit, a memory limit and an output limit.
 * Whatever goes wrong is told to the model as the tool's output, as a notebook would show it; nothing throws.
 * An error of the code is its output; a call the sandbox could not run (time, memory, a crash) is a failure.
 */
import { type ChildProcess, fork } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { resolveOptional } from '../../base/optional-package'
import { checkOptions, is, type OptionSpec } from '../../base/options'
import { failed, type ToolResult } from './result'

export interface PythonRunner {
  /**
   * Runs `code` in the notebook of `session` (made on first use) and gives what the model sees: what it
   * printed and the value of its last expression, or its error (a `failure` when it could not run). Never rejects.
   */
  run(session: string, code: string): Promise<ToolResult>
  /** The session is over: its state can go. */
  end(session: string): void
  /** Every session ends; runs after this answer that python is closed. */
  close(): Promise<void>
}

export interface PyodidePythonOptions {
  /** One call's time, in ms; past it the session is stopped (its state lost) and the model told. Default 30,000. */
  timeMs?: number
  /** A session's memory (its process's resident size), in MiB; past it, as for time. Default 512. */
  memoryMb?: number
  /** Characters of output the model gets per call; the rest is cut, and it is told. Default 16,384. */
  maxOutputChars?: number
  /** Sessions alive at once; a call for another waits until one ends. Default 4. */
  maxSessions?: number
}

const OPTIONS: OptionSpec = {
  timeMs: is.integer(1),
  memoryMb: is.integer(64),
  maxOutputChars: is.integer(1),
  maxSessions: is.integer(1),
}

/** How often a running call's memory is looked at. */
const MEMORY_CHECK_MS = 200

/**
 * The sandbox's script: python-sandbox.js beside this file once built. Run from the sources (the test suites,
 * under tsx), the built one in dist/ too: the sandbox runs under Node's permission model, which refuses the
 * child process tsx's compiler would start, and granting it would open the sandbox the tests check is closed.
 */
function sandboxFile(): string {
  return __filename.endsWith('.ts')
    ? join(__dirname, '..', '..', '..', 'dist', 'server', 'tools', 'python-sandbox.js')
    : join(__dirname, 'python-sandbox.js')
}

interface Session {
  child: ChildProcess
  /** Resolves when Pyodide is loaded (false: it failed). */
  ready: Promise<boolean>
  /** Calls run one at a time, in order. */
  queue: Promise<unknown>
}

export class PyodidePython implements PythonRunner {
  readonly #options: Required<PyodidePythonOptions>
  readonly #sessions = new Map<string, Session>()
  /** Calls for new sessions waiting for a free place. */
  readonly #waiting: (() => void)[] = []
  readonly #entry: string
  #closed = false

  constructor(options: PyodidePythonOptions = {}) {
    checkOptions(options, OPTIONS, 'PyodidePython')
    this.#options = { timeMs: 30_000, memoryMb: 512, maxOutputChars: 16_384, maxSessions: 4, ...options }
    // Resolved here, so that a missing package is a setup error when the gateway starts, not at the first call.
    this.#entry = resolveOptional('pyodide', 'the python tool (HARMONY_PYTHON=pyodide)')
  }

  async run(session: string, code: string): Promise<ToolResult> {
    const current = this.#closed ? null : (this.#sessions.get(session) ?? (await this.#open(session)))
    if (current === null) return failed('The python tool is not available (the server is shutting down).')
    const result = current.queue.then(() => this.#call(session, current, code))
    current.queue = result
    return result
  }

  end(session: string): void {
    const current = this.#sessions.get(session)
    if (current === undefined) return
    this.#sessions.delete(session)
    current.child.kill('SIGKILL')
    this.#waiting.shift()?.()
  }

  async close(): Promise<void> {
    this.#closed = true
    for (const session of [...this.#sessions.keys()]) this.end(session)
    for (const wake of this.#waiting.splice(0)) wake()
  }

  /** A new session's process, once there is room for one (null when python closed meanwhile). */
  async #open(session: string): Promise<Session | null> {
    while (this.#sessions.size >= this.#options.maxSessions && !this.#closed) await new Promise<void>((wake) => this.#waiting.push(wake))
    if (this.#closed) return null
    const existing = this.#sessions.get(session)
    if (existing !== undefined) return existing
    const sandbox = sandboxFile()
    const child = fork(sandbox, [this.#entry], {
      env: {},
      execArgv: [
        '--experimental-permission',
        `--allow-fs-read=${dirname(this.#entry)}/`,
        `--allow-fs-read=${sandbox}`,
        '--no-warnings',
        '--max-old-space-size=128',
      ],
      stdio: ['ignore', 'ignore', 'ignore', 'ipc'],
      serialization: 'json',
    })
    const ready = new Promise<boolean>((resolve) => {
      child.once('message', (message: { ready?: boolean }) => resolve(message.ready === true))
      child.once('exit', () => resolve(false))
      child.once('error', () => resolve(false))
    })
    const created: Session = { child, ready, queue: Promise.resolve() }
    this.#sessions.set(session, created)
    child.once('exit', () => {
      if (this.#sessions.get(session) === created) this.end(session)
    })
    return created
  }

  /** One call: its output, cut to the limit, or what stopped it. */
  async #call(session: string, current: Session, code: string): Promise<ToolResult> {
    if (!(await current.ready)) {
      this.end(session)
      return failed('The python tool could not start.')
    }
    if (this.#sessions.get(session) !== current) return failed('The python session had ended; its state was lost. Run the code again.')
    const { timeMs, memoryMb, maxOutputChars } = this.#options
    const { output, failure } = await new Promise<ToolResult>((resolve) => {
      const done = (result: ToolResult) => {
        clearTimeout(timer)
        clearInterval(memory)
        current.child.off('message', onMessage).off('exit', onExit)
        resolve(result)
      }
      const stop = (why: string) => {
        this.end(session)
        done(failed(`${why}: the python session was stopped and its state lost.`))
      }
      const onMessage = (message: { output?: string }) => done({ output: message.output ?? '' })
      const onExit = () => done(failed('The python session ended unexpectedly; its state was lost.'))
      const timer = setTimeout(() => stop(`Timed out after ${timeMs / 1000} seconds`), timeMs)
      const memory = setInterval(() => {
        if (residentMb(current.child.pid) > memoryMb) stop(`Used more than ${memoryMb} MiB of memory`)
      }, MEMORY_CHECK_MS)
      current.child.on('message', onMessage).once('exit', onExit)
      current.child.send({ code })
    })
    const shown =
      output.length > maxOutputChars
        ? `${output.slice(0, maxOutputChars)}\n[output cut: ${output.length - maxOutputChars} more characters]`
        : output
    return failure === undefined ? { output: shown } : { output: shown, failure }
  }
}

/** A process's resident memory in MiB, where /proc tells it (Linux); 0 elsewhere (no memory limit there). */
function residentMb(pid: number | undefined): number {
  if (pid === undefined) return 0
  try {
    const pages = Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1])
    return (pages * 4096) / 2 ** 20
  } catch {
    return 0
  }
}
