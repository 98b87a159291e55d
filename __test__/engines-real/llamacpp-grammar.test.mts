/**
 * Structured outputs on a real llama-server (issue 20 item 2): the lazy GBNF grammar of constraints.ts makes
 * the bigram model, which would write "Hello world" as its answer, write JSON that the schema accepts, while
 * what comes before the final message stays as the model wants it. The verdict on the JSON is Ajv's (the same
 * check the adapters make), not this file's; and the same prompt without the grammar must give the chain's
 * text, so the test shows the grammar at work rather than a model that writes JSON anyway.
 *
 * The model's logits are equal for every id off its chains, so under the grammar greedy decoding takes the
 * allowed id llama.cpp ranks first: the JSON is whatever the grammar allows, which is the point.
 */

import test from 'ava'
import { encode } from 'gpt-tokenizer/encoding/o200k_base'
import { HarmonyStreamParser } from 'harmony-stream'
import { type EngineStep, LlamaCppEngine } from 'harmony-stream/engines'
import { schemaValidator } from '../helpers/ajv.mjs'
import { startGateway } from '../helpers/gateway.mjs'
import { llamaBuildOrSkip, llamaServerForFile } from '../helpers/llama-server.mjs'

const build = llamaBuildOrSkip()
const real = build ? test : test.skip

const server = llamaServerForFile(test, build)

const SCHEMAS: Record<string, Record<string, unknown>> = {
  verdict: {
    type: 'object',
    properties: {
      answer: { enum: ['yes', 'no'] },
      confidence: { type: 'integer' },
      tags: { type: 'array', items: { enum: ['short', 'long'] }, minItems: 1, maxItems: 3 },
      note: { type: ['string', 'null'], maxLength: 12 },
      when: { type: 'string', format: 'date' },
    },
    required: ['answer', 'confidence', 'tags', 'note', 'when'],
    additionalProperties: false,
  },
  list: { type: 'array', items: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] }, minItems: 2, maxItems: 2 },
  nested: {
    type: 'object',
    $defs: {
      leaf: {
        type: 'object',
        properties: { id: { const: 7 }, kind: { anyOf: [{ const: 'a' }, { type: 'null' }] } },
        required: ['id', 'kind'],
      },
    },
    properties: { left: { $ref: '#/$defs/leaf' }, right: { $ref: '#/$defs/leaf' } },
    required: ['left', 'right'],
  },
}

const ajv = schemaValidator()

async function collect(steps: AsyncIterable<EngineStep>): Promise<number[]> {
  const tokens: number[] = []
  for await (const step of steps) tokens.push(...step.tokens)
  return tokens
}

/** The final message's content of a completion, read by the parser. */
function finalAnswer(tokens: number[]): string | undefined {
  const parser = new HarmonyStreamParser({ role: 'assistant' })
  const batch = parser.push(tokens)
  const done = parser.finish()
  return [...batch.completed, ...done.completed].find((message) => message.channel === 'final')?.content
}

for (const [name, schema] of Object.entries(SCHEMAS)) {
  real(`llama-server under the grammar writes JSON the '${name}' schema accepts, where the model alone writes prose`, async (t) => {
    const engine = new LlamaCppEngine({ url: server().url })
    const prompt = [...encode('Answer in JSON.'), server().model.chains.final.start]
    const free = finalAnswer(await collect(engine.generate({ tokens: prompt, temperature: 0, maxTokens: 64 })))
    t.is(free, 'Hello world', 'without the grammar the model writes its chain')
    const tokens = await collect(engine.generate({ tokens: prompt, temperature: 0, maxTokens: 200, responseFormat: { name, schema } }))
    const answer = finalAnswer(tokens)
    t.not(answer, undefined, `a final message: ${JSON.stringify(tokens)}`)
    t.log(answer)
    const value = JSON.parse(answer!)
    t.true(ajv.validate(schema, value), `${answer}: ${ajv.errorsText()}`)
  })
}

real('the grammar waits for the final message: the model reaches it by its own header', async (t) => {
  // The bigram model writes `<|channel|>final<|message|>` itself; the ids up to there are the chain's.
  const engine = new LlamaCppEngine({ url: server().url })
  const chain = server().model.chains.final.tokens
  const header = chain.slice(0, chain.indexOf(200_008) + 1)
  const tokens = await collect(
    engine.generate({
      tokens: [server().model.chains.final.start],
      temperature: 0,
      maxTokens: 200,
      responseFormat: { name: 'v', schema: SCHEMAS.verdict! },
    }),
  )
  t.deepEqual(tokens.slice(0, header.length), header)
})

real('through the gateway: a Chat response_format gets schema-valid JSON from llama-server, with no diagnostic', async (t) => {
  const diagnostics: unknown[] = []
  const { client } = await startGateway(t, {
    engine: new LlamaCppEngine({ url: server().url }),
    onDiagnostic: (d: unknown) => diagnostics.push(d),
  })
  const schema = SCHEMAS.verdict!
  const completion = await client.chat.completions.create({
    model: 'gpt-oss',
    messages: [{ role: 'user', content: 'Is it short?' }],
    temperature: 0,
    max_tokens: 200,
    response_format: { type: 'json_schema', json_schema: { name: 'verdict', schema, strict: true } },
  })
  const content = completion.choices[0]!.message.content!
  t.true(ajv.validate(schema, JSON.parse(content)), content)
  t.deepEqual(diagnostics, [])
  const response = await client.responses.create({
    model: 'gpt-oss',
    input: 'Is it short?',
    temperature: 0,
    max_output_tokens: 200,
    text: { format: { type: 'json_schema', name: 'verdict', schema } },
  })
  t.true(ajv.validate(schema, JSON.parse(response.output_text)), response.output_text)
  t.deepEqual(response.text?.format, { type: 'json_schema', name: 'verdict', schema })
})

real('a strict tool on llama-server: the call the model starts gets arguments its schema accepts', async (t) => {
  const engine = new LlamaCppEngine({ url: server().url })
  const weather = {
    type: 'object',
    properties: { city: { enum: ['Paris', 'Rome'] }, days: { type: 'integer' } },
    required: ['city', 'days'],
  }
  const prompt = [...encode('Call the tool.'), server().model.chains.tool.start]
  const free = await collect(engine.generate({ tokens: prompt, temperature: 0, maxTokens: 64 }))
  t.deepEqual(free, server().model.chains.tool.tokens, 'without the grammar the model writes its chain: not JSON after the header')
  const argumentSchemas = [
    { name: 'get_weather', schema: weather },
    { name: 'get', schema: null },
  ]
  const tokens = await collect(engine.generate({ tokens: prompt, temperature: 0, maxTokens: 200, argumentSchemas }))
  const parser = new HarmonyStreamParser({ role: 'assistant', toolNames: ['functions.get_weather', 'functions.get'] })
  const messages = [...parser.push(tokens).completed, ...parser.finish().completed]
  const call = messages.find((message) => message.recipient === 'functions.get_weather')
  t.not(call, undefined, JSON.stringify(messages))
  t.log(call!.content)
  t.true(ajv.validate(weather, JSON.parse(call!.content)), `${call!.content}: ${ajv.errorsText()}`)
})
