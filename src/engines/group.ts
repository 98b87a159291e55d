/**
 * Several engine servers of one model as one `Engine`: each generation goes to one of them, chosen by
 *
 * 1. **Cache affinity**: the engine that last generated this prompt's longest known prefix, so its prefix cache
 *    serves it. Exact continuations (a Responses chain, the Chat id cache, sealed reasoning) make a prompt begin
 *    with the ids an engine saw and generated before; the group remembers, for every generation that ended,
 *    which engine holds its ids, by prefix blocks of `blockTokens` (SGLang's router and llm-d's scheduler route
 *    by prefixes too). Only a prefix of at least `cacheThreshold` of the prompt (half) counts: conversations
 *    that share no more than a system prompt are spread by load.
 * 2. **Affinity key**: else the engine the last request with the same `GenerateRequest.affinityKey` went to
 *    (OpenAI's `prompt_cache_key`: requests a client says share a prefix, before any of it is known here).
 * 3. **Load**: else the healthy engine with the fewest generations running (ties: the next in turn).
 *
 * Affinity yields to load only past a spill gate (SMG's, see `overGate`): an engine is passed over for
 * affinity when its running generations exceed both `balanceRelThreshold` times the healthy engines' mean
 * and the mean plus an absolute margin, so a burst of conversations held by one engine stays there until it
 * is truly overloaded, not as soon as it runs a few more than the least loaded.
 *
 * An engine that fails before its first step (refused, reset, timed out, overloaded, a 5xx) is taken out for a
 * cool-down that doubles with each failure in a row (1 s to 30 s) and the generation is tried on the next one,
 * at most once per engine: the client never sees the failure. Once a step has been passed on, a failure (or a
 * stall) takes the engine out as well, and another engine goes on with the same generation, prompted with the
 * prompt and the ids generated (failover.ts: what it guarantees, and what it refuses). When the cool-down ends,
 * the next generation routed there probes it; a success puts it back. When all are out, the one whose cool-down
 * ends first is tried.
 */
import { checkOptions, is, type OptionSpec, optionError } from '../base/options'
import { EngineError } from './errors'
import { FAILOVER_OPTIONS, Failover, type FailoverOptions, type FailoverSettings, failoverSettings } from './failover'
import type { Engine, EngineStep, GenerateRequest, SamplingField } from './types'

/** The failover options (`failover`, `maxFailovers`, `failoverIdleMs`, `sleep`) are failover.ts's. */
export interface EngineGroupOptions extends FailoverOptions {
  /** Prompt ids per prefix block the group remembers (smaller: finer affinity, more memory). Default 64. */
  blockTokens?: number
  /** Prefix blocks remembered at most, the least recently used forgotten first. Default 200,000. */
  maxBlocks?: number
  /**
   * The spill gate's relative part: an engine holding a prompt's prefix (or its affinity key) is passed over
   * when it runs more than this many times the healthy engines' mean of running generations, and more than the
   * mean plus the absolute margin (`balanceAbsThreshold`). At least 1. Default 1.5 (SMG's).
   */
  balanceRelThreshold?: number
  /**
   * The spill gate's absolute part, in running generations above the mean: at most this, and otherwise the
   * natural swing of a running count at that mean (`ceil(2 × √mean)`, never under 4); 0: the relative part
   * alone decides. Default 64 (SMG's).
   */
  balanceAbsThreshold?: number
  /**
   * The share of the prompt (0 to 1) a known prefix must cover to count. Default 0.5, the rule this group had
   * before (SMG's command line defaults to 0.3, its library to 0.5): first turns whose system prompt is a third
   * of them stay spread by load, and an affinity key still pins what a client says belongs together.
   */
  cacheThreshold?: number
  /** Affinity keys remembered at most, the least recently used forgotten first. Default 100,000. */
  maxKeys?: number
  /**
   * Deprecated (the spill gate replaces it): affinity yields as soon as an engine runs more than this many
   * generations beyond the least loaded one. Given, it replaces the gate; not with `balanceRelThreshold` or
   * `balanceAbsThreshold`.
   */
  affinitySlack?: number
  /** Route by prefix at all. Default true; false: by load alone (to measure what affinity earns). */
  affinity?: boolean
  /** The clock, in ms (tests move one of their own). Default `Date.now`. */
  now?: () => number
}

