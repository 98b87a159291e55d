// A gateway over an engine of your own: anything with `name` and `generate(request)` that yields engine steps
// ({ tokens }) is an engine. Here it answers every prompt with one Harmony completion, a token per step, and
// the gateway does the rest (rendering, parsing, the OpenAI wire format). Run: node examples/custom-engine.mjs
//
// Prints:
// the prompt ends with <|start|>assistant: true
// reasoning: The user greets.
// answer: Hello from my engine.
import { encode } from 'gpt-tokenizer/encoding/o200k_base'
import { createGateway } from 'harmony-stream/server'

const [START, END, MESSAGE, CHANNEL, RETURN] = [200006, 200007, 200008, 200005, 200002]
const text = (s) => encode(s)
// What gpt-oss writes after <|start|>assistant: reasoning, then the final answer.
const completion = [
  ...[CHANNEL, ...text('analysis'), MESSAGE, ...text('The user greets.'), END],
  ...[START, ...text('assistant'), CHANNEL, ...text('final'), MESSAGE, ...text('Hello from my engine.'), RETURN],
]

const engine = {
  name: 'mine',
  async *generate(request) {
    // The rendered conversation, ready for the model to write the assistant's message.
    console.log(`the prompt ends with <|start|>assistant: ${request.tokens.at(-2) === START}`)
    for (const id of completion) {
      if (request.signal?.aborted) return
      yield { tokens: Uint32Array.of(id) }
    }
  },
}

const server = createGateway({ engine, responses: { store: null } })
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
const response = await fetch(`http://127.0.0.1:${server.address().port}/v1/chat/completions`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ model: 'gpt-oss', messages: [{ role: 'user', content: 'Hi!' }] }),
})
const { choices } = await response.json()
console.log(`reasoning: ${choices[0].message.reasoning_content}`)
console.log(`answer: ${choices[0].message.content}`)
server.close()
