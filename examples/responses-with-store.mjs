// A Responses gateway that remembers: responses kept in a SQLite file, a follow-up that names the first with
// `previous_response_id` (the gateway prompts the engine with the whole conversation), and the kept response
// read back. The engine here replays two recorded completions; any engine client works the same.
// Run: node examples/responses-with-store.mjs
//
// Prints:
// first: The capital of France is **Paris**. 🇫🇷
// second continues resp_…, its prompt longer than the first's: true
// kept: completed, from user, reasoning, assistant, user
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createEngine } from 'harmony-stream/engines'
import { createGateway, loadReplay, SqliteResponseStore } from 'harmony-stream/server'

const folder = mkdtempSync(join(tmpdir(), 'harmony-store-'))
const store = new SqliteResponseStore({ path: join(folder, 'responses.sqlite') })
const completions = loadReplay(join(import.meta.dirname, 'gateway', 'replay.json'))
const server = createGateway({ engine: createEngine('replay', { completions: [completions[0], completions[0]] }), responses: { store } })
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
const base = `http://127.0.0.1:${server.address().port}/v1`

async function post(body) {
  const response = await fetch(`${base}/responses`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  return response.json()
}

const first = await post({ model: 'gpt-oss', input: 'Capital of France?' })
console.log(`first: ${first.output.find((item) => item.type === 'message').content[0].text}`)
const second = await post({ model: 'gpt-oss', input: 'And of Italy?', previous_response_id: first.id })
const grew = second.usage.input_tokens > first.usage.input_tokens
console.log(`second continues ${first.id.slice(0, 5)}…, its prompt longer than the first's: ${grew}`)
const kept = await (await fetch(`${base}/responses/${second.id}`)).json()
const items = await (await fetch(`${base}/responses/${second.id}/input_items`)).json()
// What the second response was generated from: the first's input and output, then its own input.
const kinds = items.data.map((item) => item.role ?? item.type).reverse()
console.log(`kept: ${kept.status}, from ${kinds.join(', ')}`)

await new Promise((resolve) => server.close(resolve))
await store.close()
rmSync(folder, { recursive: true, force: true })
