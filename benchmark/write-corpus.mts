/**
 * Writes the benchmark corpus (the same seeded completions as bench.mts) as little-endian u32s:
 * the number of streams, then for each stream its length and its tokens. The Rust core benchmark
 * (crate/core/benches/core.rs) reads it, so both benchmarks measure the same input.
 *
 *   node --import tsx benchmark/write-corpus.mts <file>
 */
import { writeFileSync } from 'node:fs'

import { generator } from '../__test__/helpers/generator.mjs'

const [file] = process.argv.slice(2)
if (!file) throw new Error('usage: write-corpus.mts <file>')
const corpus = Array.from({ length: 200 }, generator(4)).filter((s) => s.role === 'assistant')
const words = [corpus.length, ...corpus.flatMap((s) => [s.tokens.length, ...s.tokens])]
writeFileSync(file, Buffer.from(Uint32Array.from(words).buffer))
console.log(`${file}: ${corpus.length} completions, ${words.length - 1 - corpus.length} tokens`)
