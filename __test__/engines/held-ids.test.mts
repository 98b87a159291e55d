/**
 * LlamaCppEngine finding again the ids llama-server held back (held-ids.ts), on cases a tiny model cannot be
 * made to produce on demand: the stand-in below streams exactly what server-context.cpp would for a given
 * list of generated ids (no partial result while the text ends inside a character by `validate_utf8`'s rule,
 * each partial result with its own id only, the text since the last result in `content`, `tokens_predicted`
 * counting every id). The real server's own cases (🪽 in two and three ids, a held id at the limit, a
 * character never completed) are in engines-real/llamacpp.test.mts.
 */
import { once } from 'node:events'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'

import test from 'ava'
import { type EngineStep, LlamaCppEngine } from 'harmony-stream/engines'

import { tokenBytes } from '../helpers/token-bytes.mjs'

const RETURN = 200_002

/** llama-server's `validate_utf8` (tools/server/server-common.cpp): the length of `bytes` not held back. */
function validUtf8Length(bytes: Buffer): number {
  for (let i = 1; i <= 4 && i <= bytes.length; i++) {
    const c = bytes[bytes.length - i]
    const needs = (c & 0xe0) === 0xc0 ? 2 : (c & 0xf0) === 0xe0 ? 3 : (c & 0xf8) === 0xf0 ? 4 : 0
    if (i < needs) return bytes.length - i
  }
  return bytes.length
}

/**
 * The chunks llama-server streams for `generated` (ending with an end-of-generation id): `content` is the text
 * since the last result, decoded as nlohmann::json writes invalid UTF-8 (U+FFFD), special ids render as ''.
 */
function chunksOf(generated: number[]): object[] {
  const chunks: object[] = []
  let text = Buffer.alloc(0)
  let sent = 0
  generated.forEach((id, i) => {
    text = Buffer.concat([text, id >= 199_998 ? Buffer.alloc(0) : Buffer.from(tokenBytes(id))])
    if (validUtf8Length(text) < text.length) return
    chunks.push({
      index: 0,
      content: text.subarray(sent).toString('utf8'),
      tokens: [id],
      stop: false,
      tokens_predicted: i + 1,
      tokens_evaluated: 3,
    })
    sent = text.length
  })
  chunks.push({ index: 0, content: '', tokens: [], stop: true, stop_type: 'eos', tokens_predicted: generated.length, tokens_evaluated: 3 })
  return chunks
}

async function generate(generated: number[]): Promise<{ tokens: number[]; steps: EngineStep[] }> {
  const server = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/event-stream' })
    response.end(
      chunksOf(generated)
        .map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`)
        .join(''),
    )
  })
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  try {
    const steps: EngineStep[] = []
    const engine = new LlamaCppEngine({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` })
    for await (const step of engine.generate({ tokens: [1, 2, 3] })) steps.push(step)
    return { tokens: steps.flatMap((step) => Array.from(step.tokens)), steps }
  } finally {
    server.close()
  }
}

/** The id of one byte (every byte is an o200k token of its own). */
const byte = (value: number): number => {
  for (let id = 0; id < 1024; id++) {
    const bytes = tokenBytes(id)
    if (bytes.length === 1 && bytes[0] === value) return id
  }
  throw new Error(`no token for byte ${value}`)
}

test('held ids are found again, in order, in the step that completes the character, wherever they stand', async (t) => {
  const hello = 13225 // "Hello"
  const cases: [string, number[]][] = [
    ['🪽 as two ids', [hello, 4103, 50888, RETURN]],
    ['🪽 as four single bytes (three held)', [hello, ...[0xf0, 0x9f, 0xaa, 0xbd].map(byte), RETURN]],
    ['two split characters in a row', [4103, 50888, 4103, 50888, RETURN]],
    ['a split character first, then text', [4103, 50888, hello, RETURN]],
    ['é as two single bytes after text', [hello, byte(0xc3), byte(0xa9), RETURN]],
  ]
  for (const [name, generated] of cases) {
    const { tokens, steps } = await generate(generated)
    t.deepEqual(tokens, generated, name)
    t.true(
      steps.every((step) => step.diagnostics === undefined),
      name,
    )
    t.is(steps.at(-1)?.usage?.completionTokens, generated.length, name)
  }
})

test('bytes that are not UTF-8 (the server writes U+FFFD for them): the held id is reported lost, never guessed', async (t) => {
  // E2, "a", "b": validate_utf8 holds E2 and "a" back (a lead byte among the last bytes), not "b"; the server's
  // JSON writer puts U+FFFD for E2 in the text. U+FFFD is an id of its own, but no split of the text the
  // server would have held fits, so nothing is guessed.
  const [a, b] = [64, 65]
  const { tokens, steps } = await generate([byte(0xe2), a, b, RETURN])
  t.deepEqual(tokens, [b, RETURN])
  const lost = steps.flatMap((step) => step.diagnostics ?? [])
  t.deepEqual(
    lost.map((diagnostic) => ({ code: diagnostic.code, count: 'count' in diagnostic ? diagnostic.count : null })),
    [{ code: 'engine-ids-lost', count: 2 }],
  )
  t.is(steps.at(-1)?.usage?.completionTokens, 4, 'usage counts what the engine generated')
})
