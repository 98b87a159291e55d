import { HarmonyStreamParser, implementation, ChatCompletionsStream } from 'harmony-stream'
import { encode } from 'gpt-tokenizer/encoding/o200k_base'
console.log('implementation', implementation)
const ids = [200005, ...encode('final'), 200008, ...encode('Héllo wörld — ünïcödé 🤔 and more text. '.repeat(3)), 200007, 200006, ...encode('assistant'), 200005, ...encode('final'), 200008, ...encode('second'), 200002]
for (const impl of ['native', 'js']) {
  const p = new HarmonyStreamParser({ implementation: impl })
  let text = ''
  for (let pass = 0; pass < 2; pass++) {}
  for (const id of ids) for (const s of p.push([id]).segments) text += s.text
  p.finish()
  console.log(impl, JSON.stringify(p.messages.map((m) => [m.channel, m.content.length])), text.length)
}
const chat = new ChatCompletionsStream({ model: 'gpt-oss' })
let sse = ''
for (const id of ids) sse += chat.pushSse(new Uint32Array([id]))
sse += chat.finishSse()
console.log(sse.split('\n\n').length, 'frames;', sse.includes('[DONE]'))
