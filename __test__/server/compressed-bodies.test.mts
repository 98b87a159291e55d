/**
 * Compressed request bodies (issue 47): `Content-Encoding: gzip` and `deflate` (one coding or several, RFC 9110
 * §8.4) are inflated on every route that reads a JSON body, and the prompt is the one the same body sent plain
 * gives; the body limit holds for the inflated bytes, so a compression bomb is a 413 once it inflates past the
 * limit, without being read or inflated further; a body that is not what its coding says is a 400; a coding not
 * decoded here (`br`, `zstd`, anything unknown) is a 415 naming it. Real HTTP requests (fetch) to the gateway.
 */
import type { IncomingMessage } from 'node:http'
import { Readable } from 'node:stream'
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib'

import test from 'ava'
import { readJsonBytes } from 'harmony-stream/http'

import { recordingEngine, startGateway } from '../helpers/gateway.mjs'
import { harmony } from '../helpers/harmony.mjs'

const HELLO = harmony('<|channel|>final<|message|>Hello.<|return|>')

const CHAT = { model: 'gpt-oss', messages: [{ role: 'user', content: 'Capital of France?' }] }
const RESPONSES = { model: 'gpt-oss', input: 'Capital of France?' }

/** Applies the codings in the order a `Content-Encoding` header lists them. */
function encode(body: object, codings: readonly string[]): Buffer {
  let bytes = Buffer.from(JSON.stringify(body))
  for (const coding of codings) bytes = coding === 'deflate' ? deflateSync(bytes) : coding === 'identity' ? bytes : gzipSync(bytes)
  return bytes
}

async function post(port: number, path: string, body: Buffer, encoding: string, extra: Record<string, string> = {}) {
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-encoding': encoding, ...extra },
    body,
  })
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> }
}

/**
 * `megabytes` MiB of zeros as gzip, `members` times over (one gzip stream may hold several members, RFC 1952
 * §2.2; each is ~1 KiB here): a body a thousandth of what it inflates to.
 */
function zerosGzip(megabytes: number, members: number): Buffer {
  const member = gzipSync(Buffer.alloc(megabytes * 1024 * 1024))
  return Buffer.concat(Array.from({ length: members }, () => member))
}

for (const renderWorkers of [0, 1]) {
  test(`gzip and deflate bodies on Chat Completions and Responses give the prompt of the plain body (${renderWorkers ? 'render worker' : 'inline'})`, async (t) => {
    const encodings = ['gzip', 'deflate', 'x-gzip', 'gzip, identity', 'identity', 'deflate, gzip', 'GZIP', '']
    const { engine, prompts } = recordingEngine([HELLO])
    // renderInlineBytes 0: each body is inflated here, then handed to the worker.
    const { port } = await startGateway(t, { engine, renderWorkers, renderInlineBytes: 0 })
    for (const [path, body] of [
      ['/v1/chat/completions', CHAT],
      ['/v1/responses', RESPONSES],
    ] as const) {
      const plain = await post(port, path, Buffer.from(JSON.stringify(body)), 'identity')
      t.is(plain.status, 200)
      const expected = prompts.at(-1)
      for (const encoding of encodings) {
        const codings = encoding
          .split(',')
          .map((coding) => coding.trim().toLowerCase())
          .filter((coding) => coding !== '')
          .map((coding) => (coding === 'x-gzip' ? 'gzip' : coding))
        const sent = encode(body, codings)
        if (codings.some((coding) => coding !== 'identity')) t.notDeepEqual(sent, Buffer.from(JSON.stringify(body)))
        const answer = await post(port, path, sent, encoding)
        t.is(answer.status, 200, `${path} ${encoding}: ${JSON.stringify(answer.body)}`)
        t.deepEqual(prompts.at(-1), expected, `${path} ${encoding}`)
      }
    }
    t.is(prompts.length, 2 * 9)
  })
}

test('every other route that reads a JSON body inflates it too: input_tokens, compact, Messages and count_tokens', async (t) => {
  const { engine, prompts } = recordingEngine([HELLO])
  const { port } = await startGateway(t, { engine })
  const counted = await post(port, '/v1/responses/input_tokens', encode(RESPONSES, ['gzip']), 'gzip')
  t.is(counted.status, 200)
  await post(port, '/v1/responses', encode(RESPONSES, ['deflate']), 'deflate')
  t.is(counted.body.input_tokens, prompts[0]!.length)
  const compacted = await post(port, '/v1/responses/compact', encode(RESPONSES, ['gzip']), 'gzip')
  t.is(compacted.status, 200)
  t.is(compacted.body.object, 'response.compaction')
  const message = { model: 'gpt-oss', max_tokens: 50, messages: [{ role: 'user', content: 'Capital of France?' }] }
  const anthropic = { 'anthropic-version': '2023-06-01' }
  const answered = await post(port, '/v1/messages', encode(message, ['gzip']), 'gzip', anthropic)
  t.is(answered.status, 200)
  t.is(answered.body.type, 'message')
  const { max_tokens: _, ...countable } = message
  const tokens = await post(port, '/v1/messages/count_tokens', encode(countable, ['deflate']), 'deflate', anthropic)
  t.is(tokens.body.input_tokens, prompts[1]!.length)
})

