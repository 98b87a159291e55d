/**
 * An example gateway: an OpenAI-compatible HTTP server (Chat Completions and Responses, streaming over SSE or
 * not) in front of a token-level inference engine. Each request follows one line:
 *
 *   request → renderChatCompletionRequest / renderResponsesRequest → engine.generate → adapter → pipeSse
 *
 * Start it with `npm run gateway`; point any OpenAI client at http://127.0.0.1:8787/v1.
 *
 *   HARMONY_ENGINE   replay (default) | vllm | sglang | llamacpp | trtllm (any name createEngine knows)
 *   ENGINE_URL       the engine's base URL, e.g. http://127.0.0.1:8000 (vllm, sglang, llamacpp)
 *   ENGINE_MODEL     the model name the engine serves (vllm; required by trtllm)
 *   ENGINE_API       vllm: completions (default) or generate (the tokens-only /inference/v1/generate)
 *   HARMONY_REPLAY   replay engine: JSON file [{ "tokens": number[] }, …] of completions, served round-robin;
 *                    default replay.json beside this file; header x-harmony-replay: <index> picks one
 *   STREAM_INTERVAL  replay engine: tokens per engine step, default 1
 *   PORT             default 8787
 *   BODY_LIMIT       largest request body in bytes, default 4 MiB
 *   MODEL            the model id /v1/models lists, default gpt-oss
 *   GATEWAY_WORKERS  processes serving the port (node:cluster), default 1: one per core uses them all
 *   GATEWAY_FRAMES   sse (default): SSE bytes straight from the adapters; objects: events serialized (to compare)
 *   GATEWAY_STATS    1: GET /stats answers this process's CPU time, GC time and heap (for benchmarks)
 *   SSE_COALESCE_MS  collect each stream's frames for this many ms per write (default 0: write every step)
 *   LOG_DIAGNOSTICS  0: do not log what the parser recovered from (default 1: one line each on stderr)
 *   RENDER_WORKERS   threads that render requests off the event loop (default: cores less one; 0: render inline)
 *   RENDER_INLINE_BYTES  bodies up to this many bytes are parsed and rendered inline, larger ones in a worker (default 16384)
 *   HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS, KEEPALIVE_TIMEOUT_MS  the server's timeouts (default 10 s, 30 s, 5 s)
 *   UNKNOWN_FIELDS   refuse (default): a request field no table knows is a 400, as OpenAI answers; ignore: taken without it
 *   CHAT_ID_CACHE    1: a Chat request that answers the tool calls this gateway returned is prompted with the ids the
 *                    engine saw and generated (ChatIdCache), not a re-render; default 0
 *   HARMONY_RESPONSE_STORE  where Responses are kept (store, previous_response_id, GET/DELETE /v1/responses/{id}):
 *                    sqlite:PATH (default sqlite:responses.sqlite), memory, redis://HOST:PORT (shared by processes), none
 *   SOCKET_LIFETIME_MS  how long a Responses WebSocket connection lives (default 60 minutes, as the specification says)
 *   HARMONY_COMPACTION_KEY  64 hex digits: the key that seals compaction items (POST /v1/responses/compact); gateways
 *                    that share one open each other's compactions. Default: a random key per process
 */
