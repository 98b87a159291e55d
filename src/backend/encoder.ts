/**
 * BPE for rendering: text between special tokens → o200k tokens, every character sequence taken as ordinary
 * text (a user writing `<|start|>` gets those characters, never the token), as the reference's
 * `encode_ordinary`. Native: tiktoken's algorithm in the addon (crate/core/src/encoder.rs), with a cache of
 * pieces per thread; js: gpt-tokenizer, with its own. Both read gpt-tokenizer's vocabulary and give identical
 * tokens (tested).
 */

import type { Implementation } from '../base/types'
import { nativeBinding } from './choose'

export interface OrdinaryEncoder {
  readonly implementation: Implementation
  encode(text: string): ArrayLike<number>
}

/** gpt-tokenizer rejects special-token text by default; an empty set makes every text ordinary. */
const ORDINARY = { disallowedSpecial: new Set<string>() }

let jsEncoder: OrdinaryEncoder | null = null
let nativeEncoder: OrdinaryEncoder | null = null

export function ordinaryEncoder(which: Implementation): OrdinaryEncoder {
  if (which === 'js') {
    if (jsEncoder === null) {
      // Loaded on first use: gpt-tokenizer's ranks module is large, and a parser-only user never needs it.
      const { encode } = require('gpt-tokenizer/cjs/encoding/o200k_base') as typeof import('gpt-tokenizer/cjs/encoding/o200k_base')
      jsEncoder = { implementation: 'js', encode: (text) => encode(text, ORDINARY) }
    }
    return jsEncoder
  }
  if (nativeEncoder === null) {
    const binding = nativeBinding()
    nativeEncoder = { implementation: 'native', encode: (text) => binding.encodeOrdinary(text) }
  }
  return nativeEncoder
}
