/**
 * An example gateway: an OpenAI-compatible HTTP server (Chat Completions and Responses, streaming over SSE
 * or not) in front of a replay engine that stands in for an inference server. Start it with
 * `npm run gateway`; point any OpenAI client at http://127.0.0.1:8787/v1.
 *
 *   HARMONY_REPLAY   JSON file [{ "tokens": number[] }, …]: completion token streams (each following
 *                    <|start|>assistant), served in order, round-robin; default: replay.json beside this file
 *   PORT             default 8787
 *   STREAM_INTERVAL  tokens per engine step, default 1
 *   header x-harmony-replay: <index> picks a completion for one request
 */
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { dirname, join } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

import { ChatCompletionsStream, ResponsesStream, chatCompletion, implementation as defaultImplementation, responseObject } from 'harmony-stream'

class HttpError extends Error {
  constructor(status, message) {
    super(message)
    this.status = status
  }
}

/** The replay engine: yields a completion's tokens `interval` at a time, one engine step per event-loop turn. */
async function* engineSteps(tokens, interval) {
  for (let i = 0; i < tokens.length; i += interval) {
    await new Promise((resolve) => setImmediate(resolve))
    yield tokens.slice(i, i + interval)
  }
}

async function readJson(request) {
  const chunks = []
  for await (const chunk of request) chunks.push(chunk)
  let body
  try {
    body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}')
  } catch {
    throw new HttpError(400, 'the request body is not JSON')
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new HttpError(400, 'the request body must be a JSON object')
  return body
}

/** Tool names the request offered, for the parser's `toolNames` (Chat: {function: {name}}; Responses: {name}). */
function toolNames(body) {
  const tools = Array.isArray(body.tools) ? body.tools : []
  return tools.map((tool) => tool?.function?.name ?? tool?.name).filter((name) => typeof name === 'string' && name !== '').map((name) => `functions.${name}`)
}

function sendJson(response, status, body) {
  response.writeHead(status, { 'content-type': 'application/json' })
  response.end(JSON.stringify(body))
}

function startSse(response) {
  response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' })
}

/**
 * Creates (does not start) the gateway. `replay`: completions as token arrays; `interval`: tokens per engine
 * step; `implementation`: the parser implementation for every request.
 */
export function createGateway({ replay, interval = 1, implementation = defaultImplementation, model = 'gpt-oss-replay', onDiagnostic = logDiagnostic, onError = logError }) {
  if (!Array.isArray(replay) || replay.length === 0) throw new Error('the replay needs at least one completion')
  if (!Number.isInteger(interval) || interval < 1) throw new Error('STREAM_INTERVAL must be a positive integer')
  let next = 0
  const pick = (request) => {
    const header = request.headers['x-harmony-replay']
    if (header === undefined) return replay[next++ % replay.length]
    const index = /^\d+$/.test(header) ? Number(header) : -1
    if (index < 0 || index >= replay.length) {
      throw new HttpError(400, `x-harmony-replay must be an index from 0 to ${replay.length - 1}`)
    }
    return replay[index]
  }

  async function chat(request, response, body) {
    const tokens = pick(request)
    const options = { model: body.model ?? model, parser: { implementation, toolNames: toolNames(body) } }
    if (!body.stream) return sendJson(response, 200, withoutDiagnostics(chatCompletion(tokens, options), onDiagnostic))
    const stream = new ChatCompletionsStream({ ...options, includeUsage: body.stream_options?.include_usage === true })
    startSse(response)
    try {
      for await (const step of engineSteps(tokens, interval)) {
        if (response.destroyed) return
        for (const chunk of stream.push(step)) response.write(`data: ${JSON.stringify(chunk)}\n\n`)
      }
      for (const chunk of stream.finish()) response.write(`data: ${JSON.stringify(chunk)}\n\n`)
    } catch (error) {
      // Mid-stream, the status line is gone: an error frame, which OpenAI clients raise as an APIError.
      onError(error)
      response.end(`data: ${JSON.stringify({ error: { message: error.message, type: 'server_error', code: error.code ?? null } })}\n\n`)
      return
    }
    response.end('data: [DONE]\n\n')
    stream.diagnostics.forEach(onDiagnostic)
  }

  async function responses(request, response, body) {
    const tokens = pick(request)
    const options = { model: body.model ?? model, parser: { implementation, toolNames: toolNames(body) } }
    if (!body.stream) return sendJson(response, 200, withoutDiagnostics(responseObject(tokens, options), onDiagnostic))
    const stream = new ResponsesStream(options)
    startSse(response)
    const send = (events) => {
      for (const event of events) response.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`)
    }
    send(stream.start())
    try {
      for await (const step of engineSteps(tokens, interval)) {
        if (response.destroyed) return
        send(stream.push(step))
      }
      send(stream.finish())
    } catch (error) {
      // Mid-stream: the Responses API's `error` event, which OpenAI clients raise.
      onError(error)
      send([stream.error(error.message, error.code)])
      response.end()
      return
    }
    response.end()
    stream.diagnostics.forEach(onDiagnostic)
  }

  return createServer(async (request, response) => {
    try {
      const path = new URL(request.url ?? '/', 'http://localhost').pathname
      if (request.method !== 'POST' || (path !== '/v1/chat/completions' && path !== '/v1/responses')) {
        throw new HttpError(404, `no route for ${request.method} ${path}`)
      }
      const body = await readJson(request)
      await (path === '/v1/chat/completions' ? chat : responses)(request, response, body)
    } catch (error) {
      const status = error instanceof HttpError ? error.status : 500
      if (status === 500) onError(error)
      if (!response.headersSent) sendJson(response, status, { error: { message: error.message, type: status === 500 ? 'server_error' : 'invalid_request_error' } })
      else response.end()
    }
  })
}

function logError(error) {
  console.error(`harmony-stream gateway: ${error.stack ?? error}`)
}

/** What the parser recovered from, and tool arguments that are not JSON: worth a log line, not a failure. */
function logDiagnostic(diagnostic) {
  console.warn(`harmony-stream: ${diagnostic.code}: ${diagnostic.message}`)
}

/** The non-streaming adapters return diagnostics beside the wire object. */
function withoutDiagnostics({ diagnostics, ...wire }, onDiagnostic) {
  diagnostics.forEach(onDiagnostic)
  return wire
}

export function loadReplay(path) {
  const replay = JSON.parse(readFileSync(path, 'utf8'))
  if (!Array.isArray(replay) || !replay.every((entry) => Array.isArray(entry?.tokens))) {
    throw new Error(`${path}: expected [{ "tokens": number[] }, …]`)
  }
  return replay.map((entry) => entry.tokens)
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const here = dirname(fileURLToPath(import.meta.url))
  const replayPath = process.env.HARMONY_REPLAY ?? join(here, 'replay.json')
  const replay = loadReplay(replayPath)
  const port = Number(process.env.PORT ?? 8787)
  const interval = Number(process.env.STREAM_INTERVAL ?? 1)
  const server = createGateway({ replay, interval })
  server.listen(port, '127.0.0.1', () => {
    const { port: bound } = server.address()
    console.log(`harmony-stream gateway on http://127.0.0.1:${bound}/v1 (${defaultImplementation} parser, ${replay.length} completions from ${replayPath}, ${interval} token(s) per step)`)
  })
}
