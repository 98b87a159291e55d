/**
 * The reference renderer (PyPI openai-harmony 0.0.8) as an oracle, through `reference_render.py` in the
 * project's `.venv` (made by scripts/setup-reference.mjs), reading gpt-tokenizer's vocabulary.
 */
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

import { PYTHON } from './reference.mjs'

const require = createRequire(import.meta.url)

export interface RenderCase {
  conversation?: { messages: Record<string, unknown>[] }
  /** The conversation as JSON text, passed to the reference as it is. */
  conversationJson?: string
  mode: 'completion' | 'training'
  autoDrop: boolean
}

export function referenceRender(cases: readonly RenderCase[]): { tokens?: number[]; error?: string }[] {
  const run = spawnSync(PYTHON, [join(import.meta.dirname, 'reference_render.py')], {
    input: JSON.stringify({ cases }),
    encoding: 'utf8',
    maxBuffer: 1 << 30,
    env: { ...process.env, TIKTOKEN_ENCODINGS_BASE: dirname(require.resolve('gpt-tokenizer/data/o200k_base.tiktoken')) },
  })
  if (run.error || run.status !== 0) {
    throw new Error(`the reference renderer did not run (${run.error?.message ?? run.stderr}); run: node scripts/setup-reference.mjs`)
  }
  return JSON.parse(run.stdout)
}
