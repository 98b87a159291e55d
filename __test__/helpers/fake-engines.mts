/**
 * Local stand-ins for inference servers, on 127.0.0.1, speaking each engine's wire format as its source does
 * (see the comments in src/engines/*.ts for the files followed): vLLM `/v1/completions` and
 * `/inference/v1/generate`, SGLang `/generate` (cumulative or incremental `output_ids`, the stop token kept or
 * trimmed and named in `matched`), llama.cpp `/completion` (`error:` lines or `data: {"error"}`). Each records
 * the request bodies it received and whether (after how many chunks, how long after the request) the client
 * closed the connection before the stream ended, and can fail in the ways engines fail: an HTTP error with the
 * engine's error body, an error mid-stream, a dropped connection, a stall, a slow head, a slow stream.
 */
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface FakeBehaviour {
  /** The ids the "model" generates (a stop token at the end, or not); the fake stops at the first stop id. */
  completion: number[]
  /** Ids per streamed chunk. Default 1. */
  chunk?: number
  /** Put the stop token into the ids too (it is always named in the stop reason where the engine has one). */
  stopInIds?: boolean
  /** SGLang: stream only the new ids (`--incremental-streaming-output`). */
  incremental?: boolean
  /** Answer this HTTP status with the engine's error body instead of streaming. */
  httpError?: number
  /** With `httpError`: a body that is not JSON. */
  httpErrorText?: string
  /** After this many chunks: an error event (the engine's own shape). */
  failAfter?: number
  /** llama.cpp: how its error mid-stream is framed: `data: {"error": …}` (current) or `error: {…}` (older). */
  errorFraming?: 'data' | 'line'
  /** After this many chunks: drop the connection. */
  dropAfter?: number
  /** After this many chunks: stop sending anything (a stalled engine). */
  stallAfter?: number
  /** After this many chunks: send only SSE comments (heartbeats, as proxies send them) until the client leaves. */
  heartbeatAfter?: number
  /** Wait this long before the response head (llama.cpp sends it after the prefill). -1: never. */
  headDelayMs?: number
  /** Wait this long between chunks. */
  delayMs?: number
  /** Pad each chunk's JSON (bytes), to make a big stream. */
  padding?: number
  /** Frame as loosely as SSE allows: `\r\n`, comment lines, data split over several lines, a few bytes per write. */
  looseFraming?: boolean
  /** llama.cpp: keep generating past stop ids (a stop id the server does not treat as end-of-generation). */
  ignoreStops?: boolean
  /** Generate past the request's token limit (a runaway engine that ignores max_tokens). */
  ignoreLimit?: boolean
  /** vLLM generate: no finish reason, as when the finishing output brings no new ids (the server skips it). */
  omitFinish?: boolean
  /**
   * Prompt tokens served from the prefix cache, reported as the engine does (sent as given, a bad value too):
   * vLLM and trtllm-serve `usage.prompt_tokens_details.cached_tokens` (vLLM generate: not when 0, as the server
   * does), SGLang `meta_info.cached_tokens` (every output), llama.cpp `timings.cache_n` (the final result).
   * Unset: the field is left out, as by vLLM without `--enable-prompt-tokens-details` or a server that predates it.
   */
  cachedTokens?: number
  /** llama.cpp: name an id past the vocabulary as the likeliest alternative of every id (a broken engine). */
  badAlternative?: boolean
}

export interface FakeEngine {
  url: string
  bodies: Record<string, unknown>[]
  /** Request headers as received. */
  headers: IncomingMessage['headers'][]
  /** Connections the client closed before the stream's end. */
  clientClosed: number
  /** Connections this fake dropped (`dropAfter`). */
  dropped: number
  /** For each such close: the chunks written before it, and the ms since the request arrived. */
  closes: { chunks: number; ms: number }[]
  /** The largest number of bytes the server had waiting in its socket buffer (writes not yet taken by TCP). */
  maxBuffered: number
  /** Writes that returned false (the client was not reading). */
  blockedWrites: number
  /** Bytes handed to the socket so far (all requests). */
  bytesSent: number
  close(): Promise<void>
}

const STOPS = [200002, 200012]

