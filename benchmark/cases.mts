/**
 * The cases of the parser benchmarks, shared by bench.mts (benny, every case once in turn) and side-by-side.mts
 * (each native case alternating with its js counterpart): the corpora, cut once into batches, and a function per
 * case that replays the whole corpus once. BENCH_QUICK=1: the smaller corpora.
 */
import {
  AnthropicMessagesStream,
  ChatCompletionsStream,
  compactCapacity,
  type HarmonySegment,
  HarmonyStreamParser,
  HarmonyStreamPool,
  HarmonyTextParser,
  ResponsesStream,
  SsePool,
} from 'harmony-stream'
import { chatFrames, responsesFrames } from 'harmony-stream/http'

import { decodeTokens } from '../__test__/helpers/token-bytes.mjs'
import { generatedCorpus, spreadCorpus } from './corpora.mjs'

export const quick = process.env.BENCH_QUICK === '1'
export const corpus = generatedCorpus(quick ? 50 : 200)
export const corpusTokens = corpus.reduce((n, s) => n + s.tokens.length, 0)

export const spread = spreadCorpus(quick ? 30 : 120)
export const spreadTokens = spread.reduce((n, s) => n + s.tokens.length, 0)
export const BATCHES = [1, 4, 16, 64]

/** The corpus cut into batches of `size`, prepared once so that cases measure parsing only. */
export function batched(size: number, typed: boolean, source: { tokens: number[] }[] = corpus): (number[] | Uint32Array)[][] {
  return source.map((s) => {
    const out: (number[] | Uint32Array)[] = []
    for (let i = 0; i < s.tokens.length; i += size) {
      const chunk = s.tokens.slice(i, i + size)
      out.push(typed ? Uint32Array.from(chunk) : chunk)
    }
    return out
  })
}

let sink = 0

/** What the cases computed, for the caller to use so that nothing is optimized away. */
export function consumed(): number {
  return sink
}

/** Adds to what the cases computed (the cases a benchmark defines itself). */
export function consume(value: number): void {
  sink += value
}

export function objectApi(which: 'native' | 'js', size: number): () => void {
  const streams = batched(size, true)
  return () => {
    for (const stream of streams) {
      const parser = new HarmonyStreamParser({ implementation: which })
      for (const tokens of stream) sink += parser.push(tokens).segments.length
      sink += parser.finish().completed.length
    }
  }
}

/** A fresh copy of `list` with each element copied, built as the parser builds its lists (a literal for one element). */
function copied<T>(list: readonly T[], copy: (item: T) => T): T[] {
  if (list.length === 0) return []
  if (list.length === 1) return [copy(list[0]!)]
  const out = [copy(list[0]!)]
  for (let i = 1; i < list.length; i++) out.push(copy(list[i]!))
  return out
}

/**
 * Not a parser: the objects the object API returns for the corpus (fresh lists and objects per call, as its
 * contract has them), rebuilt from recorded results with no parsing at all: what the API costs beyond this is
 * the parse, so no implementation of the same contract can cost less. Segments (most of it at batch 1) are
 * built field by field as the parser builds them; the rarer objects are spread.
 */
export function resultsRebuilt(size: number): () => void {
  const recorded = batched(size, true).map((stream) => {
    const parser = new HarmonyStreamParser({ implementation: 'js' })
    return { batches: stream.map((tokens) => parser.push(tokens)), finished: parser.finish() }
  })
  const segment = (g: HarmonySegment): HarmonySegment => ({
    messageIndex: g.messageIndex,
    role: g.role,
    channel: g.channel,
    recipient: g.recipient,
    contentType: g.contentType,
    text: g.text,
  })
  const spread = <T extends object>(o: T): T => ({ ...o })
  return () => {
    for (const { batches, finished } of recorded) {
      for (const b of batches) {
        const batch = {
          opened: copied(b.opened, spread),
          segments: copied(b.segments, segment),
          completed: copied(b.completed, spread),
          diagnostics: copied(b.diagnostics, spread),
        }
        sink += batch.segments.length
      }
      sink += copied(finished.completed, spread).length
    }
  }
}

export function fastPath(which: 'native' | 'js', size: number, source: { tokens: number[] }[] = corpus): () => void {
  const streams = batched(size, true, source) as Uint32Array[][]
  const out = new Uint32Array(compactCapacity(size))
  return () => {
    for (const stream of streams) {
      const parser = new HarmonyStreamParser({ implementation: which })
      for (const tokens of stream) sink += parser.pushCompact(tokens, out).length + out[0]
      sink += parser.finishCompact(out).length
      parser.close() // as a gateway would once it has read the last results: frees the native stream now
    }
  }
}

/** Tokens every pool stream receives: each step serves all streams, as in a full decode batch. */
export const STREAM_LENGTH = 256
const START_ASSISTANT = [200006, 173781] // <|start|>assistant, between the completions of one stream

/**
 * `concurrent` requests decoding at once, one token each per engine step, all busy in every step: stream i
 * replays completions i, i+1, … of the corpus back to back (a multi-turn conversation), cut to
 * STREAM_LENGTH tokens. The steps are prepared once; a run replays all of them.
 */
export function concurrentCorpus(concurrent: number, source: { tokens: number[] }[] = corpus) {
  const streams = Array.from({ length: concurrent }, (_, i) => {
    const tokens: number[] = []
    for (let k = i; tokens.length < STREAM_LENGTH; k++) {
      if (k > i) tokens.push(...START_ASSISTANT)
      tokens.push(...source[k % source.length].tokens)
    }
    return tokens.slice(0, STREAM_LENGTH)
  })
  const steps: { live: number[]; ids: Uint32Array; offsets: Uint32Array; tokens: Uint32Array }[] = []
  for (let t = 0; t < STREAM_LENGTH; t++) {
    const live = streams.map((_, i) => i)
    steps.push({
      live,
      ids: Uint32Array.from(live),
      offsets: Uint32Array.from({ length: live.length + 1 }, (_, k) => k),
      tokens: Uint32Array.from(live.map((i) => streams[i][t])),
    })
  }
  return { steps, tokens: concurrent * STREAM_LENGTH }
}

