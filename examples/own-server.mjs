// The gateway in a server of your own: `createGatewayHandler` gives its request handler (and its WebSocket
// upgrade) without a server, so your routes and the gateway's share one port. Here a route of the server's own,
// `/internal/ready`, sits beside the gateway's OpenAI routes. Run: node examples/own-server.mjs
//
// Prints:
// own route: 200 {"ready":true,"completed":0}
// gateway route: 200 The capital of France is **Paris**. 🇫🇷
// own route: 200 {"ready":true,"completed":1}
import { createServer } from 'node:http'
import { join } from 'node:path'

import { createEngine } from 'harmony-stream/engines'
import { createGatewayHandler, loadReplay } from 'harmony-stream/server'

const [answer] = loadReplay(join(import.meta.dirname, 'gateway', 'replay.json'))
const gateway = createGatewayHandler({ engine: createEngine('replay', { completions: [answer] }), responses: { store: null } })

const server = createServer((request, response) => {
  if (request.url === '/internal/ready') {
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end(JSON.stringify({ ready: true, completed: gateway.outcomes.completed }))
    return
  }
  gateway.handle(request, response)
})
server.on('upgrade', gateway.upgrade)
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
const base = `http://127.0.0.1:${server.address().port}`

const ready = async () => {
  const response = await fetch(`${base}/internal/ready`)
  console.log(`own route: ${response.status} ${await response.text()}`)
}
await ready()
// A streamed chat: the gateway counts it among its completed streams.
const response = await fetch(`${base}/v1/chat/completions`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ model: 'gpt-oss', stream: true, messages: [{ role: 'user', content: 'Capital of France?' }] }),
})
let text = ''
for (const line of (await response.text()).split('\n')) {
  if (line.startsWith('data: {')) text += JSON.parse(line.slice(6)).choices[0]?.delta?.content ?? ''
}
console.log(`gateway route: ${response.status} ${text}`)
await ready()

server.close()
await gateway.close()