const OPTIONS: OptionSpec = {
  blockTokens: is.integer(1, 1 << 20),
  maxBlocks: is.integer(1),
  balanceRelThreshold: is.number(1),
  balanceAbsThreshold: is.integer(0),
  cacheThreshold: is.number(0, 1),
  maxKeys: is.integer(1),
  affinitySlack: is.integer(0),
  affinity: is.boolean,
  now: is.function,
  ...FAILOVER_OPTIONS,
}

/**
 * The floor of the gate's absolute margin (SMG's `MIN_ABSOLUTE_MARGIN`): a handful of generations above the
 * mean on an otherwise idle group is not pressure.
 */
const MIN_ABSOLUTE_MARGIN = 4

const FIRST_COOL_DOWN_MS = 1000
const LAST_COOL_DOWN_MS = 30_000

/** What the group knows of one engine. */
interface Member {
  engine: Engine
  /** Its name, with its place in the group when several share one (`vllm/0`, `vllm/1`). */
  label: string
  running: number
  /** Failures in a row before a first step; 0: healthy. */
  failures: number
  /** Out until this time (ms). */
  outUntil: number
}

/** A prefix's block keys, and its running hash and length, to hash on from. */
interface PrefixHash {
  keys: string[]
  a: number
  b: number
  length: number
}

/** One engine's state, as `EngineGroup.status` reports it. */
export interface EngineStatus {
  name: string
  running: number
  healthy: boolean
}

export class EngineGroup implements Engine {
  readonly name: string
  readonly sampling: readonly SamplingField[] | undefined
  private readonly members: Member[]
  private readonly blockTokens: number
  private readonly maxBlocks: number
  private readonly balanceRel: number
  private readonly balanceAbs: number
  private readonly cacheThreshold: number
  private readonly maxKeys: number
  /** The deprecated `affinitySlack`, when given: it replaces the gate. */
  private readonly slack: number | undefined
  private readonly affinity: boolean
  private readonly now: () => number
  /** null: failover mid-stream is off. */
  private readonly failover: FailoverSettings | null
  /** Prefix block key → the member that generated it last (a Map keeps insertion order: least recent first). */
  private readonly blocks = new Map<string, Member>()
  /** Affinity key (hashed) → the member the last request with it went to, least recent first. */
  private readonly keys = new Map<string, Member>()
  private turn = 0

  constructor(engines: readonly Engine[], options: EngineGroupOptions = {}) {
    if (!Array.isArray(engines) || engines.length === 0 || !engines.every((e) => e !== null && typeof e?.generate === 'function'))
      throw optionError(TypeError, 'EngineGroup: engines must be a non-empty array of engines (objects with generate)')
    const checked = checkOptions<EngineGroupOptions>(options, OPTIONS, 'EngineGroup')
    if (checked.affinitySlack !== undefined && (checked.balanceRelThreshold !== undefined || checked.balanceAbsThreshold !== undefined))
      throw optionError(
        TypeError,
        "EngineGroup: option 'affinitySlack' (deprecated) cannot be given with 'balanceRelThreshold' or 'balanceAbsThreshold': the spill gate replaces it",
      )
    const shared = (name: string) => engines.filter((e) => e.name === name).length > 1
    this.members = engines.map((engine, i) => ({
      engine,
      label: shared(engine.name) ? `${engine.name}/${i}` : engine.name,
      running: 0,
      failures: 0,
      outUntil: 0,
    }))
    this.name = [...new Set(engines.map((e) => e.name))].join('+')
    // A field is applied only if every engine applies it.
    const samplings = engines.map((e) => e.sampling)
    this.sampling = samplings.every((s) => s === undefined)
      ? undefined
      : (samplings.find((s) => s !== undefined) ?? []).filter((field: SamplingField) =>
          samplings.every((s) => s === undefined || s.includes(field)),
        )
    this.blockTokens = checked.blockTokens ?? 64
    this.maxBlocks = checked.maxBlocks ?? 200_000
    this.balanceRel = checked.balanceRelThreshold ?? 1.5
    this.balanceAbs = checked.balanceAbsThreshold ?? 64
    this.cacheThreshold = checked.cacheThreshold ?? 0.5
    this.maxKeys = checked.maxKeys ?? 100_000
    this.slack = checked.affinitySlack
    this.affinity = checked.affinity ?? true
    this.now = checked.now ?? Date.now
    this.failover = failoverSettings(checked, this.now)
  }

  /**
   * Each engine: its name (with its place when several share one: `vllm/1`), its running generations, whether
   * it is in (not cooling down after failures).
   */
  status(): EngineStatus[] {
    const now = this.now()
    return this.members.map((m) => ({ name: m.label, running: m.running, healthy: m.outUntil <= now }))
  }

