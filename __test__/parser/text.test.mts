/**
 * The text parser: Harmony whose markers arrive as text, split anywhere. The main property: for generated
 * streams decoded to text (special tokens as their strings) and cut at random offsets (inside markers and
 * characters too), it gives the same messages, with the same text per message, as the token parser, on
 * both implementations.
 */
import test from 'ava'

import { HarmonyStreamParser, HarmonyTextParser, type Implementation } from 'harmony-stream'

import { generator } from '../helpers/generator.mjs'
import { IMPLEMENTATIONS, nativeTest, random } from '../helpers/harmony.mjs'
import { decodeTokens } from '../helpers/token-bytes.mjs'

const STREAMS = Number(process.env.TEXT_STREAMS ?? 300)
const SPLITS = 4

/** `text` cut at random UTF-16 offsets into chunks of 0..maxSize characters. */
function cut(text: string, next: () => number, maxSize: number): string[] {
  const chunks: string[] = []
  for (let i = 0; i < text.length; ) {
    const size = Math.floor(next() * (maxSize + 1))
    chunks.push(text.slice(i, i + size))
    i += size
  }
  return chunks
}

function textByMessage(batches: { segments: { messageIndex: number; text: string }[] }[]): string[] {
  const texts: string[] = []
  for (const batch of batches) for (const s of batch.segments) texts[s.messageIndex] = (texts[s.messageIndex] ?? '') + s.text
  return texts
}

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: text split anywhere gives the token parser's messages and text per message`, (t) => {
    const streams = generator(11)
    const next = random(12)
    let splits = 0
    for (let n = 0; n < STREAMS; n++) {
      const stream = streams()
      const options = { role: stream.role, implementation: implementation as Implementation }
      const tokenParser = new HarmonyStreamParser(options)
      const tokenBatches = [tokenParser.push(stream.tokens), tokenParser.finish()]
      const text = decodeTokens(stream.tokens)
      for (let k = 0; k < SPLITS; k++) {
        const chunks = cut(text, next, [1, 3, 16, 200][k])
        const parser = new HarmonyTextParser(options)
        const batches = chunks.map((chunk) => parser.push(chunk))
        batches.push(parser.finish())
        t.deepEqual(parser.messages, tokenParser.messages, `stream ${n}, split ${k}`)
        t.deepEqual(textByMessage(batches), textByMessage(tokenBatches), `stream ${n}, split ${k}: text per message`)
        splits++
      }
    }
    t.log(`${STREAMS} streams, ${splits} random splits`)
  })
}

