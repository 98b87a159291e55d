/**
 * Local stand-ins for inference servers, on 127.0.0.1, speaking each engine's wire format as its source does
 * (see the comments in src/engines/*.ts for the files followed): vLLM `/v1/completions` and
 * `/inference/v1/generate`, SGLang `/generate` (cumulative or incremental `output_ids`, the stop token trimmed
 * and named in `matched`), llama.cpp `/completion`. Each records the request bodies it received and whether
 * the client closed the connection before the stream ended, and can fail in the ways engines fail.
 */
import { once } from 'node:events'
import { type IncomingMessage, type ServerResponse, createServer } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface FakeBehaviour {
  /** The ids the "model" generates (a stop token at the end, or not). */
  completion: number[]
  /** Ids per streamed chunk. Default 1. */
  chunk?: number
  /** Put the stop token into the ids (vLLM does; SGLang trims it unless no_stop_trim). */
  stopInIds?: boolean
  /** SGLang: stream only the new ids (`--incremental-streaming-output`). */
  incremental?: boolean
  /** Answer this HTTP status with the engine's error body instead of streaming. */
  httpError?: number
  /** After this many chunks: an error event (the engine's own shape). */
  failAfter?: number
  /** After this many chunks: drop the connection. */
  dropAfter?: number
  /** After this many chunks: stop sending anything (a stalled engine). */
  stallAfter?: number
  /** Wait this long between chunks. */
  delayMs?: number
  /** Pad each chunk's JSON (bytes), to make a big stream. */
  padding?: number
}

export interface FakeEngine {
  url: string
  bodies: Record<string, unknown>[]
  /** Set when a client closed its connection before the stream's end. */
  clientClosed: number
  /** The largest number of bytes the server had waiting in its socket buffer (writes not yet taken by TCP). */
  maxBuffered: number
  /** Writes that returned false (the client was not reading). */
  blockedWrites: number
  close(): Promise<void>
}

const STOPS = [200002, 200012]

type Writer = (res: ServerResponse, body: Record<string, unknown>, behaviour: FakeBehaviour, engine: FakeEngine) => Promise<void>

async function fake(path: string, behaviour: FakeBehaviour, write: Writer, httpErrorBody: (message: string, status: number) => unknown): Promise<FakeEngine> {
  const engine: FakeEngine = { url: '', bodies: [], clientClosed: 0, maxBuffered: 0, blockedWrites: 0, close: async () => {} }
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    let text = ''
    for await (const chunk of req) text += chunk
    const body = JSON.parse(text) as Record<string, unknown>
    engine.bodies.push(body)
    if (req.url !== path || req.method !== 'POST') {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify(httpErrorBody(`no route ${req.url}`, 404)))
      return
    }
    if (behaviour.httpError !== undefined) {
      res.writeHead(behaviour.httpError, { 'content-type': 'application/json' }).end(JSON.stringify(httpErrorBody('the prompt is too long for this model', behaviour.httpError)))
      return
    }
    res.on('close', () => {
      if (!res.writableFinished) engine.clientClosed++
    })
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    await write(res, body, behaviour, engine)
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  engine.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  engine.close = () => new Promise<void>((resolve) => (server.close(() => resolve()), server.closeAllConnections()))
  return engine
}

/** Writes a frame, recording backpressure; resolves when it may write again (or the client left). */
async function send(res: ServerResponse, frame: string, engine: FakeEngine): Promise<boolean> {
  if (res.destroyed) return false
  const ok = res.write(frame)
  engine.maxBuffered = Math.max(engine.maxBuffered, res.writableLength)
  if (!ok) {
    engine.blockedWrites++
    await Promise.race([once(res, 'drain'), once(res, 'close')])
  }
  return !res.destroyed
}

/**
 * The generation loop all fakes share: `frames(ids, index, final)` makes one chunk's frame; the behaviour's
 * failures and delays happen between chunks.
 */
