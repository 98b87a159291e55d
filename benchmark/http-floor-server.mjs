/**
 * The floor under bench:gateway: a bare `node:http` server that answers each streaming request with what the
 * gateway writes for the same replay completions (one write per stream per engine step, one step per
 * event-loop turn, STREAM_INTERVAL tokens a step, the completion's token count in the last frame), but with
 * one prebuilt frame and no engine, parser, adapter or gateway. Its CPU per token is what Node spends on the
 * turn and the socket write alone: no gateway in front of the same engine can cost less without fewer writes.
 * Started by benchmark/gateway.mts like the example gateway (PORT=0, prints its address).
 */
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'

const completions = JSON.parse(readFileSync(process.env.HARMONY_REPLAY, 'utf8')).map((c) => c.tokens.length)
const interval = Number(process.env.STREAM_INTERVAL ?? 1)
const frame = `data: ${JSON.stringify({
  id: 'chatcmpl-floor',
  object: 'chat.completion.chunk',
  created: 0,
  model: 'gpt-oss',
  choices: [{ index: 0, delta: { content: ' word' }, finish_reason: null }],
})}\n\n`
let next = 0

const turn = () => new Promise((resolve) => setImmediate(resolve))

const server = createServer((request, response) => {
  const tokens = completions[next++ % completions.length]
  request.resume().on('end', async () => {
    response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' })
    for (let sent = 0; sent < tokens && !response.destroyed; sent += interval) {
      await turn()
      if (!response.write(frame)) await new Promise((resolve) => response.once('drain', resolve))
    }
    response.end(`data: ${JSON.stringify({ usage: { completion_tokens: tokens } })}\n\ndata: [DONE]\n\n`)
  })
})
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  console.log(`http floor on http://127.0.0.1:${server.address().port}/v1`)
})
process.on('SIGTERM', () => process.exit(0))