test('a compression bomb is a 413 in OpenAI shape, once it inflates past the limit', async (t) => {
  const { engine, prompts } = recordingEngine([HELLO])
  const { port } = await startGateway(t, { engine, bodyLimit: 1024 * 1024 })
  // 1 GiB of zeros, gzip inside gzip: a body of a few KiB.
  const bomb = gzipSync(zerosGzip(1, 1024))
  t.true(bomb.length < 64 * 1024, `${bomb.length} bytes`)
  for (const path of ['/v1/chat/completions', '/v1/responses']) {
    const answer = await post(port, path, bomb, 'gzip, gzip')
    t.is(answer.status, 413)
    t.is(answer.headers.get('connection'), 'close')
    t.deepEqual(answer.body, {
      error: {
        message: 'the request body inflates to more than the limit of 1048576 bytes',
        type: 'invalid_request_error',
        param: null,
        code: 'body_too_large',
      },
    })
  }
  // A body within the limit as sent and inflated is served by the same gateway.
  t.is((await post(port, '/v1/chat/completions', encode(CHAT, ['gzip']), 'gzip')).status, 200)
  t.is(prompts.length, 1)
})

test('the inflating stops at the limit: the rest of a bomb is neither read nor inflated', async (t) => {
  // 3 GiB of zeros as ~3 MB of gzip members, each pulled only when the reader asks for more.
  const member = zerosGzip(1, 1)
  const members = 3000
  let pulled = 0
  let sent = 0
  const body = new Readable({
    read() {
      if (sent === members) return void this.push(null)
      sent++
      pulled += member.length
      this.push(member)
    },
  })
  // What readJsonBytes reads of a request: its headers, its bytes, and whether they all came (`complete`).
  const request = Object.defineProperties(body, {
    headers: { value: { 'content-type': 'application/json', 'content-encoding': 'gzip' } },
    complete: { get: () => body.readableEnded },
  }) as unknown as IncomingMessage
  const limit = 4 * 1024 * 1024
  t.true(member.length * members < limit, 'the body as sent is within the limit')
  const error = await t.throwsAsync(readJsonBytes(request, { limit }))
  t.like(error, { status: 413, code: 'body-too-large' })
  // Four and a bit members inflate past 4 MiB; what was pulled beyond them is the streams' buffering (16 KiB
  // each, a few members), not the 3,000.
  t.true(sent < 100, `${sent} of ${members} members pulled (${pulled} bytes)`)
})

test('a body that is not what its coding says is a 400 naming content-encoding', async (t) => {
  const { engine, prompts } = recordingEngine([HELLO])
  const { port } = await startGateway(t, { engine })
  const whole = encode(CHAT, ['gzip'])
  for (const [body, encoding] of [
    [Buffer.from(JSON.stringify(CHAT)), 'gzip'],
    [whole.subarray(0, whole.length - 12), 'gzip'],
    [Buffer.concat([whole.subarray(0, 20), Buffer.alloc(40, 0xff), whole.subarray(60)]), 'gzip'],
    [encode(CHAT, ['gzip']), 'deflate'],
    // deflate is the zlib format (RFC 9110 §8.4.1.2), not raw deflate.
    [deflateRawSync(Buffer.from(JSON.stringify(CHAT))), 'deflate'],
    [encode(CHAT, ['gzip']), 'gzip, gzip'],
  ] as const) {
    const answer = await post(port, '/v1/chat/completions', body, encoding)
    t.is(answer.status, 400, `${encoding}: ${JSON.stringify(answer.body)}`)
    t.like(answer.body, { error: { type: 'invalid_request_error', param: 'content-encoding', code: 'invalid_compressed_body' } })
    t.regex((answer.body.error as { message: string }).message, new RegExp(`content-encoding \\(${encoding}\\)`))
  }
  t.is(prompts.length, 0)
})

test('a coding not decoded here is a 415 naming it, with the codings that are in accept-encoding', async (t) => {
  const { engine, prompts } = recordingEngine([HELLO])
  const { port } = await startGateway(t, { engine })
  const json = Buffer.from(JSON.stringify(RESPONSES))
  for (const [encoding, named, body] of [
    ['br', 'br', brotliCompressSync(json)],
    ['zstd', 'zstd', json],
    ['compress', 'compress', json],
    ['gzip, br', 'br', json],
    ['gzip;q=1', 'gzip;q=1', json],
    ['gzip, gzip, gzip, gzip', null, json],
  ] as const) {
    const answer = await post(port, '/v1/responses', body, encoding)
    t.is(answer.status, 415, encoding)
    t.is(answer.headers.get('accept-encoding'), 'gzip, deflate', encoding)
    t.like(answer.body, { error: { type: 'invalid_request_error', param: 'content-encoding', code: 'unsupported_content_encoding' } })
    const { message } = answer.body.error as { message: string }
    if (named === null) t.regex(message, /4 content codings; at most 3/)
    else t.true(message.includes(`content-encoding "${named}" is not supported`), message)
  }
  t.is(prompts.length, 0)
})