import cluster from 'node:cluster'
import { randomBytes, randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { availableParallelism } from 'node:os'
import { dirname, join } from 'node:path'
import { PerformanceObserver } from 'node:perf_hooks'
import { fileURLToPath, pathToFileURL } from 'node:url'

import {
  BackgroundResponses,
  ChatCompletionsStream,
  ChatIdCache,
  Compactor,
  chatCompletion,
  chatGenerationParameters,
  checkCompactRequest,
  continuationItems,
  continuedBody,
  DEFAULT_BODY_LIMIT,
  DEFAULT_SOCKET_LIFETIME_MS,
  implementation as defaultImplementation,
  exactContinuation,
  generateRequestOf,
  HttpError,
  hardenServer,
  inputItemsOf,
  MemoryResponseStore,
  pipeSse,
  pipeStreamLog,
  previousResponse,
  RedisResponseStore,
  RenderWorkers,
  ResponsesStream,
  readJsonBody,
  readJsonBytes,
  renderChatCompletionRequest,
  renderResponsesRequest,
  responseObject,
  responseRecord,
  responsesGenerationParameters,
  SqliteResponseStore,
  sendError,
  serveResponsesSocket,
  sseEventTexts,
  storedResponse,
  storedResponseRoute,
} from 'harmony-stream'
import { collectSteps, createEngine, ReplayEngine } from 'harmony-stream/engines'
import { WebSocketServer } from 'ws'

/**
 * Creates (does not start) the gateway. `engine`: any `Engine` of harmony-stream/engines (or pass `replay`,
 * completions as token arrays, and `interval` for the replay engine); `implementation`: the parser's.
 * `renderWorkers`: threads that render large requests off the event loop (0: all inline), `renderInlineBytes`:
 * the body size up to which a request is rendered inline; `serverLimits`: `hardenServer`'s timeouts.
 * `unknownFields`: `'refuse'` (default) answers a request field no table knows with a 400, as OpenAI does;
 * `'ignore'` takes such requests without the field. `responseStore`: where Responses are kept (`store`,
 * `previous_response_id`, GET/DELETE /v1/responses/{id}); default a `MemoryResponseStore` (closed with the
 * server), `null` for none. `server.outcomes` counts how streams ended: `completed`, `failed`, `clientClosed`
 * (a client that left is an outcome, not an error: it is counted, never logged). `exactContinuations`
 * (default true): a continuation within a turn is made of the ids the engine saw and generated
 * (`exactContinuation`); false re-renders it from the stored items. `chatIdCache`: a `ChatIdCache` (default
 * null), which prompts a Chat request answering the tool calls this gateway returned with the ids the engine saw
 * and generated. `compactor`: the `Compactor` that makes and opens compaction items (`POST /v1/responses/compact`;
 * default one with a key of this process). `socketLifetimeMs`: how long a Responses WebSocket connection lives
 * (default 60 minutes).
 */
export function createGateway({
  engine,
  replay,
  interval = 1,
  implementation = defaultImplementation,
  model = 'gpt-oss',
  bodyLimit = DEFAULT_BODY_LIMIT,
  renderOptions = {},
  onDiagnostic = logDiagnostic,
  onError = logError,
  frames = 'sse',
  coalesceMs = 0,
  stats = null,
  renderWorkers = 0,
  renderInlineBytes = 16 * 1024,
  serverLimits = {},
  unknownFields = 'refuse',
  responseStore,
  exactContinuations = true,
  chatIdCache = null,
  compactor = new Compactor(),
  socketLifetimeMs = DEFAULT_SOCKET_LIFETIME_MS,
}) {
  // The library's default: responses kept in this process (bounded); null keeps none.
  const ownStore = responseStore === undefined
  const store = ownStore ? new MemoryResponseStore() : responseStore
  /** Background responses this process runs (and cancels, and streams to who resumes them). */
  const background = store === null ? null : new BackgroundResponses({ store, onError, onDiagnostic })
  engine ??= new ReplayEngine({ completions: replay, interval })
  const parameterOptions = { unknownFields }
  const workers = renderWorkers > 0 ? new RenderWorkers({ size: renderWorkers, renderOptions, parameterOptions }) : null
  const outcomes = { completed: 0, failed: 0, clientClosed: 0 }
  const created = Math.floor(Date.now() / 1000)

  /** Steps of one generation (an engine that fails before its first step: pipeSse and collectSteps throw, a 502/503). */
  function generate(request, prompt, params, signal, generated) {
    const header = request.headers['x-harmony-replay']
    const replayIndex = header === undefined ? undefined : Number(header)
    if (replayIndex !== undefined && !(engine instanceof ReplayEngine))
      throw new HttpError(400, 'x-harmony-replay applies to the replay engine only')
    if (replayIndex !== undefined && !(/^\d+$/.test(header) && engine.size > replayIndex)) {
      throw new HttpError(400, `x-harmony-replay must be an index from 0 to ${engine.size - 1}`, { param: 'x-harmony-replay' })
    }
    const steps = engine.generate({ ...generateRequestOf(prompt, params, signal), ...(replayIndex !== undefined ? { replayIndex } : {}) })
    return generated === null ? steps : recordIds(steps, generated)
  }

  /** What differs between the two APIs; the path through them is the same (`serve`). */
  const apis = {
    chat: {
      kind: 'chat',
      parameters: chatGenerationParameters,
      render: renderChatCompletionRequest,
      adapterOptions: (params, prompt) => ({
        model: params.model,
        promptTokens: prompt.promptTokens,
        ...(params.stop === undefined ? {} : { stop: params.stop }),
      }),
      whole: chatCompletion,
      stream: (options, params) => new ChatCompletionsStream({ ...options, includeUsage: params.includeUsage }),
    },
    responses: {
      kind: 'responses',
      parameters: responsesGenerationParameters,
      render: renderResponsesRequest,
      // The response object echoes its request (instructions, tools, tool_choice, metadata, sampling fields…):
      // the body read here, or the echo a render worker made of the body it parsed.
      adapterOptions: (params, prompt, body) => ({ model: params.model, inputTokens: prompt.promptTokens, request: body }),
      whole: responseObject,
      stream: (options) => new ResponsesStream(options),
    },
  }

  /**
   * The request's generation parameters and prompt: for a small body read, parsed and rendered here (with the
   * body, which a response echoes); a large one (over `renderInlineBytes`) is handed to a worker as bytes, so
   * neither JSON.parse nor BPE of it holds the event loop.
   */
  async function prepare(api, request) {
    // A Responses request's input is kept (stored), and one that continues a stored response or holds a
    // compaction item is rendered here (after the stored items, with the compaction opened).
    const keepInput = api.kind === 'responses' || (api.kind === 'chat' && chatIdCache !== null)
    const keeps = api.kind === 'responses' && store !== null
    const length = Number(request.headers['content-length'])
    if (workers !== null && !(Number.isFinite(length) && length <= renderInlineBytes)) {
      // The body stays in the worker; for Responses its echo comes back (what the response object says of it).
      const bytes = await readJsonBytes(request, { limit: bodyLimit })
      const prepared = await (keepInput ? workers.prepare(api.kind, bytes, { keepInput: true }) : workers.prepare(api.kind, bytes))
      if ('continuation' in prepared) {
        if (api.kind === 'chat') return exactChat(prepared.parameters, prepared.continuation)
        return continued(prepared.parameters, prepared.continuation, prepared.echo)
      }
      // The worker sends the input back only for a response to keep (`store` not false).
      const { parameters, prompt, echo, input } = prepared
      return { parameters, prompt, body: echo, history: [], input, storing: keeps && input !== undefined }
    }
    return prepareBody(api, await readJsonBody(request, { limit: bodyLimit }))
  }

  /**
   * A parsed body's parameters and prompt. `previous`: the response it continues, where the caller found it (a
   * WebSocket connection's latest); `offLoop`: render in a worker (where there are workers).
   */
  async function prepareBody(api, body, previous = undefined, offLoop = false) {
    const parameters = api.parameters(body, parameterOptions)
    if (api.kind === 'chat' && chatIdCache !== null) return exactChat(parameters, body)
    if (api.kind === 'responses' && (body.previous_response_id != null || compactor.holds(body)))
      return continued(parameters, body, body, previous)
    return {
      parameters,
      prompt: offLoop ? await renderOffLoop(api.kind, body) : api.render(body, renderOptions),
      body,
      history: [],
      input: body.input,
      storing: api.kind === 'responses' && store !== null && body.store !== false,
    }
  }

  /** A request rendered off the event loop when there are workers (else here). */
  function renderOffLoop(kind, request) {
    return workers !== null ? workers.render(kind, request) : apis[kind].render(request, renderOptions)
  }

  /**
   * What a Responses request stands on: its own input with a compaction item opened (`opened`), and the stored
   * response it names (`found` where the caller has it, a WebSocket connection's latest) with that response's
   * items (`history`), which come before the input.
   */
  async function historyOf(body, found = undefined) {
    // A compaction item stands for the items it sealed (its own input's; the stored ones come before it).
    const opened = compactor.expand(body)
    const previous = found ?? (body.previous_response_id == null ? null : await previousFor(body.previous_response_id))
    return { opened, previous, history: previous === null ? [] : continuationItems(previous) }
  }

  /** The items of the response `previous_response_id` names, or a 400 where no responses are kept (404: not kept). */
  async function previousFor(id) {
    if (store === null)
      throw new HttpError(
        400,
        'previous_response_id is not supported: this gateway keeps no responses; send the whole conversation in input',
        {
          param: 'previous_response_id',
        },
      )
    return previousResponse(store, id)
  }

  /**
   * A Responses request naming `previous_response_id`: rendered after the stored response's input and output,
   * or, within a turn (`exactContinuation`), made of the ids the engine saw and generated, so that its prefix
   * cache serves the whole history.
   */
  async function continued(parameters, body, echo, found = undefined) {
    const { opened, previous, history } = await historyOf(body, found)
    const render = (request) => renderOffLoop('responses', request)
    const rendered = await render(continuedBody(opened, history))
    const exact =
      exactContinuations && previous !== null
        ? await exactContinuation(previous, opened.input, rendered, () => render(continuedBody({ ...opened, input: [] }, history)))
        : null
    const storing = store !== null && body.store !== false
    return { parameters, prompt: exact ?? rendered, rendered, body: echo, history, input: opened.input, storing }
  }

  /**
   * `POST /v1/responses/compact`: the conversation (the stored response's items, then `input`) as its user
   * messages and one compaction item that seals all of it (`Compactor`). Rendered, so a conversation that
   * cannot be a prompt is refused here, not when it comes back; its prompt's tokens are the usage.
   */
  async function compact(request, response) {
    const body = checkCompactRequest(await readJsonBody(request, { limit: bodyLimit }), { unknownFields })
    const { opened, history } = await historyOf({ previous_response_id: body.previous_response_id, input: body.input ?? [] })
    const conversation = continuedBody(opened, history)
    const prompt = await renderOffLoop('responses', { model: body.model, instructions: body.instructions, input: conversation.input })
    sendJson(response, 200, compactor.compaction(conversation.input, { inputTokens: prompt.promptTokens }))
  }

  /** A Chat request with the id cache: its re-render, or the ids the engine saw and generated for it (`ChatIdCache`). */
  async function exactChat(parameters, body) {
    const render = (request) => renderOffLoop('chat', request)
    const rendered = await render(body)
    const exact = await chatIdCache.exactPrompt(body, rendered, render)
    return { parameters, prompt: exact ?? rendered, rendered, body, storing: false }
  }

  /** After a Chat completion that ended with tool calls: what the id cache keeps of it (a failure is logged). */
  async function rememberChat(completion, prepared, generated) {
    try {
      if (completion.choices[0]?.finish_reason !== 'tool_calls') return
      await chatIdCache.remember(completion.choices[0].message, {
        prompt: prepared.prompt.tokens,
        output: generated,
        rendered: prepared.rendered?.tokens,
      })
    } catch (error) {
      onError(error)
    }
  }

  /** Every item a response was generated from: the stored history, then its own input (with ids). */
  function keptInput(object, prepared) {
    return [...prepared.history, ...inputItemsOf({ input: prepared.input }, object.id.slice('resp_'.length))]
  }

  /** Keeps a finished response with every item it was generated from; a store that fails is logged, not fatal. */
  async function keepResponse(object, prepared, generated) {
    try {
      await store.put(recordOf(object, prepared, generated))
      return true
    } catch (error) {
      onError(error)
      return false
    }
  }

  /** What a continuation of a response starts from: every item it was generated from, and its ids. */
  function recordOf(object, prepared, generated) {
    const rendered = prepared.rendered === undefined ? {} : { rendered: prepared.rendered.tokens }
    return storedResponse(object, keptInput(object, prepared), { prompt: prepared.prompt.tokens, output: generated, ...rendered })
  }

  /** The adapter's options for a prepared request (a kept response gets its id here, and says it is kept). */
  function adapterOptions(api, prepared) {
    const { parameters: params, prompt, storing, body } = prepared
    return {
      ...(api.kind === 'responses' ? { id: `resp_${randomUUID().replaceAll('-', '')}`, stored: storing } : {}),
      ...api.adapterOptions(params, prompt, body),
      ...(prompt.responseFormat === undefined ? {} : { responseFormat: prompt.responseFormat }),
      ...(prompt.argumentSchemas === undefined ? {} : { argumentSchemas: prompt.argumentSchemas }),
      ...(params.logprobs === undefined ? {} : { logprobs: true }),
      parser: { implementation, toolNames: prompt.toolNames },
    }
  }

  /** request → parameters and prompt → engine → adapter → SSE (or one JSON object). */
  async function serve(api, request, response) {
    const prepared = await prepare(api, request)
    const { parameters: params, prompt, storing } = prepared
    const options = adapterOptions(api, prepared)
    if (params.background) return serveBackground(request, response, prepared, options)
    const abort = abortOnClose(response)
    const remembering = api.kind === 'chat' && chatIdCache !== null
    const generated = storing || remembering ? [] : null
    const steps = generate(request, prompt, params, abort.signal, generated)
    if (!params.stream) {
      const whole = await collectSteps(steps)
      if (whole.finishReason === 'abort') throw new HttpError(502, 'the inference engine aborted the request', { code: 'engine-aborted' })
      const object = withoutDiagnostics(api.whole(whole, options), onDiagnostic)
      // A response the store could not keep says so.
      if (storing && !(await keepResponse(object, prepared, generated))) object.store = false
      if (remembering) await rememberChat(object, prepared, generated)
      return sendJson(response, 200, object)
    }
    const adapter = api.stream(options, params)
    report(await pipeSse(response, adapter, steps, { abort, frames, coalesceMs }), adapter)
    if (storing) await keepResponse(adapter.response(), prepared, generated)
    if (remembering) await rememberChat(adapter.completion(), prepared, generated)
  }

  /**
   * One turn of a Responses WebSocket connection (`ResponsesSocket`): the body prepared as a POST's (with the
   * response the connection found for `previous_response_id`), its events emitted one by one; kept when
   * `store` says so. Returns the record a continuation on the connection starts from (also when not stored).
   */
  async function socketTurn(request, { body, previous, emit, signal, size }) {
    const prepared = await prepareBody(apis.responses, body, previous ?? undefined, size > renderInlineBytes)
    const adapter = new ResponsesStream(adapterOptions(apis.responses, prepared))
    const generated = []
    let started = false
    try {
      // The adapter's SSE face (its fast lane) cut into the events' JSON texts: one WebSocket message each.
      for await (const step of generate(request, prepared.prompt, prepared.parameters, signal, generated)) {
        started = true
        for (const text of sseEventTexts(adapter.pushSse(step))) await emit(text)
        // A client that stopped reading: nothing more is read from the engine.
        if (signal.aborted) break
      }
      for (const text of sseEventTexts(adapter.finishSse())) await emit(text)
    } catch (error) {
      // An engine that fails before its first step: the connection answers with an error frame (a 502).
      if (!started || signal.aborted) throw error
      onError(error)
      for (const event of adapter.error('the inference engine failed', 'engine_error')) await emit(event)
    }
    adapter.diagnostics.forEach(onDiagnostic)
    const object = adapter.response()
    if (prepared.storing && !(await keepResponse(object, prepared, generated))) object.store = false
    return recordOf(object, prepared, generated)
  }

  /**
   * `background: true` (`BackgroundResponses`): kept as `queued`, then answered at once, or streamed with
   * `stream` (a client that leaves comes back with `GET /v1/responses/{id}?stream=true&starting_after=N`); the
   * generation runs detached from the client's connection.
   */
  async function serveBackground(request, response, prepared, options) {
    if (!prepared.storing) throw new HttpError(400, 'background needs a gateway that keeps responses', { param: 'background' })
    const release = background.reserve()
    const adapter = new ResponsesStream({ ...options, background: true })
    const queued = adapter.response('queued')
    // Kept before it is answered: a store that cannot keep it fails the request (a 503 for a StoreError).
    try {
      await store.put(storedResponse(queued, keptInput(queued, prepared), { prompt: prepared.prompt.tokens, output: [] }))
    } catch (error) {
      release()
      throw error
    }
    const generated = []
    const log = background.start(
      {
        adapter,
        stream: prepared.parameters.stream,
        steps: (signal) => generate(request, prepared.prompt, prepared.parameters, signal, generated),
        keep: (object) => keepResponse(object, prepared, generated),
      },
      release,
    )
    if (log === null) sendJson(response, 200, queued)
    else await pipeStreamLog(response, log)
  }

  function report(result, adapter) {
    if (result.outcome === 'failed') onError(result.error)
    outcomes[result.outcome === 'client-closed' ? 'clientClosed' : result.outcome]++
    adapter.diagnostics.forEach(onDiagnostic)
  }

  const routes = {
    '/v1/chat/completions': { POST: (request, response) => serve(apis.chat, request, response) },
    '/v1/responses': { POST: (request, response) => serve(apis.responses, request, response) },
    '/v1/responses/compact': { POST: compact },
    '/v1/models': {
      GET: (_request, response) =>
        sendJson(response, 200, { object: 'list', data: [{ id: model, object: 'model', created, owned_by: 'harmony-stream' }] }),
    },
    '/health': { GET: (_request, response) => sendJson(response, 200, { status: 'ok', engine: engine.name, implementation }) },
  }
  if (stats !== null) routes['/stats'] = { GET: (_request, response) => sendJson(response, 200, { ...stats(), outcomes }) }

  const server = createServer(async (request, response) => {
    try {
      const url = new URL(request.url ?? '/', 'http://localhost')
      const path = url.pathname
      // POST /v1/responses/{id}/cancel: a background response.
      const cancelled = background === null ? null : /^\/v1\/responses\/([^/]+)\/cancel$/.exec(path)
      if (cancelled !== null) {
        if (request.method !== 'POST') {
          response.setHeader('allow', 'POST')
          throw new HttpError(405, `${path} accepts POST, not ${request.method}`, { code: 'method-not-allowed' })
        }
        return sendJson(response, 200, await background.cancel(decodeURIComponent(cancelled[1])))
      }
      // GET /v1/responses/{id}?stream=true: a background response's events.
      const resumed =
        background !== null && request.method === 'GET' && url.searchParams.get('stream') === 'true'
          ? /^\/v1\/responses\/([^/]+)$/.exec(path)
          : null
      if (resumed !== null) {
        const { log, after } = await background.stream(decodeURIComponent(resumed[1]), url.searchParams.get('starting_after'))
        return await pipeStreamLog(response, log, after)
      }
      // GET and DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items: the kept responses.
      const stored = store === null || routes[path] !== undefined ? null : await storedResponseRoute(store, request.method, url)
      if (stored !== null) {
        if (stored.status === 405) {
          response.setHeader('allow', stored.allow)
          throw new HttpError(405, `${path} accepts ${stored.allow}, not ${request.method}`, { code: 'method-not-allowed' })
        }
        return sendJson(response, stored.status, stored.body)
      }
      const route = routes[path]
      if (route === undefined) throw new HttpError(404, `no route for ${request.method} ${path}`, { code: 'not-found', type: 'not_found' })
      const handle = route[request.method]
      if (handle === undefined) {
        response.setHeader('allow', Object.keys(route).join(', '))
        throw new HttpError(405, `${path} accepts ${Object.keys(route).join(', ')}, not ${request.method}`, { code: 'method-not-allowed' })
      }
      await handle(request, response)
    } catch (error) {
      // A client that left before its first step (the engine request was aborted with it) is an outcome.
      if (response.destroyed && !response.writableFinished) {
        outcomes.clientClosed++
        return
      }
      if (sendError(response, error) >= 500) onError(error)
    }
  })
  hardenServer(server, serverLimits)
  server.outcomes = outcomes

  // The Responses API's WebSocket mode, at /v1/responses (ResponsesSocket: the protocol; ws: the transport).
  // Messages up to the body limit; a larger one closes the connection (1009).
  const sockets = new WebSocketServer({ noServer: true, maxPayload: bodyLimit })
  server.on('upgrade', (request, socket, head) => {
    if (new URL(request.url ?? '/', 'http://localhost').pathname !== '/v1/responses') {
      socket.end('HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n')
      return
    }
    if (sockets.clients.size >= MAX_SOCKETS) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\nretry-after: 5\r\ncontent-length: 0\r\n\r\n')
      return
    }
    sockets.handleUpgrade(request, socket, head, (ws) =>
      serveResponsesSocket(ws, {
        respond: (turn) => socketTurn(request, turn),
        ...(store === null ? {} : { lookup: (id) => responseRecord(store, id) }),
        onError,
        lifetimeMs: socketLifetimeMs,
      }),
    )
  })
  // Upgraded connections are not the HTTP server's to end: close them with it, or close() would wait for them.
  const closeServer = server.close.bind(server)
  server.close = (callback) => {
    for (const ws of sockets.clients) ws.terminate()
    // Background runs end now (cancelled), not when their followers' connections do.
    closing = background?.close() ?? Promise.resolve()
    return closeServer(callback)
  }
  if (workers !== null) server.on('close', () => workers.close())
  // Background responses end with the server (cancelled), then an own store closes.
  let closing = null
  server.on('close', () => {
    const ended = closing ?? background?.close() ?? Promise.resolve()
    if (ownStore) ended.then(() => store.close()).catch(onError)
  })
  return server
}