export function poolCase(which: 'native' | 'js', concurrent: number): () => void {
  const { steps } = concurrentCorpus(concurrent)
  const out = new Uint32Array(compactCapacity(concurrent, concurrent))
  const all = Uint32Array.from({ length: concurrent }, (_, i) => i)
  return () => {
    const pool = new HarmonyStreamPool({ implementation: which })
    for (let i = 0; i < concurrent; i++) {
      // A fresh pool numbers its streams 0, 1, 2…, which the prepared steps rely on.
      if (pool.open() !== i) throw new Error('unexpected stream id')
    }
    for (const step of steps) sink += pool.step(step.ids, step.offsets, step.tokens, out).length + out[0]
    sink += pool.finish(all, out).length
  }
}

/**
 * A gateway's decode loop, wire bytes out: `concurrent` completions, one token each per engine step, each
 * step's SSE bytes for every stream (the frame of each stream is taken, as a gateway writes it). `pool`:
 * one `SsePool` call per step; otherwise one adapter `pushSse` call per stream and step.
 */
export function sseStepCase(
  api: 'chat' | 'responses',
  which: 'native' | 'js',
  concurrent: number,
  pool: boolean,
  source: { tokens: number[] }[] = corpus,
): () => void {
  const { steps } = concurrentCorpus(concurrent, source)
  const one = steps.map((step) => Array.from(step.tokens, (id) => Uint32Array.of(id)))
  const adapter = () =>
    api === 'chat'
      ? new ChatCompletionsStream({ model: 'gpt-oss', parser: { implementation: which } })
      : new ResponsesStream({ model: 'gpt-oss', parser: { implementation: which } })
  return () => {
    if (pool) {
      const sse = new SsePool({ implementation: which })
      const ids = Array.from({ length: concurrent }, () => sse.add(adapter()))
      const streams = Uint32Array.from(ids)
      for (const step of steps) {
        const frames = sse.step(streams, step.offsets, step.tokens)
        for (let i = 0; i < concurrent; i++) sink += frames.frame(i).length
      }
      for (const id of ids) sink += sse.finish(id).length
      return
    }
    const adapters = Array.from({ length: concurrent }, adapter)
    for (let t = 0; t < steps.length; t++) {
      const tokens = one[t]
      for (let i = 0; i < concurrent; i++) sink += adapters[i].pushSse(tokens[i]).length
    }
    for (const a of adapters) sink += a.finishSse().length
  }
}

export function separateParsersCase(which: 'native' | 'js', concurrent: number): () => void {
  const { steps } = concurrentCorpus(concurrent)
  const one = steps.map((step) => Array.from(step.tokens, (id) => Uint32Array.of(id)))
  return () => {
    const parsers = Array.from({ length: concurrent }, () => new HarmonyStreamParser({ implementation: which }))
    for (let t = 0; t < steps.length; t++) {
      const { live } = steps[t]
      const tokens = one[t]
      for (let k = 0; k < live.length; k++) sink += parsers[live[k]].push(tokens[k]).segments.length
    }
    for (const parser of parsers) sink += parser.finish().completed.length
  }
}

/** The corpus as text (markers as text, as llama.cpp and Ollama stream it), cut into chunks of `size` characters. */
export function textCase(which: 'native' | 'js', size: number): () => void {
  const streams = corpus.map((s) => {
    const text = decodeTokens(s.tokens)
    const chunks: string[] = []
    for (let i = 0; i < text.length; i += size) chunks.push(text.slice(i, i + size))
    return chunks
  })
  return () => {
    for (const chunks of streams) {
      const parser = new HarmonyTextParser({ implementation: which })
      for (const chunk of chunks) sink += parser.push(chunk).segments.length
      sink += parser.finish().completed.length
    }
  }
}

/**
 * What a gateway's hot path does per engine step: tokens → wire bytes. `sse`: the adapters' SSE face
 * (templates, no event objects); otherwise the object API's events serialized as a gateway would.
 */
export function wireCase(api: 'chat' | 'responses' | 'messages', which: 'native' | 'js', size: number, sse: boolean): () => void {
  const streams = batched(size, true) as Uint32Array[][]
  const options = { model: 'gpt-oss', parser: { implementation: which } }
  return () => {
    for (const stream of streams) {
      if (api === 'messages') {
        const messages = new AnthropicMessagesStream(options)
        if (sse) {
          for (const tokens of stream) sink += messages.pushSse(tokens).length
          sink += messages.finishSse().length
        } else {
          for (const tokens of stream) sink += responsesFrames(messages.push(tokens)).length
          sink += responsesFrames(messages.finish()).length
        }
      } else if (api === 'chat') {
        const chat = new ChatCompletionsStream(options)
        if (sse) {
          for (const tokens of stream) sink += chat.pushSse(tokens).length
          sink += chat.finishSse().length
        } else {
          for (const tokens of stream) sink += chatFrames(chat.push(tokens)).length
          sink += chatFrames(chat.finish()).length
        }
      } else {
        const responses = new ResponsesStream(options)
        if (sse) {
          sink += responses.startSse().length
          for (const tokens of stream) sink += responses.pushSse(tokens).length
          sink += responses.finishSse().length
        } else {
          sink += responsesFrames(responses.start()).length
          for (const tokens of stream) sink += responsesFrames(responses.push(tokens)).length
          sink += responsesFrames(responses.finish()).length
        }
      }
    }
  }
}