async function stream(res: ServerResponse, behaviour: FakeBehaviour, engine: FakeEngine, maxTokens: number | undefined, frames: {
  chunk(ids: number[], sent: number[]): string
  final(ids: number[], sent: number[], reason: 'stop' | 'length', stop: number | undefined): string
  error(message: string): string
  end?: string
}): Promise<void> {
  const limit = Math.min(behaviour.completion.length, maxTokens ?? Infinity)
  const generated = behaviour.completion.slice(0, limit)
  const last = generated[generated.length - 1]
  const stopped = generated.length === behaviour.completion.length && STOPS.includes(last)
  const sent: number[] = []
  const size = behaviour.chunk ?? 1
  let index = 0
  for (let at = 0; at < generated.length; at += size, index++) {
    if (behaviour.delayMs) await new Promise((resolve) => setTimeout(resolve, behaviour.delayMs))
    if (behaviour.failAfter === index) {
      await send(res, frames.error('CUDA out of memory'), engine)
      if (frames.end) res.write(frames.end)
      res.end()
      return
    }
    if (behaviour.dropAfter === index) {
      res.socket?.destroy()
      return
    }
    if (behaviour.stallAfter === index) return // never ends: the client's read timeout must
    const ids = generated.slice(at, at + size)
    const isLast = at + size >= generated.length
    if (isLast) {
      const reason = stopped ? 'stop' : 'length'
      const visible = reason === 'stop' && !behaviour.stopInIds ? ids.slice(0, -1) : ids
      if (!(await send(res, frames.final(visible, sent, reason, reason === 'stop' ? last : undefined), engine))) return
      sent.push(...visible)
    } else {
      if (!(await send(res, frames.chunk(ids, sent), engine))) return
      sent.push(...ids)
    }
  }
  if (generated.length === 0) await send(res, frames.final([], sent, 'length', undefined), engine)
  if (frames.end) await send(res, frames.end, engine)
  res.end()
}

const pad = (behaviour: FakeBehaviour) => (behaviour.padding ? { padding: 'x'.repeat(behaviour.padding) } : {})

/** vLLM `/v1/completions` (vllm/entrypoints/openai/completion/protocol.py, CompletionStreamResponse). */
export function fakeVllm(behaviour: FakeBehaviour): Promise<FakeEngine> {
  const errorBody = (message: string, code: number) => ({ error: { message, type: 'BadRequestError', param: null, code } })
  return fake('/v1/completions', behaviour, async (res, body, b, engine) => {
    const frame = (choice: Record<string, unknown>, usage: unknown = null) =>
      `data: ${JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: body.model ?? 'gpt-oss', choices: [choice], usage, ...pad(b) })}\n\n`
    await stream(res, b, engine, body.max_tokens as number, {
      chunk: (ids, sent) => frame({ index: 0, text: '', logprobs: null, finish_reason: null, stop_reason: null, token_ids: ids, ...(sent.length === 0 ? { prompt_token_ids: body.prompt } : {}) }),
      final: (ids, sent, reason, stop) =>
        frame({ index: 0, text: '', logprobs: null, finish_reason: reason, stop_reason: stop ?? null, token_ids: ids }) +
        `data: ${JSON.stringify({ id: 'cmpl-1', object: 'text_completion', created: 1, model: 'gpt-oss', choices: [], usage: { prompt_tokens: (body.prompt as number[]).length, completion_tokens: sent.length + ids.length + (stop !== undefined && !b.stopInIds ? 1 : 0), total_tokens: 0 } })}\n\n`,
      error: (message) => `data: ${JSON.stringify(errorBody(message, 500))}\n\n`,
      end: 'data: [DONE]\n\n',
    })
  }, errorBody)
}