type Writer = (res: ServerResponse, body: Record<string, unknown>, behaviour: FakeBehaviour, send: Sender) => Promise<void>
type Sender = (frame: string) => Promise<boolean>

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The responses whose connection a fake dropped itself (`dropAfter`), counted as `dropped` when they close. */
const droppedHere = new WeakSet<ServerResponse>()

async function fake(
  path: string,
  behaviour: FakeBehaviour,
  write: Writer,
  httpErrorBody: (message: string, status: number) => unknown,
  /** The engine's own validation of a request body: a message for its 400, or null to serve it. */
  refuse: (body: Record<string, unknown>) => string | null = () => null,
): Promise<FakeEngine> {
  const engine: FakeEngine = {
    url: '',
    bodies: [],
    headers: [],
    clientClosed: 0,
    dropped: 0,
    closes: [],
    maxBuffered: 0,
    blockedWrites: 0,
    bytesSent: 0,
    close: async () => {},
  }
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const started = Date.now()
    let text = ''
    for await (const chunk of req) text += chunk
    // A request without a body (`serve` asking `GET /v1/models` what the engine is) is no generation: a 404 below.
    const body = (text === '' ? {} : JSON.parse(text)) as Record<string, unknown>
    engine.bodies.push(body)
    engine.headers.push(req.headers)
    if (req.url !== path || req.method !== 'POST') {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify(httpErrorBody(`no route ${req.url}`, 404)))
      return
    }
    if (behaviour.httpError !== undefined) {
      const errorBody =
        behaviour.httpErrorText ?? JSON.stringify(httpErrorBody('the prompt is too long for this model', behaviour.httpError))
      res.writeHead(behaviour.httpError, { 'content-type': behaviour.httpErrorText ? 'text/plain' : 'application/json' }).end(errorBody)
      return
    }
    const refusal = refuse(body)
    if (refusal !== null) {
      res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify(httpErrorBody(refusal, 400)))
      return
    }
    let chunks = 0
    res.on('close', () => {
      if (droppedHere.has(res)) engine.dropped++
      if (!res.writableFinished) {
        engine.clientClosed++
        engine.closes.push({ chunks, ms: Date.now() - started })
      }
    })
    if (behaviour.headDelayMs === -1) return // never answers: the client's read timeout must
    if (behaviour.headDelayMs) await sleep(behaviour.headDelayMs)
    if (res.destroyed) return
    res.socket?.setNoDelay(true)
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    const send: Sender = async (frame) => {
      if (res.destroyed) return false
      chunks++
      const pieces = behaviour.looseFraming ? loosen(frame) : [frame]
      for (const piece of pieces) {
        if (res.destroyed) return false
        const ok = res.write(piece)
        engine.bytesSent += Buffer.byteLength(piece)
        engine.maxBuffered = Math.max(engine.maxBuffered, res.writableLength)
        if (!ok) {
          engine.blockedWrites++
          // The wait that loses the race is cancelled: its listeners would pile up, one pair per full buffer.
          const waited = new AbortController()
          await Promise.race([once(res, 'drain', { signal: waited.signal }), once(res, 'close', { signal: waited.signal })]).finally(() =>
            waited.abort(),
          )
        }
        if (pieces.length > 1) await sleep(1)
      }
      return !res.destroyed
    }
    await write(res, body, behaviour, send)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  engine.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  engine.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve())
      server.closeAllConnections()
    })
  return engine
}

/**
 * The same events framed as loosely as the SSE format allows: a comment line first, `\r\n` line ends, the
 * JSON's data split over two `data:` lines (joined by "\n", still the same JSON), and the bytes cut into
 * pieces of 7 (inside a multi-byte character too, when there is one).
 */
function loosen(frame: string): Buffer[] {
  const events = frame.split('\n\n').filter((e) => e !== '')
  const text = events
    .map((event) => {
      const [field, ...rest] = event.split(': ')
      const value = rest.join(': ')
      const lines =
        field === 'data' && value.startsWith('{') && value.includes(',')
          ? [value.slice(0, value.indexOf(',') + 1), value.slice(value.indexOf(',') + 1)]
          : [value]
      return `: keep-alive\r\n${lines.map((line) => `${field}:${line}`).join('\r\n')}\r\n\r\n`
    })
    .join('')
  const bytes = Buffer.from(text)
  const pieces: Buffer[] = []
  for (let at = 0; at < bytes.length; at += 7) pieces.push(bytes.subarray(at, at + 7))
  return pieces
}

