/**
 * Failover mid-stream for an `EngineGroup` (group.ts): a member that fails after the generation's first step is
 * replaced by another, prompted with the original prompt and every id generated so far, so that it goes on
 * with the same generation. The group holds those ids exactly (it passed them on), and a prompt is all an
 * engine's state: the consumer reads one stream, with no id repeated or lost.
 *
 * - What counts as a failure: what fails as a server does (a connection reset, a stream cut, a 5xx, a broken
 *   stream: group.ts `failedAsServer`), and a **stall**: a member that gave ids, then gives none for
 *   `failoverIdleMs` while the group waits on it (heartbeats, steps without ids, do not count). Not its
 *   prefill: how long a prompt takes is the caller's first-token limit's to bound, and after a failover the
 *   caller's idle limit's. Never an abort of the caller's signal, nor a request refused as a request (a 4xx).
 * - Why the group bounds stalls itself: the gateway's time limits (time-limits.ts `limitedSteps`) sit outside
 *   the group and bound the whole request as the client sees it; at their limit they abort the request's
 *   signal, which the group must take as the caller's (it ends everything). So the group has a bound of its own,
 *   per member: on it, it aborts that member's request alone (a signal of its own beside the caller's) and fails
 *   over. The time spent waiting on the consumer is not the member's silence: only the time the group waits on
 *   the member counts. A gateway gives the groups it builds half its `idleMs` (`failoverIdleMs`): a stall is
 *   found halfway, and the next engine has the other half to send its first ids before the gateway's own limit
 *   ends the stream. The clock (`now`) and the timer (`sleep`) are options, so that tests move time themselves.
 * - What the next engine is asked: the same request (sampling, stop ids, signal…) with `tokens` the original
 *   prompt and the ids generated, `maxTokens` less those ids (none left: the generation ends with `length`
 *   without another engine; ids that end with a stop id: it ends with `stop`). Its usage is told as the first
 *   engine would have told it: the prompt without the ids carried, which count as generated. Its steps, their
 *   log probabilities and diagnostics pass on as they come. An `engine-failover` diagnostic (on a step without
 *   ids, before the next engine's) names the engine that failed, the next one and how many ids it was given.
 * - Which engine: the group's own choice among the members not yet tried by this generation (the failed one is
 *   taken out for its cool-down, as before the first step). None healthy (a group of one, or the others out):
 *   the same engine again once, when its cool-down ends. At most `maxFailovers` per generation.
 * - Refused, the failure staying the client's (with an `engine-failover-refused` diagnostic saying why, before
 *   the error): structured outputs (`responseFormat`, `argumentSchemas`, `callArguments`). Their grammars
 *   (constraints.ts) start at a message's header, or at the completion's first token, and follow the message
 *   from there; a prompt that ends inside a constrained message would be followed by a grammar that starts over
 *   (a JSON value from its first character, or a trigger that never comes), so the answer could break its schema.
 *
 * What is the same and what is not: greedy decoding on identical engines gives the same ids as an unbroken
 * generation (the tests check it on two llama-servers). With sampling, the next engine draws its own random
 * stream: a `seed` makes each engine's draws repeatable, not the failover's. Presence and frequency penalties
 * count the ids an engine generated itself: the carried ids are its prompt. Stop ids go with the request;
 * stop strings are applied to the text after the group (the adapters), which is one stream.
 */
import { is, type OptionSpec } from '../base/options'
import { EngineError } from './errors'
import { GENERATION_STOP_TOKENS } from './request'
import type { Engine, EngineStep, EngineUsage, GenerateRequest } from './types'

export interface FailoverOptions {
  /** Go on on another engine after a failure mid-stream. Default true; false: such a failure is the client's. */
  failover?: boolean
  /** Failovers per generation at most. Default 2. */
  maxFailovers?: number
  /**
   * A member that gives no ids for this long while the group waits on it, once it gave some, is taken as
   * failed: its request is aborted and the generation fails over. null (default): no bound of the group's own.
   * Before a member's first ids (its prefill) only the caller's limits count.
   */
  failoverIdleMs?: number | null
  /**
   * The timer: resolves after `ms` (or rejects when `signal` aborts). Default: Node's timers. Tests pass one
   * that their own clock (`now`) drives.
   */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>
}

export const FAILOVER_OPTIONS: OptionSpec = {
  failover: is.boolean,
  maxFailovers: is.integer(0, 100),
  failoverIdleMs: is.nullable(is.integer(1)),
  sleep: is.function,
}

