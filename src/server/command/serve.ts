/**
 * `harmony-stream serve`: the gateway from the command line, as `vllm serve` is for vLLM. Flags and
 * environment variables are one table (environment.ts); a flag wins over its variable. With `--workers N`
 * the port is shared by N processes (node:cluster), which the primary keeps running.
 *
 * Shutdown (SIGTERM, SIGINT): the server stops accepting at once, what runs may finish for
 * `--shutdown-grace-ms`, what still runs then ends with its API's error (`GatewayServer.shutdown`), and the store
 * is closed before the process exits.
 */
import cluster from 'node:cluster'
import { randomBytes } from 'node:crypto'
import type { Server } from 'node:http'
import { availableParallelism } from 'node:os'

import { implementation } from '../../backend/choose'
import { HarmonySetupError } from '../../base/errors'
import { didYouMean } from '../../base/options'
import { closeServer, delay } from '../../http/server'
import { createGateway, type GatewayServer, rootBaseLines } from '../gateway/create-gateway'
import { serveClusterMetrics } from '../observe/cluster-metrics'
import { ENGINE_KINDS, probeEngine } from './engine-kind'
import { engineUrls, SETTINGS, type ServeSettings, SettingError, serveSettings } from './environment'

export const SERVE_HELP = `Usage: harmony-stream serve [options]

Serves an OpenAI-compatible gateway (Chat Completions, Responses, its WebSocket mode) for gpt-oss in front
of a token-level inference engine. Every option is also an environment variable; a flag wins over it.

Options (environment variable in brackets):
${SETTINGS.map((s) => {
  const flag = s.flag === null ? '(environment only)' : `${s.flag}${s.value ? ` ${s.value}` : ''}`
  return `  ${flag.padEnd(30)} ${s.help} [${s.env}]`
}).join('\n')}
  -h, --help                     this text

Examples:
  harmony-stream serve --engine replay --port 0
  harmony-stream serve --engine vllm --engine-url http://127.0.0.1:8000 --engine-model openai/gpt-oss-20b

Exit status: 0 after a clean shutdown, 2 on a bad option.`

const FLAGS = [...SETTINGS.flatMap((s) => (s.flag === null ? [] : [s.flag])), '--help']

/** The environment the flags stand for, over `env`; 'help' for -h/--help. */
function environmentOf(args: readonly string[], env: Record<string, string | undefined>): Record<string, string | undefined> | 'help' {
  const out = { ...env }
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === '-h' || arg === '--help') return 'help'
    const [name, inline] = arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined]
    const setting = SETTINGS.find((s) => s.flag === name)
    if (setting === undefined)
      throw new SettingError(`unknown option ${JSON.stringify(name)}${didYouMean(name, FLAGS)}; harmony-stream serve --help lists them`)
    if (setting.switch !== undefined) {
      if (inline !== undefined) throw new SettingError(`${name} takes no value`)
      out[setting.env] = setting.switch
      continue
    }
    const value = inline ?? args[++i]
    if (value === undefined || (inline === undefined && value.startsWith('--')))
      throw new SettingError(`${name} needs a value: ${setting.value}`)
    out[setting.env] = value
  }
  return out
}

interface Io {
  stdout: NodeJS.WritableStream
  stderr: NodeJS.WritableStream
}

/** Runs the command; resolves with the exit status once the process is serving (or could not). */
export async function serve(args: readonly string[], io: Io = process, env = process.env): Promise<number> {
  try {
    const environment = environmentOf(args, env)
    if (environment === 'help') {
      io.stdout.write(`${SERVE_HELP}\n`)
      return 0
    }
    const named = await chooseEngine(environment)
    // Every other setting is checked first (as the replay engine's), so that one run names every problem it can.
    const settings = serveSettings(named ? environment : { ...environment, HARMONY_ENGINE: 'replay' }, availableParallelism())
    if (!named)
      throw new SettingError(
        'no engine: --engine-url URL of a vLLM, SGLang, llama.cpp or TensorRT-LLM server (its kind is asked of it), or --engine replay for recorded completions',
      )
    if (settings.workers > 1 && cluster.isPrimary) {
      superviseWorkers(settings, environment, io)
      return 0
    }
    await listen(settings, io, cluster.isWorker ? ` [worker ${process.pid}]` : '')
    return 0
  } catch (error) {
    if (!isSetupProblem(error)) throw error
    io.stderr.write(`harmony-stream serve: ${(error as Error).message}\n`)
    return SETUP_FAILED
  }
}