/** CPU, GC and heap of this process, for benchmarks (GATEWAY_STATS=1). */
function processStats() {
  let gcMs = 0
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcMs += entry.duration
  }).observe({ entryTypes: ['gc'] })
  return () => {
    const cpu = process.cpuUsage()
    return {
      pid: process.pid,
      cpuMs: (cpu.user + cpu.system) / 1000,
      gcMs,
      heapUsed: process.memoryUsage().heapUsed,
      rss: process.memoryUsage().rss,
    }
  }
}

/** Responses WebSocket connections one gateway process holds at once (more are answered 503). */
const MAX_SOCKETS = 1024

/** The steps as they come, each one's ids added to `generated` (what a kept response records). */
async function* recordIds(steps, generated) {
  for await (const step of steps) {
    for (const id of step.tokens) generated.push(id)
    yield step
  }
}

/** The store the environment asks for (HARMONY_RESPONSE_STORE, see the top of this file). */
export function responseStoreFromEnvironment(env = process.env) {
  const chosen = env.HARMONY_RESPONSE_STORE ?? 'sqlite:responses.sqlite'
  if (chosen === 'none') return null
  if (chosen === 'memory') return new MemoryResponseStore()
  if (chosen.startsWith('sqlite:')) return new SqliteResponseStore({ path: chosen.slice('sqlite:'.length) })
  if (chosen.startsWith('redis://') || chosen.startsWith('rediss://')) return new RedisResponseStore({ url: chosen })
  throw new Error('HARMONY_RESPONSE_STORE must be sqlite:PATH, memory, redis://HOST:PORT or none')
}