/** The failover settings of a group, defaults applied; null when failover is off. */
export interface FailoverSettings {
  maxFailovers: number
  idleMs: number | null
  now: () => number
  sleep: (ms: number, signal: AbortSignal) => Promise<void>
}

export function failoverSettings(options: FailoverOptions, now: () => number): FailoverSettings | null {
  if (options.failover === false) return null
  return { maxFailovers: options.maxFailovers ?? 2, idleMs: options.failoverIdleMs ?? null, now, sleep: options.sleep ?? sleep }
}

/** The `failoverIdleMs` a gateway gives the groups it builds from its `idleMs`: half of it (see the top). */
export function failoverIdleMsOf(idleMs: number | null): number | null {
  return idleMs === null ? null : Math.max(1, Math.floor(idleMs / 2))
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason)
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', cancel)
      resolve()
    }, ms)
    const cancel = () => {
      clearTimeout(timer)
      reject(signal.reason)
    }
    signal.addEventListener('abort', cancel, { once: true })
  })
}

const NO_IDS = new Uint32Array(0)

/** One generation's failovers: what the next engine is asked, and its steps as the consumer reads them. */
export class Failover {
  /** Failovers so far. */
  private count = 0
  /** Ids generated when the last failover happened (what the engine generating now was given beside the prompt). */
  private carried = 0
  /** The engines tried again after failing (see `mayRetry`). */
  private readonly retried = new Set<string>()

  /** `generated`: the ids passed on, which the group pushes as it passes them. */
  constructor(
    private readonly request: GenerateRequest,
    private readonly generated: readonly number[],
    private readonly settings: FailoverSettings,
  ) {}

  /** Why this generation cannot fail over (again), or null when it can. */
  refusal(): string | null {
    const { request } = this
    if (request.callArguments !== undefined || request.responseFormat !== undefined || request.argumentSchemas !== undefined)
      return 'structured outputs: a grammar cannot resume inside the message it constrains'
    if (this.count >= this.settings.maxFailovers) return `at most ${this.settings.maxFailovers} failovers per generation (maxFailovers)`
    return null
  }

  /**
   * The generation's last step when it needs no other engine: its ids end with a stop id (the engine failed
   * after its last id), or they used up `maxTokens`. Else null.
   */
  ended(): EngineStep | null {
    const { generated, request } = this
    const usage = { promptTokens: request.tokens.length, completionTokens: generated.length }
    const last = generated.at(-1)
    if (last !== undefined && (request.stopTokens ?? GENERATION_STOP_TOKENS).includes(last))
      return { tokens: NO_IDS, finishReason: 'stop', usage }
    if (request.maxTokens !== undefined && generated.length >= request.maxTokens) return { tokens: NO_IDS, finishReason: 'length', usage }
    return null
  }

  /** Counts a failover from `from` to `to`, and returns the step that tells it (an `engine-failover` diagnostic). */
  failedOver(from: string, to: string): EngineStep {
    this.count++
    this.carried = this.generated.length
    const carried = this.carried
    const message = `${from} failed mid-stream; ${to} goes on from the prompt and the ${carried} ids generated`
    return { tokens: NO_IDS, diagnostics: [{ code: 'engine-failover', message, from, to, carried }] }
  }

  /** The step that says why `from`'s failure is the client's (an `engine-failover-refused` diagnostic). */
  refused(from: string, why: string): EngineStep {
    const message = `${from} failed mid-stream, not failed over: ${why}`
    return { tokens: NO_IDS, diagnostics: [{ code: 'engine-failover-refused', message, from }] }
  }

  /** Whether the engine labelled `label` may generate again after failing (once per generation); now it has. */
  mayRetry(label: string): boolean {
    if (this.retried.has(label)) return false
    this.retried.add(label)
    return true
  }

  /** Waits `ms` (a cool-down) on the group's timer; the caller's abort ends the wait as an abort. */
  async wait(ms: number, engine: string): Promise<void> {
    if (ms <= 0) return
    try {
      await this.settings.sleep(ms, this.request.signal ?? new AbortController().signal)
    } catch (error) {
      throw new EngineError('engine-aborted', `${engine}: aborted while waiting to fail over`, { engine, cause: error })
    }
  }

