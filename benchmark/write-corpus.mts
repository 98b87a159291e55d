/**
 * Writes the benchmark corpora (the same as bench.mts: benchmark/corpora.mts) as little-endian u32s: the
 * number of streams, then for each stream its length and its tokens. The Rust benchmarks
 * (crate/core/benches/core.rs, benchmark/rust-compare) read them, so every benchmark measures the same input.
 * The first file gets the generated corpus; the optional second one the spread corpus (real multilingual
 * text, thousands of distinct ids).
 *
 *   node --import tsx benchmark/write-corpus.mts <generated-file> [<spread-file>]
 */
import { writeFileSync } from 'node:fs'

import { distinctIds, generatedCorpus, spreadCorpus } from './corpora.mjs'

const [file, spreadFile] = process.argv.slice(2)
if (!file) throw new Error('usage: write-corpus.mts <generated-file> [<spread-file>]')

function write(path: string, corpus: { tokens: number[] }[]): void {
  const words = [corpus.length, ...corpus.flatMap((s) => [s.tokens.length, ...s.tokens])]
  writeFileSync(path, Buffer.from(Uint32Array.from(words).buffer))
  console.log(`${path}: ${corpus.length} completions, ${words.length - 1 - corpus.length} tokens, ${distinctIds(corpus)} distinct ids`)
}

write(file, generatedCorpus(200))
if (spreadFile) write(spreadFile, spreadCorpus(120))