  async *generate(request: GenerateRequest): AsyncIterable<EngineStep> {
    const prompt = this.affinity ? this.prefixKeys(request.tokens) : null
    const tried = new Set<Member>()
    // The ids passed on: remembered by prefix, and what another engine goes on from after a failure mid-stream.
    const generated: number[] = []
    const failover = this.failover === null ? null : new Failover(request, generated, this.failover)
    let passedOn = false
    let member = this.choose(prompt?.keys ?? [], request.tokens.length, tried, request.affinityKey)
    for (;;) {
      tried.add(member)
      request.onEngine?.(member.label)
      member.running++
      let failure: unknown
      const { steps, stall } =
        failover === null ? { steps: member.engine.generate(request), stall: null } : failover.run(member.engine, member.label)
      try {
        for await (const step of steps) {
          stall?.stepped(step)
          passedOn = true
          if (prompt !== null || failover !== null) for (let i = 0; i < step.tokens.length; i++) generated.push(step.tokens[i]!)
          yield step
          stall?.waiting()
        }
        member.failures = 0
        member.outUntil = 0
        if (prompt !== null) this.remember(prompt, generated, member)
        return
      } catch (thrown) {
        const error = stall === null ? thrown : stall.failure(thrown)
        if (request.signal?.aborted || !failedAsServer(error)) throw error
        failure = error
      } finally {
        stall?.end()
        member.running--
      }
      if (!passedOn) {
        this.takeOut(member)
        request.onEngine?.(member.label, failure)
        // Every engine tried: the last failure is the answer.
        if (tried.size === this.members.length) throw failure
        member = this.choose(prompt?.keys ?? [], request.tokens.length, tried, request.affinityKey)
        continue
      }
      // Mid-stream: another engine goes on from the ids passed on (failover.ts), or the failure is the client's.
      if (failover === null) throw failure
      this.takeOut(member)
      // Its last id came before the failure: the generation is whole.
      const ended = failover.ended()
      if (ended !== null) {
        request.onEngine?.(member.label, failure)
        yield ended
        return
      }
      const refusal = failover.refusal()
      if (refusal !== null) {
        yield failover.refused(member.label, refusal)
        throw failure
      }
      request.onEngine?.(member.label, failure)
      // The group's own choice among those not tried; none healthy: the same engine once more, after its cool-down.
      const next =
        tried.size < this.members.length ? this.choose(prompt?.keys ?? [], request.tokens.length, tried, request.affinityKey) : null
      if (next !== null && next.outUntil <= this.now()) {
        yield failover.failedOver(member.label, next.label)
        member = next
      } else if (failover.mayRetry(member.label)) {
        yield failover.failedOver(member.label, member.label)
        await failover.wait(member.outUntil - this.now(), member.label)
      } else {
        yield failover.refused(member.label, 'no other engine is in, and this one failed again after its cool-down')
        throw failure
      }
    }
  }

  /**
   * The member for a generation whose prompt (`promptLength` ids) has prefix block `keys` and the affinity key
   * `affinityKey`, not one of `tried`; the key is remembered as going there.
   */
  private choose(keys: readonly string[], promptLength: number, tried: ReadonlySet<Member>, affinityKey?: string): Member {
    const now = this.now()
    const open = this.members.filter((m) => !tried.has(m))
    const healthy = open.filter((m) => m.outUntil <= now)
    const key = this.affinity && affinityKey !== undefined ? hashKey(affinityKey) : undefined
    let chosen: Member | undefined
    if (healthy.length === 0) chosen = open.reduce((a, b) => (b.outUntil < a.outUntil ? b : a))
    else {
      let least = Number.POSITIVE_INFINITY
      let total = 0
      for (const m of healthy) {
        least = Math.min(least, m.running)
        total += m.running
      }
      const mean = total / healthy.length
      const holds = (m: Member | undefined): m is Member => m !== undefined && healthy.includes(m) && !this.overGate(m, mean, least)
      // The longest prefix known, down to `cacheThreshold` of the prompt.
      for (
        let i = keys.length - 1;
        chosen === undefined && i >= 0 && (i + 1) * this.blockTokens >= this.cacheThreshold * promptLength;
        i--
      ) {
        const holder = this.blocks.get(keys[i]!)
        if (holds(holder)) chosen = holder
      }
      if (chosen === undefined && key !== undefined) {
        const holder = this.keys.get(key)
        if (holds(holder)) chosen = holder
      }
      if (chosen === undefined) {
        // The least loaded, taken in turn among equals so that an idle group spreads its load.
        const candidates = healthy.filter((m) => m.running === least)
        chosen = candidates[this.turn++ % candidates.length]!
      }
    }
    if (key !== undefined) {
      this.keys.delete(key)
      this.keys.set(key, chosen)
      if (this.keys.size > this.maxKeys) this.keys.delete(this.keys.keys().next().value as string)
    }
    return chosen
  }

