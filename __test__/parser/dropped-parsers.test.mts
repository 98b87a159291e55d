/**
 * A native parser dropped without `finish` or `close` holds a stream in Rust until the garbage collector frees
 * the parser. The backend registers its parsers for that in bulk (at the next microtask, or every few hundred
 * in synchronous code), so that parsers finished meanwhile are never registered: whichever way a parser goes,
 * its stream must be freed.
 */
import test from 'ava'

import { harmony, nativeTest } from '../helpers/harmony.mjs'
import { describeGrowth, growthWindows } from '../helpers/memory-growth.mjs'

nativeTest(test)('native parsers dropped unfinished, in synchronous code and across turns, leave no growth (--expose-gc)', (t) => {
  const windows = growthWindows(`
    const { HarmonyStreamParser } = require('harmony-stream')
    const tokens = Uint32Array.from(${JSON.stringify(harmony('<|channel|>final<|message|>Hello there, friend.'))})
    // Dropped with their message open: only the registry can free their streams. Every third is kept to the
    // next turn, and every fifth finished, so that parsers go every way while others wait to be registered.
    let kept = []
    const round = async (n) => {
      for (let i = 0; i < n; i++) {
        const p = new HarmonyStreamParser({ implementation: 'native' })
        p.push(tokens)
        if (i % 5 === 0) p.finish()
        if (i % 3 === 0) kept.push(p)
        if (i % 1000 === 0) { await null; kept = [] }
      }
      kept = []
    }`)
  t.log(describeGrowth(windows))
  // As in limits.test.mts: a leaked stream (a Rust StreamParser with its buffers, over 400 bytes) would be 16 MB
  // in each window (4 in 5 parsers are not finished), and a leaked JS parser object over 2 MB of heap.
  t.true(Math.min(...windows.map((w) => w.heap)) < 2e6, `heap grew ${windows.map((w) => w.heap)} bytes`)
  t.true(Math.min(...windows.map((w) => w.rss)) < 10e6, `rss grew ${windows.map((w) => w.rss)} bytes`)
})
