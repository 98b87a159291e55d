/**
 * The HTTP helpers on real sockets (127.0.0.1): body limits that stop reading, content types, parameter
 * checks, and pipeSse's backpressure, disconnect handling and error frames.
 */
import { once } from 'node:events'
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { connect } from 'node:net'

import test from 'ava'

import { AnthropicMessagesStream, ChatCompletionsStream, ResponsesStream } from 'harmony-stream'
import { chatGenerationParameters, HttpError, pipeSse, readJsonBody, responsesGenerationParameters, sendError } from 'harmony-stream/http'

import { harmony } from '../helpers/harmony.mjs'
import { untilStalled } from '../helpers/stall.mjs'
import { until } from '../helpers/until.mjs'

async function serve(handler: (request: IncomingMessage, response: ServerResponse) => Promise<void> | void) {
  const server = createServer((request, response) => {
    Promise.resolve(handler(request, response)).catch((error) => sendError(response, error))
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  // closeAllConnections: a test that fails mid-way must not leave teardown waiting on an open connection.
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
    server,
  }
}

function post(
  port: number,
  body: string | Buffer,
  headers: Record<string, string> = { 'content-type': 'application/json' },
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/', headers }, (res) => {
      let text = ''
      res
        .setEncoding('utf8')
        .on('data', (c) => (text += c))
        .on('end', () => resolve({ status: res.statusCode!, body: text, headers: res.headers }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

test('readJsonBody: 415 for a non-JSON content type, 400 for bad JSON or a non-object, the object otherwise', async (t) => {
  const { port, close } = await serve(async (request, response) => {
    const body = await readJsonBody(request, { limit: 1024 })
    response.end(JSON.stringify({ got: body }))
  })
  t.teardown(close)
  t.is((await post(port, '{"a":1}', { 'content-type': 'text/plain' })).status, 415)
  t.is((await post(port, '{"a":1}', {})).status, 415)
  const invalid = await post(port, '{"a":')
  t.is(invalid.status, 400)
  t.is(JSON.parse(invalid.body).error.type, 'invalid_request_error')
  t.is((await post(port, '[1,2]')).status, 400)
  t.is((await post(port, 'null')).status, 400)
  t.deepEqual(JSON.parse((await post(port, '{"a":1}', { 'content-type': 'application/json; charset=utf-8' })).body), { got: { a: 1 } })
})

test('readJsonBody of a request whose client left before it was read: a 400 at once, not a wait for ever', async (t) => {
  let failure: unknown = null
  const read = new Promise<void>((resolve) => {
    const handler = async (request: IncomingMessage) => {
      // As a request that waited its turn (a gateway's begin budget): read only once its client has gone.
      if (!request.destroyed) await new Promise((resolve) => request.once('close', resolve))
      try {
        await readJsonBody(request)
      } catch (error) {
        failure = error
      }
      resolve()
    }
    void serve(handler).then(({ port, close }) => {
      t.teardown(close)
      const socket = connect(port, '127.0.0.1')
      socket.on('error', () => {})
      socket.write('POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 7\r\n\r\n{"a":1}', () =>
        socket.destroy(),
      )
    })
  })
  await read
  t.true(failure instanceof HttpError)
  t.is((failure as HttpError).status, 400)
  t.is((failure as HttpError).code, 'body-unreadable')
})

test('readJsonBody: 413 from content-length before reading, and mid-body without it; the rest is never read', async (t) => {
  let handled = 0
  const { port, close } = await serve(async (request, response) => {
    handled++
    await readJsonBody(request, { limit: 1000 })
    response.end('{}')
  })
  t.teardown(close)
  const declared = await post(port, Buffer.alloc(5000, 'x'))
  t.is(declared.status, 413)
  t.is(declared.headers.connection, 'close')
  // A chunked body that never ends: the server answers 413 after the first KiB and closes the connection.
  const socket = connect(port, '127.0.0.1')
  await once(socket, 'connect')
  socket.write('POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n')
  let answer = ''
  socket.setEncoding('utf8').on('data', (c) => (answer += c))
  const chunk = `400\r\n${'x'.repeat(0x400)}\r\n`
  let written = 0
  const ended = once(socket, 'close')
  const timer = setInterval(() => {
    if (!socket.destroyed && written < 50_000) {
      socket.write(chunk)
      written++
    }
  }, 1)
  await ended
  clearInterval(timer)
  t.regex(answer, /^HTTP\/1\.1 413/)
  t.true(written < 5_000, `the server closed the connection early (after ${written} KiB sent)`)
  t.is(handled, 2)
})

test('generation parameters: type and range checked, 400 naming the field', (t) => {
  const ok = chatGenerationParameters({
    model: 'm',
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: 10,
    temperature: 0.7,
    top_p: 0.9,
    seed: 3,
    presence_penalty: 0.5,
    frequency_penalty: -1,
    logit_bias: { 1000: -5 },
    stop: 'END',
    prompt_cache_key: 'agent-7',
    n: 3,
  })
  t.deepEqual(ok, {
    model: 'm',
    stream: true,
    n: 3,
    includeUsage: true,
    maxTokens: 10,
    temperature: 0.7,
    topP: 0.9,
    seed: 3,
    affinityKey: 'agent-7',
    presencePenalty: 0.5,
    frequencyPenalty: -1,
    logitBias: { 1000: -5 },
    stop: ['END'],
    logprobs: undefined,
    encryptedReasoning: false,
    background: false,
  })
  t.is(chatGenerationParameters({ model: 'm' }).n, 1)
  t.is(chatGenerationParameters({ model: 'm', n: null }).n, 1)
  t.is(responsesGenerationParameters({ model: 'm' }).n, 1)
  t.is(chatGenerationParameters({ model: 'm', logprobs: true }).logprobs, 0)
  t.is(chatGenerationParameters({ model: 'm', logprobs: true, top_logprobs: 5 }).logprobs, 5)
  t.is(responsesGenerationParameters({ model: 'm', include: ['message.output_text.logprobs'], top_logprobs: 2 }).logprobs, 2)
  t.is(responsesGenerationParameters({ model: 'm', top_logprobs: 2 }).logprobs, undefined)
  t.true(responsesGenerationParameters({ model: 'm', include: ['reasoning.encrypted_content'] }).encryptedReasoning)
  t.is(responsesGenerationParameters({ model: 'm', include: ['reasoning.encrypted_content'], top_logprobs: 2 }).logprobs, undefined)
  t.true(responsesGenerationParameters({ model: 'm', background: true }).background)
  t.is(chatGenerationParameters({ model: 'm', max_completion_tokens: 5, max_tokens: 9 }).maxTokens, 5)
  t.is(responsesGenerationParameters({ model: 'm', max_output_tokens: 7 }).maxTokens, 7)
  for (const [body, param] of [
    [{}, 'model'],
    [{ model: 42 }, 'model'],
    [{ model: 'm', stream: 'yes' }, 'stream'],
    [{ model: 'm', n: 0 }, 'n'],
    [{ model: 'm', n: 9 }, 'n'],
    [{ model: 'm', n: 2.5 }, 'n'],
    [{ model: 'm', n: '2' }, 'n'],
    [{ model: 'm', temperature: 3 }, 'temperature'],
    [{ model: 'm', presence_penalty: 3 }, 'presence_penalty'],
    [{ model: 'm', frequency_penalty: '1' }, 'frequency_penalty'],
    [{ model: 'm', logit_bias: { x: 1 } }, 'logit_bias'],
    [{ model: 'm', logit_bias: { 201088: 1 } }, 'logit_bias'],
    [{ model: 'm', logit_bias: { 5: 101 } }, 'logit_bias'],
    [{ model: 'm', stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop'],
    [{ model: 'm', stop: '' }, 'stop'],
    [{ model: 'm', stop: [1] }, 'stop'],
    [{ model: 'm', top_p: -1 }, 'top_p'],
    [{ model: 'm', max_tokens: 0 }, 'max_tokens'],
    [{ model: 'm', max_tokens: 1.5 }, 'max_tokens'],
    [{ model: 'm', seed: 'x' }, 'seed'],
    [{ model: 'm', prompt_cache_key: 7 }, 'prompt_cache_key'],
    [{ model: 'm', stream_options: [] }, 'stream_options'],
  ] as const) {
    const error = t.throws(() => chatGenerationParameters(body as Record<string, unknown>), { instanceOf: HttpError })
    t.is(error.status, 400)
    t.is(error.param, param, JSON.stringify(body))
  }
})

const COMPLETION = harmony(
  '<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Hello there, world.<|return|>',
)

async function* steps(tokens: number[], onPull?: () => void) {
  for (const token of tokens) {
    onPull?.()
    await new Promise((resolve) => setImmediate(resolve))
    yield { tokens: [token] }
  }
}

async function get(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port, path: '/' }, (res) => {
      let text = ''
      res
        .setEncoding('utf8')
        .on('data', (c) => (text += c))
        .on('end', () => resolve(text))
    })
      .on('error', reject)
      .end()
  })
}

test('pipeSse: Chat frames end with [DONE], Responses frames are typed events, one write per step', async (t) => {
  let writes = 0
  const { port, close } = await serve(async (request, response) => {
    const write = response.write.bind(response)
    response.write = ((...args: Parameters<typeof write>) => {
      writes++
      return write(...args)
    }) as typeof response.write
    const adapter =
      request.url === '/'
        ? new ChatCompletionsStream({ model: 'm', parser: { implementation: 'js' } })
        : new ResponsesStream({ model: 'm' })
    t.is((await pipeSse(response, adapter, steps(COMPLETION))).outcome, 'completed')
  })
  t.teardown(close)
  const chatText = await get(port)
  t.true(chatText.endsWith('data: [DONE]\n\n'))
  const chunks = chatText
    .split('\n\n')
    .filter((f) => f.startsWith('data: {'))
    .map((f) => JSON.parse(f.slice(6)))
  t.is(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Hello there, world.')
  t.is(chunks.map((c) => c.choices[0]?.delta?.reasoning_content ?? '').join(''), 'Think.')
  t.true(writes <= COMPLETION.length + 1, `${writes} writes for ${COMPLETION.length} steps`)
  const responsesText = await new Promise<string>((resolve) => {
    httpRequest({ host: '127.0.0.1', port, path: '/responses' }, (res) => {
      let text = ''
      res
        .setEncoding('utf8')
        .on('data', (c) => (text += c))
        .on('end', () => resolve(text))
    }).end()
  })
  const events = responsesText.split('\n\n').filter(Boolean)
  t.regex(events[0], /^event: response\.created\ndata: /)
  t.regex(events.at(-1)!, /^event: response\.completed\n/)
})

test('pipeSse: a client that asked for Connection: close gets its stream, then the connection closed', async (t) => {
  const { port, close } = await serve(async (_request, response) => {
    await pipeSse(response, new ChatCompletionsStream({ model: 'm' }), steps(COMPLETION))
  })
  t.teardown(close)
  // RFC 9112 section 9.6: a server that receives "close" closes the connection after its response. Node does,
  // unless the response's own headers say keep-alive.
  const socket = connect(port, '127.0.0.1')
  let answer = ''
  socket.setEncoding('utf8').on('data', (data: string) => (answer += data))
  socket.write('GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n\r\n')
  await once(socket, 'close')
  const head = answer.slice(0, answer.indexOf('\r\n\r\n')).toLowerCase()
  t.regex(head, /^http\/1\.1 200 /)
  t.regex(head, /\r\nconnection: close\r\n/)
  t.true(answer.includes('data: [DONE]'))
})

test('pipeSse: a client that stops reading stops the engine being pulled; a disconnect aborts it', async (t) => {
  let pulled = 0
  let finished: (() => void) | null = null
  const done = new Promise<void>((resolve) => (finished = resolve))
  const abort = new AbortController()
  let outcome = ''
  const endless = async function* () {
    try {
      for (;;) {
        pulled++
        await new Promise((resolve) => setImmediate(resolve))
        // Long content tokens: lots of bytes per step.
        yield { tokens: Array.from({ length: 64 }, () => 13225) }
      }
    } finally {
      finished!()
    }
  }
  const { port, close } = await serve(async (_request, response) => {
    // The prompt ended in a final channel message, so every token is content.
    const adapter = new ChatCompletionsStream({ model: 'm', parser: { implementation: 'js' } })
    adapter.push(harmony('<|channel|>final<|message|>'))
    outcome = (await pipeSse(response, adapter, endless(), { abort })).outcome
  })
  t.teardown(close)
  const socket = connect(port, '127.0.0.1')
  await once(socket, 'connect')
  socket.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n')
  socket.pause() // never reads: the kernel buffers fill, then write() returns false
  const stalled = await untilStalled(() => pulled)
  t.true(pulled - stalled <= 1, `no steps pulled while the client does not read (${stalled} then ${pulled})`)
  // What the kernel's loopback buffers and the socket's 16 KiB hold: a few MiB at most, whatever the engine does.
  t.true(stalled < 30_000, `bounded: ${stalled} steps before the buffers filled`)
  t.log(`${stalled} steps of 64 tokens were pulled before the buffers filled`)
  socket.destroy()
  await done
  t.true(abort.signal.aborted, 'the engine request is aborted')
  await until(() => outcome !== '', 10_000)
  t.is(outcome, 'client-closed')
})

test('pipeSse: an engine failure mid-stream becomes an error frame (Chat) or error event (Responses)', async (t) => {
  const failing = async function* () {
    yield { tokens: harmony('<|channel|>final<|message|>partial') }
    throw Object.assign(new Error('connection reset by engine'), { engine: 'vllm', code: 'engine-connection-error' })
  }
  const { port, close } = await serve(async (request, response) => {
    const adapter = request.url === '/' ? new ChatCompletionsStream({ model: 'm' }) : new ResponsesStream({ model: 'm' })
    const result = await pipeSse(response, adapter, failing())
    t.is(result.outcome, 'failed')
  })
  t.teardown(close)
  const chatText = await get(port)
  t.false(chatText.includes('[DONE]'))
  const last = JSON.parse(chatText.trim().split('\n\n').at(-1)!.slice(6))
  t.is(last.error.type, 'server_error')
  const responsesText = await new Promise<string>((resolve) => {
    httpRequest({ host: '127.0.0.1', port, path: '/r' }, (res) => {
      let text = ''
      res
        .setEncoding('utf8')
        .on('data', (c) => (text += c))
        .on('end', () => resolve(text))
    }).end()
  })
  const frames = responsesText.trim().split('\n\n')
  t.regex(frames.at(-2)!, /^event: error\n/)
  t.regex(frames.at(-1)!, /^event: response\.failed\n/)
})

test("pipeSse: an engine that fails before its first step is answered in the adapter's API's shape, on any path", async (t) => {
  // biome-ignore lint/correctness/useYield: an engine that fails before its first step
  const failing = async function* () {
    throw new HttpError(503, 'the engine is busy', { code: 'engine-overloaded', headers: { 'retry-after': '2' } })
  }
  const { port, close } = await serve(async (request, response) => {
    const adapter = request.url === '/messages' ? new AnthropicMessagesStream({ model: 'm' }) : new ChatCompletionsStream({ model: 'm' })
    t.is((await pipeSse(response, adapter, failing())).outcome, 'failed')
  })
  t.teardown(close)
  const answer = (path: string) =>
    new Promise<{ status: number; retryAfter: unknown; body: unknown }>((resolve) => {
      httpRequest({ host: '127.0.0.1', port, path }, (res) => {
        let text = ''
        res
          .setEncoding('utf8')
          .on('data', (c) => (text += c))
          .on('end', () => resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'], body: JSON.parse(text) }))
      }).end()
    })
  t.like(await answer('/'), { status: 503, retryAfter: '2', body: { error: { code: 'engine_overloaded' } } })
  // Anthropic's 529 overloaded_error, which its clients retry.
  t.deepEqual(await answer('/messages'), {
    status: 529,
    retryAfter: '2',
    body: { type: 'error', error: { type: 'overloaded_error', message: 'the engine is busy' } },
  })
})

test("sendError answers in the shape it is given; OpenAI's by default, whatever the path", async (t) => {
  const { port, close } = await serve((request, response) => {
    const shape = (error: unknown) => ({ status: 418, body: { teapot: (error as Error).message }, headers: { 'x-shape': 'mine' } })
    sendError(response, new HttpError(400, 'bad'), request.url === '/mine' ? shape : undefined)
  })
  t.teardown(close)
  const answer = (path: string) =>
    new Promise<{ status: number; header: unknown; body: unknown }>((resolve) => {
      httpRequest({ host: '127.0.0.1', port, path }, (res) => {
        let text = ''
        res
          .setEncoding('utf8')
          .on('data', (c) => (text += c))
          .on('end', () => resolve({ status: res.statusCode!, header: res.headers['x-shape'], body: JSON.parse(text) }))
      }).end()
    })
  t.deepEqual(await answer('/mine'), { status: 418, header: 'mine', body: { teapot: 'bad' } })
  t.like(await answer('/v1/messages'), { status: 400, body: { error: { message: 'bad', type: 'invalid_request_error' } } })
})

test('pipeSse coalesceMs: the same bytes in fewer writes, and a client that stops reading still holds the engine back', async (t) => {
  let writes = 0
  const { port, close } = await serve(async (request, response) => {
    const write = response.write.bind(response)
    response.write = ((...args: Parameters<typeof write>) => {
      writes++
      return write(...args)
    }) as typeof response.write
    const adapter = new ChatCompletionsStream({ model: 'm', id: 'chatcmpl-x', created: 1, parser: { implementation: 'js' } })
    await pipeSse(response, adapter, steps(COMPLETION), {
      coalesceMs: request.url === '/coalesced' ? 50 : 0,
      frames: request.url === '/objects' ? 'objects' : 'sse',
    })
  })
  t.teardown(close)
  const fetchText = (path: string) =>
    new Promise<string>((resolve) => {
      httpRequest({ host: '127.0.0.1', port, path }, (res) => {
        let text = ''
        res
          .setEncoding('utf8')
          .on('data', (c) => (text += c))
          .on('end', () => resolve(text))
      }).end()
    })
  const plain = await fetchText('/')
  const plainWrites = writes
  writes = 0
  t.is(await fetchText('/coalesced'), plain)
  t.true(writes < plainWrites / 2, `${writes} writes coalesced vs ${plainWrites}`)
  t.is(await fetchText('/objects'), plain, "frames: 'objects' writes the same bytes from the object face")

  let pulled = 0
  const endless = async function* () {
    for (;;) {
      pulled++
      await new Promise((resolve) => setImmediate(resolve))
      yield { tokens: Array.from({ length: 64 }, () => 13225) }
    }
  }
  const { port: stalledPort, close: closeStalled } = await serve(async (_request, response) => {
    const adapter = new ChatCompletionsStream({ model: 'm', parser: { implementation: 'js' } })
    adapter.push(harmony('<|channel|>final<|message|>'))
    await pipeSse(response, adapter, endless(), { coalesceMs: 5 })
  })
  t.teardown(closeStalled)
  const socket = connect(stalledPort, '127.0.0.1')
  await once(socket, 'connect')
  socket.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n')
  socket.pause()
  const stalled = await untilStalled(() => pulled)
  t.true(pulled - stalled <= 1, `no steps pulled while the client does not read (${stalled} then ${pulled})`)
  socket.destroy()
})
