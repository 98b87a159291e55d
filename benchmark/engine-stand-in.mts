/**
 * An inference engine stand-in for the gateway benchmarks, run in a process of its own so that its CPU is not
 * the gateway's. Two faces, on any path but the probes below:
 *
 * - `vllm`: vLLM's `/v1/completions` token stream (the frames of vllm/entrypoints/openai/completion/serving.py,
 *   completion_stream_generator, with `return_token_ids`), what harmony-stream's gateway reads;
 * - `chat`: an OpenAI-compatible `/v1/chat/completions` stream, the chunks vLLM's own server sends once it has
 *   parsed the Harmony itself (reasoning as `reasoning_content`, the answer as `content`, tool calls), what a
 *   proxy such as LiteLLM reads: made by this package's Chat adapter from the same tokens, one chunk per token
 *   that has text.
 *
 * Both faces answer the GET probes a router sends before it routes to an engine (`/health`, `/v1/models`,
 * `/version`, below).
 *
 * Like a batching engine, it steps every running request at once: each step writes one frame per request, one
 * token each, then waits for the next turn of the event loop (`STEP_MS`: or that many milliseconds). Every
 * request gets the same completion (the first of the replay file given as argument), cut at its `max_tokens`
 * (then finished for `length`, as vLLM does) on both faces.
 *
 *   node --import tsx benchmark/engine-stand-in.mts vllm|chat target/bench-replay.json   prints `listening on http://127.0.0.1:PORT`
 */
import { readFileSync } from 'node:fs'
import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

import { ChatCompletionsStream } from 'harmony-stream'

const face = process.argv[2]
if (face !== 'vllm' && face !== 'chat') throw new Error('engine-stand-in: the first argument is vllm or chat')
const [{ tokens: completion }] = JSON.parse(readFileSync(process.argv[3]!, 'utf8')) as { tokens: number[] }[]
const stepMs = Number(process.env.STEP_MS ?? 0)

/**
 * The `chat` face's frames of the completion's first `tokens`: one per token that has text, then the finish chunk
 * (`length` when cut short, as the adapter says of a message left open), usage and `[DONE]`. Made once per length.
 */
const chatFramesByLength = new Map<number, string[]>()
function chatFrames(tokens: number): string[] {
  let frames = chatFramesByLength.get(tokens)
  if (frames === undefined) {
    const adapter = new ChatCompletionsStream({ model: 'gpt-oss', id: 'chatcmpl-1', created: 1, includeUsage: true })
    frames = completion
      .slice(0, tokens)
      .map((id) => adapter.pushSse([id]))
      .filter((frame) => frame !== '')
    frames.push(adapter.finishSse())
    chatFramesByLength.set(tokens, frames)
  }
  return frames
}

interface Running {
  response: ServerResponse
  /** vllm: the token ids to send; chat: the frames. */
  ids: number[]
  frames: string[]
  sent: number
  promptTokens: number
}

const running = new Set<Running>()
let stepping = false

const frame = (choice: Record<string, unknown>) =>
  `data: ${JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: 'gpt-oss', choices: [choice] })}\n\n`

/**
 * The `vllm` face's frames of every token but a stream's last, made once as the `chat` face's are: the two faces
 * then cost the stand-in alike per token, which matters where the proxies and the stand-in share a few cores.
 */
const tokenFrames = completion.map((id) =>
  frame({ index: 0, text: '', logprobs: null, finish_reason: null, stop_reason: null, token_ids: [id] }),
)

function step(): void {
  for (const request of running) {
    if (request.response.destroyed) {
      running.delete(request)
      continue
    }
    if (face === 'chat') {
      const out = request.frames[request.sent++]!
      if (request.sent === request.frames.length) {
        request.response.end(out)
        running.delete(request)
      } else request.response.write(out)
      continue
    }
    const id = request.ids[request.sent++]!
    if (request.sent === request.ids.length) {
      // Cut at max_tokens, vLLM says `length`.
      const finish = request.ids.length < completion.length ? 'length' : 'stop'
      let out = frame({ index: 0, text: '', logprobs: null, finish_reason: finish, stop_reason: null, token_ids: [id] })
      const usage = {
        prompt_tokens: request.promptTokens,
        completion_tokens: request.sent,
        total_tokens: request.promptTokens + request.sent,
      }
      out += `data: ${JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: 'gpt-oss', choices: [], usage })}\n\ndata: [DONE]\n\n`
      request.response.end(out)
      running.delete(request)
    } else {
      // ids are the completion's first max_tokens: token `sent - 1` of the completion.
      request.response.write(tokenFrames[request.sent - 1]!)
    }
  }
  if (running.size === 0) stepping = false
  else if (stepMs > 0) setTimeout(step, stepMs)
  else setImmediate(step)
}

/**
 * What a router asks an engine before it routes to it, answered as vLLM's server does, so that SMG (the
 * Shepherd Model Gateway) registers the stand-in as an HTTP worker. SMG's worker registration, followed here
 * (lightseekorg/smg, model_gateway/src/workflow/steps): `GET /health` must answer 2xx for the worker to be
 * reachable over HTTP (util.rs, try_http_reachable; the same path is its periodic health check); `GET /v1/models`
 * names the engine in `owned_by` (local/detect_backend.rs, detect_via_models_endpoint: "vllm") and the model in
 * `id`, which becomes the worker's model and must match the requests' `model` (local/discover_metadata.rs,
 * fetch_vllm_http_metadata, with `root` as model path and `max_model_len`); `GET /version` is vLLM's
 * (try_vllm_version). Without these the stand-in would answer a probe with a completion stream.
 */
const probes: Record<string, object> = {
  '/health': {},
  '/v1/models': {
    object: 'list',
    data: [{ id: 'gpt-oss', object: 'model', created: 1, owned_by: 'vllm', root: 'gpt-oss', max_model_len: 131072 }],
  },
  '/version': { version: 'engine-stand-in' },
}

const server = createServer((request, response) => {
  const probe = request.method === 'GET' ? probes[request.url ?? ''] : undefined
  if (probe) {
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end(JSON.stringify(probe))
    return
  }
  let body = ''
  request.setEncoding('utf8')
  request.on('data', (chunk) => (body += chunk))
  request.on('end', () => {
    const { prompt, max_tokens: maxTokens } = (body === '' ? {} : JSON.parse(body)) as { prompt?: number[]; max_tokens?: number }
    response.socket?.setNoDelay(true)
    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    const ids = completion.slice(0, maxTokens ?? completion.length)
    running.add({ response, ids, frames: face === 'chat' ? chatFrames(ids.length) : [], sent: 0, promptTokens: prompt?.length ?? 0 })
    if (!stepping) {
      stepping = true
      setImmediate(step)
    }
  })
})
server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}`))
process.on('SIGTERM', () => process.exit(0))
