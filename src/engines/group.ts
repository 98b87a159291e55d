/**
 * Several engine servers of one model as one `Engine`: each generation goes to one of them, chosen by
 *
 * 1. **Cache affinity**: the engine that last generated this prompt's longest known prefix, so its prefix cache
 *    serves it. Exact continuations (a Responses chain, the Chat id cache, sealed reasoning) make a prompt begin
 *    with the ids an engine saw and generated before; the group remembers, for every generation that ended,
 *    which engine holds its ids, by prefix blocks of `blockTokens` (SGLang's router and llm-d's scheduler route
 *    by prefixes too). Only a prefix of at least half the prompt counts (SGLang's router has the same threshold):
 *    conversations that share no more than a system prompt are spread by load. Affinity yields to load too: an
 *    engine with `affinitySlack` more generations running than the least loaded one is passed over.
 * 2. **Load**: else the healthy engine with the fewest generations running (ties: the next in turn).
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
  /** How many more running generations than the least loaded engine affinity accepts. Default 4. */
  affinitySlack?: number
  /** Route by prefix at all. Default true; false: by load alone (to measure what affinity earns). */
  affinity?: boolean
  /** The clock, in ms (tests move one of their own). Default `Date.now`. */
  now?: () => number
}

const OPTIONS: OptionSpec = {
  blockTokens: is.integer(1, 1 << 20),
  maxBlocks: is.integer(1),
  affinitySlack: is.integer(0),
  affinity: is.boolean,
  now: is.function,
  ...FAILOVER_OPTIONS,
}

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
  private readonly slack: number
  private readonly affinity: boolean
  private readonly now: () => number
  /** null: failover mid-stream is off. */
  private readonly failover: FailoverSettings | null
  /** Prefix block key → the member that generated it last (a Map keeps insertion order: least recent first). */
  private readonly blocks = new Map<string, Member>()
  private turn = 0

  constructor(engines: readonly Engine[], options: EngineGroupOptions = {}) {
    if (!Array.isArray(engines) || engines.length === 0 || !engines.every((e) => e !== null && typeof e?.generate === 'function'))
      throw optionError(TypeError, 'EngineGroup: engines must be a non-empty array of engines (objects with generate)')
    const checked = checkOptions<EngineGroupOptions>(options, OPTIONS, 'EngineGroup')
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
    this.slack = checked.affinitySlack ?? 4
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
    let member = this.choose(prompt?.keys ?? [], request.tokens.length, tried)
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
        member = this.choose(prompt?.keys ?? [], request.tokens.length, tried)
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
      const next = tried.size < this.members.length ? this.choose(prompt?.keys ?? [], request.tokens.length, tried) : null
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

  /** The member for a generation whose prompt (`promptLength` ids) has prefix block `keys`, not one of `tried`. */
  private choose(keys: readonly string[], promptLength: number, tried: ReadonlySet<Member>): Member {
    const now = this.now()
    const open = this.members.filter((m) => !tried.has(m))
    const healthy = open.filter((m) => m.outUntil <= now)
    if (healthy.length === 0) return open.reduce((a, b) => (b.outUntil < a.outUntil ? b : a))
    const least = Math.min(...healthy.map((m) => m.running))
    // The longest prefix known, down to half the prompt.
    for (let i = keys.length - 1; i >= 0 && (i + 1) * this.blockTokens * 2 >= promptLength; i--) {
      const holder = this.blocks.get(keys[i]!)
      if (holder !== undefined && healthy.includes(holder) && holder.running <= least + this.slack) return holder
    }
    // The least loaded, taken in turn among equals so that an idle group spreads its load.
    const candidates = healthy.filter((m) => m.running === least)
    return candidates[this.turn++ % candidates.length]!
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
 * Whether an engine failed as a server does (another engine may well succeed): no connection, a timeout, an
 * overloaded or broken server, a stream cut. Not: a request the engine refused as a request (4xx), an abort.
 */
function failedAsServer(error: unknown): boolean {
  if (!(error instanceof EngineError)) return false
  if (error.code === 'engine-aborted') return false
  if (error.code === 'engine-http-error') return error.status === null || error.status >= 500
  return true
}
