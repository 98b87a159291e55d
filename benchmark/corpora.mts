/**
 * The benchmark corpora, shared by the Node benchmark (bench.mts) and the corpus file the Rust benchmark
 * reads (write-corpus.mts), so that both measure the same input.
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'

import { generator } from '../__test__/helpers/generator.mjs'
import { harmony } from '../__test__/helpers/harmony.mjs'

/** Seeded generated completions (reasoning, tool calls, multilingual text), the assistant ones of `count` streams. */
export function generatedCorpus(count: number): { tokens: number[] }[] {
  return Array.from({ length: count }, generator(4)).filter((s) => s.role === 'assistant')
}

/**
 * The generated corpus repeats a few sentences (a few hundred distinct ids), so the vocabulary lookup stays in
 * cache. This one has a realistic spread: real multilingual text (TypeScript's localized messages, shipped in
 * its package) as final answers, thousands of distinct ids.
 */
export function spreadCorpus(count: number): { tokens: number[] }[] {
  const require = createRequire(import.meta.url)
  const texts = ['zh-cn', 'ja', 'ko', 'ru', 'de', 'fr', 'es'].map((lang) =>
    Object.values(
      JSON.parse(readFileSync(require.resolve(`typescript/lib/${lang}/diagnosticMessages.generated.json`), 'utf8')) as Record<
        string,
        string
      >,
    ).join(' '),
  )
  const out: { tokens: number[] }[] = []
  for (let i = 0; i < count; i++) {
    const text = texts[i % texts.length]
    const at = (i * 7919) % (text.length - 800)
    out.push({ tokens: harmony(`<|channel|>final<|message|>${text.slice(at, at + 600)}<|return|>`) })
  }
  return out
}

/** Number of distinct token ids in `streams`. */
export function distinctIds(streams: { tokens: number[] }[]): number {
  return new Set(streams.flatMap((s) => s.tokens)).size
}