/** vLLM `/inference/v1/generate` (vllm/entrypoints/serve/disagg/serving.py, serve_tokens_stream_generator). */
export function fakeVllmGenerate(behaviour: FakeBehaviour): Promise<FakeEngine> {
  const errorBody = (message: string, code: number) => ({ error: { message, type: 'BadRequestError', param: null, code } })
  return fake('/inference/v1/generate', behaviour, async (res, body, b, engine) => {
    const sampling = body.sampling_params as Record<string, unknown>
    const frame = (ids: number[], reason: string | null) => `data: ${JSON.stringify({ request_id: 'generate-tokens-1', choices: [{ index: 0, logprobs: null, finish_reason: reason, token_ids: ids }], usage: null })}\n\n`
    await stream(res, b, engine, sampling.max_tokens as number | undefined, {
      chunk: (ids) => frame(ids, null),
      final: (ids, sent, reason) => frame(ids, reason) + `data: ${JSON.stringify({ request_id: 'generate-tokens-1', choices: [], usage: { prompt_tokens: (body.token_ids as number[]).length, completion_tokens: sent.length + ids.length, total_tokens: 0 } })}\n\n`,
      error: (message) => `data: ${JSON.stringify(errorBody(message, 500))}\n\n`,
      end: 'data: [DONE]\n\n',
    })
  }, errorBody)
}

/** SGLang `/generate` (python/sglang/srt/entrypoints/http_server.py; detokenizer_manager.py trims the matched stop token). */
export function fakeSglang(behaviour: FakeBehaviour): Promise<FakeEngine> {
  const errorBody = (message: string) => ({ error: { message } })
  return fake('/generate', behaviour, async (res, body, b, engine) => {
    const sampling = body.sampling_params as Record<string, unknown>
    const prompt = (body.input_ids as number[]).length
    const frame = (ids: number[], sent: number[], finish: unknown, completion: number) =>
      `data: ${JSON.stringify({ text: '', output_ids: b.incremental ? ids : [...sent, ...ids], meta_info: { id: 'req-1', finish_reason: finish, prompt_tokens: prompt, completion_tokens: completion, cached_tokens: 0 }, ...pad(b) })}\n\n`
    await stream(res, b, engine, sampling.max_new_tokens as number, {
      chunk: (ids, sent) => frame(ids, sent, null, sent.length + ids.length),
      final: (ids, sent, reason, stop) =>
        frame(ids, sent, reason === 'stop' ? { type: 'stop', matched: stop } : { type: 'length', length: sent.length + ids.length }, sent.length + ids.length + (stop !== undefined && !b.stopInIds ? 1 : 0)),
      error: (message) => `data: ${JSON.stringify(errorBody(message))}\n\n`,
      end: 'data: [DONE]\n\n',
    })
  }, errorBody)
}

/** llama.cpp `/completion` (tools/server/server-task.cpp, to_json_non_oaicompat); errors mid-stream as `error:` lines. */
export function fakeLlamaCpp(behaviour: FakeBehaviour): Promise<FakeEngine> {
  const errorBody = (message: string, code: number) => ({ error: { code, message, type: 'invalid_request_error' } })
  return fake('/completion', behaviour, async (res, body, b, engine) => {
    const prompt = (body.prompt as number[]).length
    const nPredict = body.n_predict as number
    const partial = (ids: number[], sent: number[]) =>
      `data: ${JSON.stringify({ index: 0, content: '', tokens: ids, stop: false, id_slot: 0, tokens_predicted: sent.length + ids.length, tokens_evaluated: prompt, ...pad(b) })}\n\n`
    await stream(res, { ...b, stopInIds: true }, engine, nPredict < 0 ? undefined : nPredict, {
      chunk: partial,
      // In stream mode the last chunk carries no tokens: they went out in the partial chunks before it.
      final: (ids, sent, reason) =>
        (ids.length > 0 ? partial(ids, sent) : '') +
        `data: ${JSON.stringify({ index: 0, content: '', tokens: [], id_slot: 0, stop: true, model: 'gpt-oss', tokens_predicted: sent.length + ids.length, tokens_evaluated: prompt, stop_type: reason === 'stop' ? 'eos' : 'limit', stopping_word: '', timings: {} })}\n\n`,
      error: (message) => `error: ${JSON.stringify({ code: 500, message, type: 'server_error' })}\n\n`,
    })
  }, errorBody)
}
