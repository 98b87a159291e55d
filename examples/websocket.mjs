// The Responses API's WebSocket mode: one connection to ws://…/v1/responses, a `response.create` message per
// turn, the response's events back as JSON text frames (the same events as the SSE stream, without [DONE]).
// The second turn continues the first over the same connection with `store: false`: nothing is kept, the
// connection remembers its latest response. Run: node examples/websocket.mjs
//
// Prints:
// turn 1: response.created … response.completed (38 events): The capital of France is **Paris**. 🇫🇷
// turn 2: response.created … response.completed (38 events): The capital of France is **Paris**. 🇫🇷
import { join } from 'node:path'

import { createEngine } from 'harmony-stream/engines'
import { createGateway, loadReplay } from 'harmony-stream/server'
import WebSocket from 'ws'

const [answer] = loadReplay(join(import.meta.dirname, 'gateway', 'replay.json'))
const server = createGateway({ engine: createEngine('replay', { completions: [answer] }), responses: { store: null } })
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
const socket = new WebSocket(`ws://127.0.0.1:${server.address().port}/v1/responses`)
await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))

/** Sends one turn; resolves with its events when the terminal one arrives. */
function turn(body) {
  const events = []
  return new Promise((resolve) => {
    socket.on('message', function onMessage(data) {
      const event = JSON.parse(String(data))
      events.push(event)
      if (event.type === 'response.completed' || event.type === 'response.failed' || event.type === 'error') {
        socket.off('message', onMessage)
        resolve(events)
      }
    })
    socket.send(JSON.stringify({ type: 'response.create', model: 'gpt-oss', store: false, ...body }))
  })
}

let previous = null
for (const [n, input] of ['Capital of France?', 'Thanks!'].entries()) {
  const events = await turn({ input, ...(previous ? { previous_response_id: previous } : {}) })
  const last = events.at(-1)
  previous = last.response?.id
  const text = last.response?.output.find((item) => item.type === 'message')?.content[0].text
  console.log(`turn ${n + 1}: ${events[0].type} … ${last.type} (${events.length} events): ${text ?? JSON.stringify(last)}`)
}
socket.close()
server.close()