/**
 * The engine's kind when an engine URL comes without `--engine`: asked of the server (engine-kind.ts), or a setup
 * problem that names `--engine`. False when nothing names an engine, which `serve` refuses: recorded completions
 * (`--engine replay`, or a `--replay` file) only when asked for, never in place of an engine the operator forgot to
 * name. `--workers` children get the kind found here with the rest of the environment.
 */
async function chooseEngine(environment: Record<string, string | undefined>): Promise<boolean> {
  if (environment.HARMONY_ENGINE) return true
  // A replay file names the replay engine.
  if (environment.HARMONY_REPLAY) {
    environment.HARMONY_ENGINE = 'replay'
    return true
  }
  const urls = engineUrls(environment).filter((url) => url !== '')
  if (urls.length === 0) return false
  const probes = await Promise.all(urls.map((url) => probeEngine(url)))
  const kinds = new Set<string>()
  for (const [i, probe] of probes.entries()) {
    if (probe.kind === null)
      throw new SettingError(`the engine at ${urls[i]} could not be told (${probe.why}): name it with --engine ${ENGINE_KINDS.join(' | ')}`)
    kinds.add(probe.kind)
  }
  if (kinds.size > 1) throw new SettingError(`the engine URLs are different engines (${[...kinds].join(', ')}): one kind per gateway`)
  const kind = [...kinds][0]!
  environment.HARMONY_ENGINE = kind
  // vLLM and TensorRT-LLM are asked for the model by name (trtllm-serve requires it): the one the server lists.
  const served = probes[0]!.kind !== null ? probes[0]!.model : null
  if ((kind === 'vllm' || kind === 'trtllm') && !environment.ENGINE_MODEL && served !== null) environment.ENGINE_MODEL = served
  return true
}

/**
 * What `serve` reports in one line and exit status 2 instead of a stack: a bad flag or variable, a bad option, a
 * missing optional package (the default SQLite store without node-sqlite3-wasm), a port that cannot be bound.
 */
function isSetupProblem(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code
  return (
    error instanceof SettingError ||
    error instanceof HarmonySetupError ||
    code === 'invalid-option' ||
    code === 'EADDRINUSE' ||
    code === 'EACCES' ||
    code === 'EADDRNOTAVAIL' ||
    code === 'ENOTFOUND'
  )
}

/**
 * The primary of `--workers N`: forks them with the settings it checked (the flags as variables, one compaction
 * key for all, so any opens another's) and replaces one that dies. A worker that exits 2 could not set up (its
 * one-line reason is on stderr): every other would fail alike, so all stop and the primary exits 2. It gathers
 * the workers' metrics for a scrape that reaches any of them (observe/cluster-metrics.ts).
 */
function superviseWorkers(settings: ServeSettings, environment: Record<string, string | undefined>, io: Io): void {
  const compactionKey = environment.HARMONY_COMPACTION_KEY || randomBytes(32).toString('hex')
  const fork = () => cluster.fork({ ...environment, HARMONY_COMPACTION_KEY: compactionKey })
  serveClusterMetrics()
  for (let i = 0; i < settings.workers; i++) fork()
  let stopping = false
  const stopAll = () => {
    stopping = true
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM')
  }
  cluster.on('exit', (worker, code, signal) => {
    if (stopping || code === 0 || signal === 'SIGTERM' || signal === 'SIGINT') return
    if (code === SETUP_FAILED) {
      process.exitCode = SETUP_FAILED
      stopAll()
      return
    }
    io.stderr.write(`harmony-stream gateway: worker ${worker.process.pid} exited (${signal ?? code}); starting another\n`)
    fork()
  })
  for (const name of ['SIGTERM', 'SIGINT'] as const) process.once(name, stopAll)
  watchLauncher(stopAll)
}

/** The exit status of a setup problem (a bad setting, a missing package, a port that cannot be bound). */
const SETUP_FAILED = 2