interface Frames {
  chunk(ids: number[], sent: number[]): string
  final(ids: number[], sent: number[], reason: 'stop' | 'length', stop: number | undefined): string
  error(message: string): string
  end?: string
}

/**
 * The generation loop all fakes share: the completion up to its first stop id (or all of it, `ignoreStops`)
 * and the request's token limit, `chunk` ids per frame; the behaviour's failures and delays happen between
 * frames. The stop id goes into the last frame's ids only with `stopInIds`.
 */
async function stream(
  res: ServerResponse,
  behaviour: FakeBehaviour,
  send: Sender,
  maxTokens: number | undefined,
  frames: Frames,
): Promise<void> {
  if (behaviour.ignoreLimit) maxTokens = undefined
  const stopAt = behaviour.ignoreStops ? -1 : behaviour.completion.findIndex((id) => STOPS.includes(id))
  const natural = stopAt < 0 ? behaviour.completion : behaviour.completion.slice(0, stopAt + 1)
  const generated = natural.slice(0, Math.min(natural.length, maxTokens ?? Infinity))
  const last = generated[generated.length - 1]
  const stopped = generated.length === natural.length && !behaviour.ignoreStops && STOPS.includes(last)
  const sent: number[] = []
  const size = behaviour.chunk ?? 1
  let index = 0
  for (let at = 0; at < generated.length; at += size, index++) {
    if (behaviour.delayMs) await sleep(behaviour.delayMs)
    if (behaviour.failAfter === index) {
      await send(frames.error('CUDA out of memory'))
      if (frames.end) await send(frames.end)
      res.end()
      return
    }
    if (behaviour.dropAfter === index) {
      // What was written goes out first (a crash after those frames), then the connection drops.
      await sleep(50)
      droppedHere.add(res)
      res.socket?.destroy()
      return
    }
    if (behaviour.stallAfter === index) return // never ends: the client's read timeout must
    if (behaviour.heartbeatAfter === index) {
      // Bytes, but no tokens: only a limit on tokens ends this.
      while (await send(': keep-alive\n\n')) await sleep(5)
      return
    }
    const ids = generated.slice(at, at + size)
    if (at + size >= generated.length) {
      const reason = stopped ? 'stop' : 'length'
      const visible = reason === 'stop' && !behaviour.stopInIds ? ids.slice(0, -1) : ids
      if (!(await send(frames.final(visible, sent, reason, reason === 'stop' ? last : undefined)))) return
      sent.push(...visible)
    } else {
      if (!(await send(frames.chunk(ids, sent)))) return
      sent.push(...ids)
    }
  }
  if (generated.length === 0 && !(await send(frames.final([], sent, 'length', undefined)))) return
  if (frames.end && !(await send(frames.end))) return
  res.end()
}

/**
 * The stand-ins' "model": the log probability of generating `id` at `position`, and the likeliest ids there
 * (the generated one first, then others, each less likely), as many as asked. Each engine's stand-in writes
 * these in its own shape; tests compare what the clients read with this.
 */
export function fakeLogprobs(id: number, position: number, count: number): { logprob: number; top: { id: number; logprob: number }[] } {
  const logprob = -0.01 - ((id * 7 + position) % 10) / 20
  const top = [{ id, logprob }]
  for (let k = 1; top.length < count; k++) top.push({ id: (id + k * 101) % 199_998, logprob: logprob - k / 2 })
  return { logprob, top: top.slice(0, count) }
}

/** vLLM's and trtllm-serve's `usage.prompt_tokens_details` (UsageInfo), when the behaviour reports cached tokens. */
const promptDetails = (cached: number | undefined) => (cached === undefined ? {} : { prompt_tokens_details: { cached_tokens: cached } })

const pad = (behaviour: FakeBehaviour) => (behaviour.padding ? { padding: 'x'.repeat(behaviour.padding) } : {})

/** vLLM's error object (vllm/entrypoints/openai/engine/protocol.py, ErrorResponse), for HTTP errors and mid-stream. */
const vllmError = (message: string, code: number) => ({ error: { message, type: 'BadRequestError', param: null, code } })

