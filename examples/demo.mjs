// Streams a gpt-oss completion (reasoning, a preamble, then a tool call that ends the completion with
// <|call|>, where a gateway would run the tool) through HarmonyStreamParser at a given stream interval, and
// prints what a gateway would route at each engine step. Run: npm run demo [-- --interval 20] [--impl js|native]
import { parseArgs } from 'node:util'

import { encode } from 'gpt-tokenizer/encoding/o200k_base'
import { HarmonyStreamParser, implementation } from 'harmony-stream'

function usage(problem) {
  console.error(
    `demo: ${problem}\nusage: npm run demo [-- --interval N] [--impl js|native]   (N: tokens per engine step, a positive integer)`,
  )
  process.exit(2)
}

let values
try {
  ;({ values } = parseArgs({ options: { interval: { type: 'string', default: '20' }, impl: { type: 'string' } } }))
} catch (error) {
  usage(error.message)
}
const interval = Number(values.interval)
if (!/^\d+$/.test(values.interval) || !Number.isSafeInteger(interval) || interval < 1)
  usage(`--interval must be a positive integer, not ${JSON.stringify(values.interval)}`)
if (values.impl !== undefined && values.impl !== 'js' && values.impl !== 'native')
  usage(`--impl must be js or native, not ${JSON.stringify(values.impl)}`)

const SPECIAL = {
  '<|start|>': 200006,
  '<|end|>': 200007,
  '<|message|>': 200008,
  '<|channel|>': 200005,
  '<|constrain|>': 200003,
  '<|return|>': 200002,
  '<|call|>': 200012,
}
/** Harmony text → token ids: markers as special tokens, everything else o200k BPE. */
const tokensOf = (text) =>
  text
    .split(/(<\|[a-z]+\|>)/)
    .filter(Boolean)
    .flatMap((part) => SPECIAL[part] ?? encode(part))

// What the model generates after a prompt ending in <|start|>assistant.
const completion = tokensOf(
  '<|channel|>analysis<|message|>The user asks for the weather in Tokyo. I should call get_weather; say so first.<|end|>' +
    '<|start|>assistant<|channel|>commentary<|message|>Checking the forecast for Tokyo…<|end|>' +
    '<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"東京","unit":"celsius"}<|call|>',
)

const colour = { analysis: 35, commentary: 33, final: 32 }
const paint = (channel, text) => (process.stdout.isTTY ? `\x1b[${colour[channel] ?? 36}m${text}\x1b[0m` : text)

let parser
try {
  parser = new HarmonyStreamParser({ role: 'assistant', implementation: values.impl ?? implementation })
} catch (error) {
  // --impl native where the addon is not built: the loader's message says what is missing and how to build it.
  console.error(`demo: ${error.message}`)
  process.exit(1)
}
console.log(`harmony-stream on ${parser.implementation}; ${completion.length} tokens at stream interval ${interval}\n`)
for (let step = 0; step * interval < completion.length; step++) {
  const closedBefore = parser.messages.length
  const batch = parser.push(completion.slice(step * interval, (step + 1) * interval))
  for (const s of batch.segments) {
    const route = s.recipient?.startsWith('functions.') ? `tool call ${s.recipient}` : s.channel === 'analysis' ? 'reasoning' : 'content'
    console.log(
      `step ${String(step).padStart(2)}  #${s.messageIndex} ${paint(s.channel, (s.channel ?? '').padEnd(10))} → ${route.padEnd(34)} ${JSON.stringify(s.text)}`,
    )
  }
  batch.completed.forEach((m, i) => {
    console.log(`step ${String(step).padStart(2)}  #${closedBefore + i} closed by <|${m.terminator}|>`)
  })
}
parser.finish()
console.log('\nmessages:')
console.log(parser.messages)