  /**
   * The steps of `engine` (labelled `label`) for this generation: the request as it stands (after failovers,
   * the prompt with the ids carried), its usage as the first engine's; and, with `failoverIdleMs`, the bound the
   * group's loop tells of each step and wait (`StallWatch`: no layer between the engine and the group).
   */
  run(engine: Engine, label: string): { steps: AsyncIterable<EngineStep>; stall: StallWatch | null } {
    const { request, generated, carried, settings } = this
    let asked = request
    if (this.count > 0) {
      const tokens = new Uint32Array(request.tokens.length + generated.length)
      tokens.set(request.tokens)
      tokens.set(generated, request.tokens.length)
      asked = { ...request, tokens }
      if (request.maxTokens !== undefined) asked.maxTokens = request.maxTokens - generated.length
    }
    let stall: StallWatch | null = null
    if (settings.idleMs !== null) {
      // A signal of the member's own beside the caller's: a stall aborts this engine's request alone.
      const own = new AbortController()
      const signal = request.signal === undefined ? own.signal : AbortSignal.any([request.signal, own.signal])
      asked = { ...asked, signal }
      stall = new StallWatch(label, settings, () => own.abort())
    }
    const steps = engine.generate(asked)
    return { steps: carried === 0 ? steps : withUsage(steps, carried), stall }
  }
}

/** `steps` with their usage as the first engine would have told it: the `carried` ids as generated, not prompt. */
async function* withUsage(steps: AsyncIterable<EngineStep>, carried: number): AsyncIterable<EngineStep> {
  for await (const step of steps) {
    if (step.usage === undefined) yield step
    else yield { ...step, usage: continuedUsage(step.usage, carried) }
  }
}

function continuedUsage(usage: EngineUsage, carried: number): EngineUsage {
  const promptTokens = Math.max(0, usage.promptTokens - carried)
  const continued: EngineUsage = { promptTokens, completionTokens: usage.completionTokens + carried }
  // The cache served the prompt and the carried ids alike: of the prompt, at most all of it.
  if (usage.cachedPromptTokens !== undefined) continued.cachedPromptTokens = Math.min(usage.cachedPromptTokens, promptTokens)
  return continued
}

/**
 * The stall bound of one member's steps: when the group waits on them for `settings.idleMs` in all without an
 * id, `abort` ends the member's request (every engine client ends its steps when its request's signal aborts),
 * and the failure that follows is told as the stall (`failure`). Only the waits count: a consumer that reads
 * slowly is not the member's silence. The group's own loop tells it of each step and each wait, so no layer
 * sits between the engine and the group (a step costs two clock reads); one timer at a time, not one per step:
 * when it fires before the silence is long enough (ids came, or the wait was the consumer's), it is set again
 * for what is left.
 */
export class StallWatch {
  /** Silence waited since the last ids, not counting the wait under way. */
  private silent = 0
  /** When the wait under way started; null: not waiting on the member. */
  private since: number | null = null
  /** Whether the member gave ids: before, its silence is a prefill, which the caller's first-token limit bounds. */
  private gaveIds = false
  private stalled = false
  private timer: AbortController | null = null

  constructor(
    private readonly label: string,
    private readonly settings: FailoverSettings,
    private readonly abort: () => void,
  ) {}

  /** A step came. */
  stepped(step: EngineStep): void {
    if (step.tokens.length > 0) {
      this.silent = 0
      this.gaveIds = true
    } else if (this.since !== null) this.silent += this.settings.now() - this.since
    this.since = null
  }

  /** The group waits on the member again (its consumer took the step). */
  waiting(): void {
    this.since = this.settings.now()
    if (this.gaveIds && this.timer === null) this.arm()
  }

  /** The failure the group sees: a stall's, where the stall aborted the request. */
  failure(error: unknown): unknown {
    if (!this.stalled) return error
    const { idleMs } = this.settings
    return new EngineError('engine-idle-timeout', `${this.label}: no token for ${idleMs} ms (failoverIdleMs)`, {
      engine: this.label,
      cause: error,
    })
  }

  end(): void {
    this.timer?.abort()
    this.timer = null
  }

  private silence(): number {
    return this.silent + (this.since === null ? 0 : this.settings.now() - this.since)
  }

  private arm(): void {
    const own = new AbortController()
    this.timer = own
    const idleMs = this.settings.idleMs as number
    this.settings.sleep(Math.max(0, idleMs - this.silence()), own.signal).then(
      () => {
        if (this.timer !== own) return
        this.timer = null
        if (this.since === null) return
        if (this.silence() < idleMs) return this.arm()
        this.stalled = true
        this.abort()
      },
      () => {},
    )
  }
}