/** vLLM `/v1/completions` (vllm/entrypoints/openai/completion/serving.py, completion_stream_generator). */
export function fakeVllm(behaviour: FakeBehaviour): Promise<FakeEngine> {
  return fake(
    '/v1/completions',
    behaviour,
    async (res, body, b, send) => {
      const frame = (choice: Record<string, unknown>) =>
        `data: ${JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: body.model ?? 'gpt-oss', choices: [choice], ...pad(b) })}\n\n`
      // _create_completion_logprobs: the chunk's ids (as `token_id:N` with return_tokens_as_token_ids), up to N+1 alternatives.
      const name = (id: number) => (body.return_tokens_as_token_ids === true ? `token_id:${id}` : `text${id}`)
      const logprobs = (ids: number[], sent: number[]) => {
        if (typeof body.logprobs !== 'number') return null
        const entries = ids.map((id, i) => fakeLogprobs(id, sent.length + i, (body.logprobs as number) + 1))
        return {
          text_offset: ids.map(() => 0),
          token_logprobs: entries.map((e) => e.logprob),
          tokens: ids.map(name),
          top_logprobs: entries.map((e) => Object.fromEntries(e.top.map((t) => [name(t.id), t.logprob]))),
        }
      }
      await stream(res, b, send, body.max_tokens as number, {
        chunk: (ids, sent) =>
          frame({
            index: 0,
            text: '',
            logprobs: logprobs(ids, sent),
            finish_reason: null,
            stop_reason: null,
            token_ids: ids,
            ...(sent.length === 0 ? { prompt_token_ids: body.prompt } : {}),
          }),
        final: (ids, sent, reason, stop) =>
          frame({ index: 0, text: '', logprobs: logprobs(ids, sent), finish_reason: reason, stop_reason: stop ?? null, token_ids: ids }) +
          `data: ${JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: 'gpt-oss', choices: [], usage: { prompt_tokens: (body.prompt as number[]).length, completion_tokens: sent.length + ids.length, total_tokens: 0, ...promptDetails(b.cachedTokens) } })}\n\n`,
        error: (message) => `data: ${JSON.stringify(vllmError(message, 500))}\n\n`,
        end: 'data: [DONE]\n\n',
      })
    },
    vllmError,
  )
}

/** vLLM `/inference/v1/generate` (vllm/entrypoints/serve/disagg/serving.py, serve_tokens_stream_generator). */
export function fakeVllmGenerate(behaviour: FakeBehaviour): Promise<FakeEngine> {
  return fake(
    '/inference/v1/generate',
    behaviour,
    async (res, body, b, send) => {
      const sampling = body.sampling_params as Record<string, unknown>
      const frame = (ids: number[], reason: string | null) =>
        `data: ${JSON.stringify({ request_id: 'generate-tokens-1', choices: [{ index: 0, logprobs: null, finish_reason: reason, token_ids: ids }], usage: null, ...pad(b) })}\n\n`
      // serve_tokens_stream_generator adds prompt_tokens_details only when the count is truthy (not 0).
      const usage = (count: number) =>
        `data: ${JSON.stringify({ request_id: 'generate-tokens-1', choices: [], usage: { prompt_tokens: (body.token_ids as number[]).length, completion_tokens: count, total_tokens: 0, ...(b.cachedTokens ? promptDetails(b.cachedTokens) : {}) } })}\n\n`
      // vLLM keeps the stop id in the ids, and this endpoint has no stop reason to name it otherwise.
      await stream(res, { ...b, stopInIds: true }, send, sampling.max_tokens as number | undefined, {
        chunk: (ids) => frame(ids, null),
        // The server skips an output without new ids, finish reason and all.
        final: (ids, sent, reason) => {
          const count = usage(sent.length + ids.length)
          if (ids.length === 0) return count
          // `omitFinish`: the last ids came in an output of their own, the finishing output after them had none.
          return (b.omitFinish ? frame(ids, null) : frame(ids, reason)) + count
        },
        error: (message) => `data: ${JSON.stringify(vllmError(message, 500))}\n\n`,
        end: 'data: [DONE]\n\n',
      })
    },
    vllmError,
  )
}