  /**
   * Whether `member`, holding a generation's prefix or key, is too busy for affinity: the spill gate of SMG's
   * cache-aware policy (lightseekorg/smg, model_gateway/src/policies/cache_aware.rs, `over_count_pressure_gate`
   * and `absolute_margin`): its running generations exceed `balanceRelThreshold` times the healthy engines'
   * mean AND the mean plus a margin, which is `balanceAbsThreshold` at most and otherwise the natural swing of
   * a running count at that mean (two standard deviations of a Poisson count, `ceil(2 × √mean)`), never under
   * 4 unless `balanceAbsThreshold` is. Both parts must hold: the relative one alone would fire on the noise of
   * a few generations, the absolute one alone would not see a deep queue at a high mean. The deprecated
   * `affinitySlack`, when given, is the rule instead: more than that many beyond the least loaded.
   */
  private overGate(member: Member, mean: number, least: number): boolean {
    if (this.slack !== undefined) return member.running > least + this.slack
    const margin = Math.min(this.balanceAbs, Math.max(Math.ceil(2 * Math.sqrt(mean)), MIN_ABSOLUTE_MARGIN))
    return member.running > mean * this.balanceRel && member.running > mean + margin
  }

  private takeOut(member: Member): void {
    member.failures++
    member.outUntil = this.now() + Math.min(LAST_COOL_DOWN_MS, FIRST_COOL_DOWN_MS * 2 ** (member.failures - 1))
  }

  /**
   * The keys of the whole prefix blocks of `tokens` following `from` (a prefix hashed before; none: the start),
   * shortest first: a running hash, its value at each block's end; and the hash where it stopped, so that what
   * follows (the generated ids) is hashed on from there, not from the start again.
   */
  private prefixKeys(tokens: ArrayLike<number>, from: PrefixHash = { keys: [], a: 0x811c9dc5, b: 0x01000193, length: 0 }): PrefixHash {
    const keys = [...from.keys]
    let { a, b, length } = from
    for (let i = 0; i < tokens.length; i++) {
      const id = tokens[i]!
      a = Math.imul(a ^ id, 0x01000193) >>> 0
      b = Math.imul(b ^ id, 0x5bd1e995) >>> 0
      if (++length % this.blockTokens === 0) keys.push(`${length}:${a.toString(36)}:${b.toString(36)}`)
    }
    return { keys, a, b, length }
  }

  /** Remembers that `member` holds the ids of prompt and answer, block by block. */
  private remember(prompt: PrefixHash, generated: readonly number[], member: Member): void {
    const { keys } = generated.length === 0 ? prompt : this.prefixKeys(generated, prompt)
    for (const key of keys) {
      this.blocks.delete(key)
      this.blocks.set(key, member)
    }
    while (this.blocks.size > this.maxBlocks) this.blocks.delete(this.blocks.keys().next().value as string)
  }
}

/**
 * An affinity key as a short map key: two 32-bit hashes of its UTF-16 units, so that a long key a client sends
 * costs the memory of a short one (a collision only makes two keys share an engine).
 */
function hashKey(key: string): string {
  let a = 0x811c9dc5
  let b = 0x01000193
  for (let i = 0; i < key.length; i++) {
    const unit = key.charCodeAt(i)
    a = Math.imul(a ^ unit, 0x01000193) >>> 0
    b = Math.imul(b ^ unit, 0x5bd1e995) >>> 0
  }
  return `${key.length}:${a.toString(36)}:${b.toString(36)}`
}

/**
 * Whether an engine failed as a server does (another engine may well succeed): no connection, a timeout, an
 * overloaded or broken server, a stream cut. Not: a request the engine refused as a request (4xx), an abort.
 */
function failedAsServer(error: unknown): boolean {
  if (!(error instanceof EngineError)) return false
  if (error.code === 'engine-aborted') return false
  if (error.code === 'engine-http-error') return error.status === null || error.status >= 500
  return true
}