nativeTest(test)('native and js text parsers agree chunk by chunk', (t) => {
  const streams = generator(21)
  const next = random(22)
  for (let n = 0; n < 100; n++) {
    const stream = streams()
    const chunks = cut(decodeTokens(stream.tokens), next, 9)
    const run = (implementation: Implementation) => {
      const parser = new HarmonyTextParser({ role: stream.role, implementation })
      return [...chunks.map((c) => parser.push(c)), parser.finish()]
    }
    t.deepEqual(run('native'), run('js'))
  }
})

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: only a possible marker prefix is held back, and only while it can still be one`, (t) => {
    const parser = new HarmonyTextParser({ implementation })
    const texts = (chunk: string) =>
      parser
        .push(chunk)
        .segments.map((s) => s.text)
        .join('')
    t.is(texts('<|channel|>final<|message|>a <|example|> b'), 'a <|example|> b', 'an unknown marker is text')
    t.is(texts(' c <|'), ' c ', 'a lone <| at the end is held')
    t.is(texts('x'), '<|x', 'and released when it cannot be a marker')
    t.is(texts(' <|en'), ' ')
    t.is(texts('d|>'), '', 'a marker cut in two is a marker')
    t.is(parser.messages.at(-1)?.content, 'a <|example|> b c <|x ')
    t.is(parser.messages.at(-1)?.terminator, 'end')
    t.is(texts('<|start|>assistant<|channel|>final<|message|>tail <'), 'tail ')
    t.is(texts('3 and \ud83d'), '<3 and ', 'the first half of a surrogate pair waits for the second')
    t.is(texts('\udc96'), '💖')
    t.is(texts(' <|con'), ' <|con', '<|constrain|> is text to the text parser (the header rules read it as text)')
    t.is(texts(' <|cal'), ' ')
    t.is(
      parser
        .finish()
        .segments.map((s) => s.text)
        .join(''),
      '<|cal',
      'the end of the stream releases held text',
    )
  })

  test(`${implementation}: every cut point inside every marker`, (t) => {
    const text =
      '<|channel|>analysis<|message|>why<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>'
    const expected = new HarmonyTextParser({ implementation })
    expected.push(text)
    expected.finish()
    for (let a = 0; a <= text.length; a++) {
      const parser = new HarmonyTextParser({ implementation })
      parser.push(text.slice(0, a))
      parser.push(text.slice(a))
      parser.finish()
      t.deepEqual(parser.messages, expected.messages, `cut at ${a}`)
    }
    t.deepEqual(
      expected.messages.map((m) => [m.channel, m.recipient, m.contentType, m.content]),
      [
        ['analysis', undefined, undefined, 'why'],
        ['commentary', 'functions.f', 'json', '{}'],
      ],
    )
  })

  test(`${implementation}: text parser errors and state follow the token parser`, (t) => {
    const strict = new HarmonyTextParser({ implementation, strict: true })
    t.throws(() => strict.push('<|channel|>final<|message|>ok<|end|>stray'), { message: /Unexpected token/ })
    t.throws(() => new HarmonyTextParser({ implementation }).push(42 as never), { instanceOf: TypeError })
    const lenient = new HarmonyTextParser({ implementation })
    t.deepEqual(
      lenient
        .push('<|channel|>final<|message|>ok<|return|>stray<|start|>assistant<|channel|>final<|message|>x')
        .diagnostics.map((d) => d.code),
      ['stray-tokens'],
    )
    t.is(lenient.state, 'content')
    lenient.finish()
    t.true(lenient.finished)
    t.throws(() => lenient.push('more'), { code: 'parser-finished' })
  })
}

test('marker scanning is linear: a million characters of near-markers parse at once (a rescan per <| would not finish)', (t) => {
  for (const implementation of IMPLEMENTATIONS) {
    const parser = new HarmonyTextParser({ implementation })
    parser.push('<|channel|>final<|message|>')
    const text = ' <|a'.repeat(250_000)
    const batch = parser.push(text)
    t.is(
      batch.segments.map((s) => s.text).join('').length +
        parser
          .finish()
          .segments.map((s) => s.text)
          .join('').length,
      text.length,
    )
  }
})

for (const implementation of IMPLEMENTATIONS) {
  test(`${implementation}: detectStripped reads analysis…assistantfinal… as messages, split anywhere`, (t) => {
    const text = 'analysisThe user greets; an assistant should answer.assistantcommentaryChecking.assistantfinalHello! I am an assistant'
    const next = random(31)
    for (let round = 0; round < 50; round++) {
      const parser = new HarmonyTextParser({ implementation, detectStripped: true })
      const diagnostics = []
      for (const chunk of cut(text, next, 7)) diagnostics.push(...parser.push(chunk).diagnostics)
      diagnostics.push(...parser.finish().diagnostics)
      t.deepEqual(
        parser.messages.map((m) => [m.channel, m.content, m.terminator]),
        [
          ['analysis', 'The user greets; an assistant should answer.', 'end'],
          ['commentary', 'Checking.', 'end'],
          // The stop token the server dropped, put back at the end of the text.
          ['final', 'Hello! I am an assistant', 'return'],
        ],
      )
      t.deepEqual(
        diagnostics.map((d) => d.code),
        ['stripped-markers'],
      )
    }
    // Not stripped: marker text, and text that does not start with a channel name, are left alone.
    const plain = new HarmonyTextParser({ implementation, detectStripped: true })
    plain.push('<|channel|>final<|message|>analysis of assistantfinal')
    plain.finish()
    t.deepEqual(
      plain.messages.map((m) => m.content),
      ['analysis of assistantfinal'],
    )
    const off = new HarmonyTextParser({ implementation })
    off.push('analysisThink.assistantfinalHi')
    off.finish()
    t.is(off.messages.length, 1, 'off by default')
  })
}