/** SGLang `/generate` (python/sglang/srt/entrypoints/http_server.py; tokenizer_manager.py's outputs). */
export function fakeSglang(behaviour: FakeBehaviour): Promise<FakeEngine> {
  const errorBody = (message: string) => ({ error: { message } })
  return fake(
    '/generate',
    behaviour,
    async (res, body, b, send) => {
      const sampling = body.sampling_params as Record<string, unknown>
      const prompt = (body.input_ids as number[]).length
      // With return_logprob: a [logprob, id, null] triple per output id and top_logprobs_num of them per position,
      // cumulative or incremental as the ids are.
      const logprobs = (ids: number[], sent: number[]) => {
        if (body.return_logprob !== true) return {}
        const shown = b.incremental ? ids : [...sent, ...ids]
        const first = b.incremental ? sent.length : 0
        const entries = shown.map((id, i) => fakeLogprobs(id, first + i, body.top_logprobs_num as number))
        return {
          output_token_logprobs: entries.map((e, i) => [e.logprob, shown[i], null]),
          output_top_logprobs: entries.map((e) => e.top.map((t) => [t.logprob, t.id, null])),
        }
      }
      const frame = (ids: number[], sent: number[], finish: unknown, completion: number) =>
        `data: ${JSON.stringify({ text: '', output_ids: b.incremental ? ids : [...sent, ...ids], meta_info: { id: 'req-1', finish_reason: finish, prompt_tokens: prompt, completion_tokens: completion, ...logprobs(ids, sent), ...(b.cachedTokens === undefined ? {} : { cached_tokens: b.cachedTokens }) }, ...pad(b) })}\n\n`
      await stream(res, b, send, (sampling.max_new_tokens as number | null) ?? undefined, {
        chunk: (ids, sent) => frame(ids, sent, null, sent.length + ids.length),
        // completion_tokens counts the stop id whether or not the ids show it.
        final: (ids, sent, reason, stop) =>
          frame(
            ids,
            sent,
            reason === 'stop' ? { type: 'stop', matched: stop } : { type: 'length', length: sent.length + ids.length },
            sent.length + ids.length + (stop !== undefined && !b.stopInIds ? 1 : 0),
          ),
        error: (message) => `data: ${JSON.stringify(errorBody(message))}\n\n`,
        end: 'data: [DONE]\n\n',
      })
    },
    errorBody,
  )
}

/** llama.cpp `/completion` (tools/server/server-task.cpp, to_json_non_oaicompat; server-context.cpp). */
export function fakeLlamaCpp(behaviour: FakeBehaviour): Promise<FakeEngine> {
  const errorObject = (message: string, code: number) => ({ code, message, type: code === 400 ? 'invalid_request_error' : 'server_error' })
  return fake(
    '/completion',
    behaviour,
    async (res, body, b, send) => {
      const prompt = (body.prompt as number[]).length
      const nPredict = body.n_predict as number
      // probs_vector_to_json: with n_probs, each id's probability and n_probs alternatives.
      const probabilities = (ids: number[], sent: number[]) => {
        const count = body.n_probs as number | undefined
        if (count === undefined || count === 0) return {}
        return {
          completion_probabilities: ids.map((id, i) => {
            const { logprob, top } = fakeLogprobs(id, sent.length + i, count)
            const alternatives = b.badAlternative ? [{ id: 250_000, logprob: 0 }, ...top] : top
            return {
              id,
              token: '',
              bytes: [],
              logprob,
              top_logprobs: alternatives.map((t) => ({ id: t.id, token: '', bytes: [], logprob: t.logprob })),
            }
          }),
        }
      }
      const partial = (ids: number[], sent: number[]) =>
        `data: ${JSON.stringify({ index: 0, content: '', tokens: ids, stop: false, id_slot: 0, tokens_predicted: sent.length + ids.length, tokens_evaluated: prompt, ...probabilities(ids, sent), ...pad(b) })}\n\n`
      // llama.cpp sends every sampled id, the end-of-generation one included.
      await stream(res, { ...b, stopInIds: true }, send, nPredict < 0 ? undefined : nPredict, {
        chunk: partial,
        // In stream mode the last chunk carries no tokens: they went out in the partial chunks before it.
        final: (ids, sent, reason) =>
          (ids.length > 0 ? partial(ids, sent) : '') +
          `data: ${JSON.stringify({ index: 0, content: '', tokens: [], id_slot: 0, stop: true, model: 'gpt-oss', tokens_predicted: sent.length + ids.length, tokens_evaluated: prompt, truncated: false, stop_type: reason === 'stop' ? 'eos' : 'limit', stopping_word: '', tokens_cached: 0, timings: b.cachedTokens === undefined ? {} : { cache_n: b.cachedTokens } })}\n\n`,
        error: (message) =>
          b.errorFraming === 'line'
            ? `error: ${JSON.stringify(errorObject(message, 500))}\n\n`
            : `data: ${JSON.stringify({ error: errorObject(message, 500) })}\n\n`,
      })
    },
    (message, code) => ({ error: errorObject(message, code) }),
  )
}