/**
 * Stops `server` as an operator wants on SIGTERM: it stops accepting at once (idle keep-alive connections close
 * now), running requests may finish for `graceMs`, and whatever is still open then is cut. A gateway's server
 * (`createGateway`) ends its own way (`GatewayServer.shutdown`): after the grace period every stream still open
 * ends with its API's error event, WebSocket turns with `response.failed`, background responses are kept
 * failed, all saying the gateway shut down; only what is open after that is cut. Resolves once the server has
 * closed (and a gateway's work has settled: the responses of stopped requests kept).
 */
export async function closeGracefully(server: Server, graceMs: number): Promise<void> {
  const gateway = server as Partial<GatewayServer>
  if (typeof gateway.shutdown === 'function') return gateway.shutdown(graceMs)
  await closeServer(server, delay(graceMs))
}

async function listen(settings: ServeSettings, io: Io, label: string): Promise<void> {
  const options = settings.options()
  const store = options.responses?.store ?? null
  const server = createGateway(options)
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(settings.port, settings.host, () => {
        server.off('error', reject)
        resolve()
      })
    })
  } catch (error) {
    // Nothing listens: release what the gateway and the store hold, then report.
    server.close()
    await server.settled()
    await store?.close()
    throw error
  }
  const address = server.address()
  const port = typeof address === 'object' && address !== null ? address.port : settings.port
  const host = settings.host.includes(':') ? `[${settings.host}]` : settings.host
  let stopping = false
  const stop = (why: string) => {
    if (stopping) return
    stopping = true
    io.stdout.write(
      `harmony-stream gateway: shutting down (${why}): no new connections; running requests have ${settings.shutdownGraceMs} ms${label}\n`,
    )
    closeGracefully(server, settings.shutdownGraceMs)
      .then(() => store?.close())
      .then(
        () => {
          io.stdout.write(`harmony-stream gateway: shut down${label}\n`)
          process.exit(0)
        },
        (error) => {
          io.stderr.write(`harmony-stream gateway: shutting down: ${error}\n`)
          process.exit(1)
        },
      )
  }
  // Before the line that says the gateway listens: a signal that comes with no handler yet kills the process.
  process.once('SIGTERM', () => stop('SIGTERM'))
  process.once('SIGINT', () => stop('SIGINT'))
  watchLauncher(() => stop('its launcher exited'))
  const { kind, urls } = settings.engine
  const engine = kind === 'replay' ? 'the replay engine (recorded completions)' : `the ${kind} engine at ${urls.join(', ')}`
  io.stdout.write(
    `harmony-stream gateway on http://${host}:${port}/v1 (${implementation} parser, ${engine}, responses kept in ${settings.storeWhere})${label}\n`,
  )
  // Clients of other APIs that take the root rather than /v1 (each API's folder says which).
  for (const line of rootBaseLines(`http://${host}:${port}`)) io.stdout.write(`${line}\n`)
  if (kind !== 'replay') void warnOfEngine(kind, urls, io)
}

/**
 * Started by npm (`npx harmony-stream serve`, `npm run gateway`), the gateway is npm's child, and npm does not pass
 * on the SIGTERM a supervisor sends it: npm exits and the gateway would go on listening, reparented. So under npm
 * the gateway watches its parent, and shuts down as on SIGTERM when it is gone. Not otherwise: a gateway started
 * in the background by a shell (`nohup … &`) is meant to outlive it. The check is one cheap read a second, on a
 * timer that does not keep the process alive.
 */
function watchLauncher(stop: () => void): void {
  if (process.env.npm_execpath === undefined || cluster.isWorker) return
  const launcher = process.ppid
  const watch = setInterval(() => {
    if (process.ppid === launcher) return
    clearInterval(watch)
    stop()
  }, LAUNCHER_CHECK_MS)
  watch.unref()
}

const LAUNCHER_CHECK_MS = 1000

/**
 * Asks each engine once, after the gateway listens, whether it is there and what it is: an operator reads in one
 * warning line that requests will fail, rather than in the first client's 502.
 */
async function warnOfEngine(kind: string, urls: readonly string[], io: Io): Promise<void> {
  for (const url of urls) {
    const probe = await probeEngine(url)
    if (probe.kind === null)
      io.stderr.write(`harmony-stream gateway: warning: the engine at ${url}: ${probe.why}; requests fail until it answers\n`)
    else if (probe.kind !== kind)
      io.stderr.write(`harmony-stream gateway: warning: the engine at ${url} is ${probe.kind}, not ${kind} (--engine)\n`)
  }
}