/** An AbortController aborted when the client goes away before the response is complete. */
function abortOnClose(response) {
  const abort = new AbortController()
  response.once('close', () => {
    if (!response.writableFinished) abort.abort()
  })
  return abort
}

function sendJson(response, status, body) {
  response.writeHead(status, { 'content-type': 'application/json' })
  response.end(JSON.stringify(body))
}

function logError(error) {
  console.error(`harmony-stream gateway: ${error?.stack ?? error}`)
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

/** The engine the environment asks for (see the top of this file). */
export function engineFromEnvironment(env = process.env) {
  const name = env.HARMONY_ENGINE ?? 'replay'
  if (name === 'replay') {
    const here = dirname(fileURLToPath(import.meta.url))
    const completions = loadReplay(env.HARMONY_REPLAY ?? join(here, 'replay.json'))
    return createEngine('replay', { completions, interval: Number(env.STREAM_INTERVAL ?? 1) })
  }
  if (!env.ENGINE_URL) throw new Error(`HARMONY_ENGINE=${name} needs ENGINE_URL (e.g. http://127.0.0.1:8000)`)
  if (name !== 'vllm' && env.ENGINE_API) throw new Error('ENGINE_API applies to HARMONY_ENGINE=vllm only')
  if (name !== 'vllm' && name !== 'trtllm' && env.ENGINE_MODEL)
    throw new Error('ENGINE_MODEL applies to HARMONY_ENGINE=vllm and trtllm only')
  return createEngine(name, {
    url: env.ENGINE_URL,
    ...(env.ENGINE_MODEL ? { model: env.ENGINE_MODEL } : {}),
    ...(env.ENGINE_API ? { api: env.ENGINE_API } : {}),
  })
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const workers = Number(process.env.GATEWAY_WORKERS ?? 1)
  if (!Number.isInteger(workers) || workers < 1) throw new Error('GATEWAY_WORKERS must be a positive integer')
  if (workers > 1 && cluster.isPrimary) {
    // The workers share the listening socket; the primary only keeps them running. They share one key for
    // compactions, so that one made by a worker opens in any other.
    const compactionKey = process.env.HARMONY_COMPACTION_KEY || randomBytes(32).toString('hex')
    const fork = () => cluster.fork({ HARMONY_COMPACTION_KEY: compactionKey })
    for (let i = 0; i < workers; i++) fork()
    cluster.on('exit', (worker, code, signal) => {
      if (code !== 0 && signal !== 'SIGTERM' && signal !== 'SIGINT') {
        console.error(`harmony-stream gateway: worker ${worker.process.pid} exited (${signal ?? code}); starting another`)
        fork()
      }
    })
  } else {
    serveFromEnvironment(workers > 1 ? ` [worker ${process.pid}]` : '')
  }
}

function serveFromEnvironment(label) {
  const engine = engineFromEnvironment()
  const port = Number(process.env.PORT ?? 8787)
  const bodyLimit = Number(process.env.BODY_LIMIT ?? DEFAULT_BODY_LIMIT)
  const frames = process.env.GATEWAY_FRAMES ?? 'sse'
  if (frames !== 'sse' && frames !== 'objects') throw new Error('GATEWAY_FRAMES must be sse or objects')
  const stats = process.env.GATEWAY_STATS === '1' ? processStats() : null
  const onDiagnostic = process.env.LOG_DIAGNOSTICS === '0' ? () => {} : logDiagnostic
  const coalesceMs = Number(process.env.SSE_COALESCE_MS ?? 0)
  const renderWorkers = Number(process.env.RENDER_WORKERS ?? Math.max(1, availableParallelism() - 1))
  const renderInlineBytes = Number(process.env.RENDER_INLINE_BYTES ?? 16 * 1024)
  const unknownFields = process.env.UNKNOWN_FIELDS ?? 'refuse'
  if (unknownFields !== 'refuse' && unknownFields !== 'ignore') throw new Error('UNKNOWN_FIELDS must be refuse or ignore')
  const serverLimits = {}
  for (const [name, key] of [
    ['HEADERS_TIMEOUT_MS', 'headersTimeoutMs'],
    ['REQUEST_TIMEOUT_MS', 'requestTimeoutMs'],
    ['KEEPALIVE_TIMEOUT_MS', 'keepAliveTimeoutMs'],
  ]) {
    if (process.env[name] !== undefined) serverLimits[key] = Number(process.env[name])
  }
  const server = createGateway({
    engine,
    bodyLimit,
    frames,
    coalesceMs,
    stats,
    onDiagnostic,
    model: process.env.MODEL ?? 'gpt-oss',
    renderWorkers,
    renderInlineBytes,
    serverLimits,
    unknownFields,
    responseStore: responseStoreFromEnvironment(),
    chatIdCache: process.env.CHAT_ID_CACHE === '1' ? new ChatIdCache() : null,
    ...(process.env.HARMONY_COMPACTION_KEY ? { compactor: new Compactor({ key: process.env.HARMONY_COMPACTION_KEY }) } : {}),
    ...(process.env.SOCKET_LIFETIME_MS ? { socketLifetimeMs: Number(process.env.SOCKET_LIFETIME_MS) } : {}),
  })
  server.listen(port, '127.0.0.1', () => {
    const { port: bound } = server.address()
    console.log(`harmony-stream gateway on http://127.0.0.1:${bound}/v1 (${defaultImplementation} parser, ${engine.name} engine)${label}`)
  })
  // A clean exit (open streams are cut): lets Node write what it must, e.g. a --cpu-prof profile.
  for (const signal of ['SIGTERM', 'SIGINT']) process.once(signal, () => process.exit(0))
}