/** trtllm-serve's ErrorResponse (tensorrt_llm/serve/openai_protocol.py): flat, with an integer code. */
const trtllmError = (message: string, code: number) => ({ object: 'error', message, type: 'BadRequestError', param: null, code })

/** The fields of trtllm-serve's CompletionRequest (tensorrt_llm/serve/openai_protocol.py), which forbids any other. */
const TRTLLM_FIELDS = new Set([
  'model',
  'prompt',
  'best_of',
  'echo',
  'frequency_penalty',
  'logit_bias',
  'logprobs',
  'max_tokens',
  'n',
  'presence_penalty',
  'seed',
  'stop',
  'stream',
  'stream_options',
  'suffix',
  'temperature',
  'top_p',
  'user',
  'lora_request',
  'prompt_ignore_length',
  'use_beam_search',
  'top_k',
  'top_p_min',
  'min_p',
  'repetition_penalty',
  'length_penalty',
  'early_stopping',
  'stop_token_ids',
  'include_stop_str_in_output',
  'ignore_eos',
  'min_tokens',
  'skip_special_tokens',
  'spaces_between_special_tokens',
  'truncate_prompt_tokens',
  'return_context_logits',
  'detokenize',
  'thinking_token_budget',
  'add_special_tokens',
  'response_format',
  'disaggregated_params',
  'priority',
  'conversation_params',
])

/**
 * trtllm-serve `/v1/completions` (tensorrt_llm/serve/postprocess_handlers.py, completion_stream_post_processor):
 * pydantic's refusals of unknown fields, a missing model and stream_options without stream; `token_ids` in
 * each chunk only with `detokenize: false`; the usage chunk with `prompt_tokens_details`; `data: [DONE]`.
 */
export function fakeTrtllm(behaviour: FakeBehaviour): Promise<FakeEngine> {
  const refuse = (body: Record<string, unknown>) => {
    const extra = Object.keys(body).filter((key) => !TRTLLM_FIELDS.has(key))
    if (extra.length > 0) return `1 validation error for CompletionRequest\n${extra[0]}\n  Extra inputs are not permitted`
    if (typeof body.model !== 'string') return '1 validation error for CompletionRequest\nmodel\n  Field required'
    if (body.stream_options && !body.stream) return 'Stream options can only be defined when stream is true.'
    return null
  }
  return fake(
    '/v1/completions',
    behaviour,
    async (res, body, b, send) => {
      const ids = (tokens: number[]) => (body.detokenize === false ? tokens : null)
      const frame = (choice: Record<string, unknown>) =>
        `data: ${JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: body.model, choices: [choice], usage: null, ...pad(b) })}\n\n`
      await stream(res, b, send, body.max_tokens as number, {
        chunk: (tokens) => frame({ index: 0, text: '', token_ids: ids(tokens), logprobs: null, finish_reason: null, stop_reason: null }),
        final: (tokens, sent, reason, stop) =>
          frame({ index: 0, text: '', token_ids: ids(tokens), logprobs: null, finish_reason: reason, stop_reason: stop ?? null }) +
          `data: ${JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: body.model, choices: [], usage: { prompt_tokens: (body.prompt as number[]).length, total_tokens: 0, completion_tokens: sent.length + tokens.length, ...promptDetails(b.cachedTokens) } })}\n\n`,
        error: (message) => `data: ${JSON.stringify(trtllmError(message, 500))}\n\n`,
        end: 'data: [DONE]\n\n',
      })
    },
    trtllmError,
    refuse,
  )
}
