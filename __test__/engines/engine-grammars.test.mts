/**
 * The grammars the engine clients send for structured outputs (issue 20 item 2), proved with a real grammar
 * engine: xgrammar from PyPI (helpers/xgrammar_match.py), the one vLLM, SGLang and TensorRT-LLM compile
 * structural tags with. Each client's request body is taken from a stand-in server (what the engine would
 * receive), and its grammar run over Harmony completions token by token.
 *
 * Truth about the JSON is Ajv's: a completion whose final answer Ajv finds valid (written compactly, in the
 * schema's property order) must be accepted and end at `<|return|>`; one whose answer Ajv refuses must be
 * refused. Analysis, preambles and a tool call instead of an answer stay free. llama.cpp's GBNF (checked on a
 * real llama-server in engines-real/llamacpp-grammar.test.mts) is compiled by xgrammar too, from the text its
 * lazy trigger feeds it: accepted answers must be Ajv-valid, and the schema-ordered valid ones accepted.
 */
import { spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import test from 'ava'
import fc from 'fast-check'
import { HarmonyRequestError } from 'harmony-stream'
import {
  type Engine,
  type EngineStep,
  type GenerateRequest,
  LlamaCppEngine,
  SglangEngine,
  TrtllmEngine,
  VllmEngine,
} from 'harmony-stream/engines'
import { schemaValidator } from '../helpers/ajv.mjs'
import { type FakeEngine, fakeLlamaCpp, fakeSglang, fakeTrtllm, fakeVllm, fakeVllmGenerate } from '../helpers/fake-engines.mjs'
import { harmony } from '../helpers/harmony.mjs'

const require = createRequire(import.meta.url)
const PYTHON = join(import.meta.dirname, '..', '..', '.venv', 'bin', 'python')

const ajv = schemaValidator(['date', 'time', 'date-time', 'uuid'])

interface Schema {
  schema: Record<string, unknown>
  /** Answers Ajv accepts, written in the schema's property order. */
  valid: unknown[]
  /** Answers to try; Ajv says which are valid. */
  others: unknown[]
}

const SCHEMAS: Record<string, Schema> = {
  verdict: {
    schema: {
      type: 'object',
      properties: {
        answer: { enum: ['yes', 'no'] },
        confidence: { type: 'integer' },
        tags: { type: 'array', items: { enum: ['short', 'long'] }, minItems: 1, maxItems: 2 },
        note: { type: ['string', 'null'], maxLength: 5 },
        when: { type: 'string', format: 'date' },
      },
      required: ['answer', 'confidence', 'tags'],
      additionalProperties: false,
    },
    valid: [
      { answer: 'yes', confidence: 90, tags: ['short'] },
      { answer: 'no', confidence: -3, tags: ['long', 'short'], note: null, when: '2025-02-28' },
      { answer: 'no', confidence: 0, tags: ['long'], note: 'abc' },
    ],
    others: [
      // Valid, but xgrammar 0.2.8 writes strings with a maxLength without escapes: its tag refuses this one.
      { answer: 'no', confidence: 0, tags: ['long'], note: 'ab"c' },
      { answer: 'maybe', confidence: 90, tags: ['short'] },
      { answer: 'yes', tags: ['short'] },
      { answer: 'yes', confidence: 1.5, tags: ['short'] },
      { answer: 'yes', confidence: 1, tags: [] },
      { answer: 'yes', confidence: 1, tags: ['short', 'short', 'long'] },
      { answer: 'yes', confidence: 1, tags: ['short'], note: 'too long' },
      { answer: 'yes', confidence: 1, tags: ['short'], when: '2025-13-01' },
      { answer: 'yes', confidence: 1, tags: ['short'], extra: true },
      { confidence: 1, answer: 'yes', tags: ['short'] },
      ['yes'],
      'yes',
    ],
  },
  nested: {
    schema: {
      type: 'object',
      $defs: {
        node: {
          type: 'object',
          properties: { id: { type: 'string', format: 'uuid' }, children: { type: 'array', items: { $ref: '#/$defs/node' } } },
          required: ['id'],
        },
      },
      properties: {
        root: { $ref: '#/$defs/node' },
        at: { type: 'string', format: 'date-time' },
        kind: { anyOf: [{ const: 'a' }, { type: 'null' }] },
      },
      required: ['root', 'kind'],
    },
    valid: [
      { root: { id: '123e4567-e89b-12d3-a456-426614174000' }, kind: null },
      {
        root: { id: '123e4567-e89b-12d3-a456-426614174000', children: [{ id: 'ffffffff-ffff-ffff-ffff-ffffffffffff', children: [] }] },
        at: '2025-01-02T03:04:05Z',
        kind: 'a',
      },
    ],
    others: [
      { root: { id: 'not-a-uuid' }, kind: null },
      { root: { id: '123e4567-e89b-12d3-a456-426614174000', children: [{}] }, kind: null },
      { root: { id: '123e4567-e89b-12d3-a456-426614174000' }, kind: 'b' },
      { root: { id: '123e4567-e89b-12d3-a456-426614174000' } },
    ],
  },
  named: {
    // A root $ref beside its $defs: how zod-to-json-schema writes a named schema.
    schema: {
      $ref: '#/$defs/verdict',
      $defs: { verdict: { type: 'object', properties: { answer: { enum: ['yes', 'no'] } }, required: ['answer'] } },
    },
    valid: [{ answer: 'yes' }, { answer: 'no' }],
    others: [{ answer: 'maybe' }, {}, []],
  },
  optional: {
    schema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'boolean' }, c: { type: 'null' } }, required: ['b'] },
    valid: [{ b: true }, { a: 1, b: false }, { b: true, c: null }, { a: -2.5e3, b: true, c: null }],
    others: [{}, { a: 1 }, { b: true, d: 1 }, { a: 'x', b: true }, { c: null, b: true }],
  },
  map: {
    schema: { type: 'object', additionalProperties: { type: 'number' } },
    valid: [{}, { a: 1 }, { a: 1, 'b c': -2.5e3 }],
    others: [{ a: 'one' }, { a: null }, []],
  },
  jsonObject: {
    schema: { type: 'object' },
    valid: [{}, { a: [1, { b: null }], 'key with "quote"': 'ü' }],
    others: [[], 'text', 1, null],
  },
  tuple: {
    schema: { type: 'array', prefixItems: [{ type: 'boolean' }, { type: 'string', maxLength: 3 }], items: false, minItems: 1 },
    valid: [[true], [false, 'abc']],
    others: [[], ['x'], [true, 'abcd'], [true, 'a', 1]],
  },
}

/** Random answers too: Ajv sorts them into valid and invalid, whatever they are. */
function randomAnswers(seed: number): unknown[] {
  return fc.sample(fc.jsonValue({ maxDepth: 3 }), { seed, numRuns: 25 })
}

/** Harmony completions with `json` as the final answer, in the shapes gpt-oss writes. */
function completions(json: string): number[][] {
  const answer = (header: string) => harmony(`${header}${json}<|return|>`)
  const analysis = harmony('<|channel|>analysis<|message|>Think 🪽 it over.<|end|><|start|>assistant')
  const preamble = harmony('<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant')
  return [
    answer('<|channel|>final<|message|>'),
    [...analysis, ...answer('<|channel|>final<|message|>')],
    [...analysis, ...preamble, ...answer('<|channel|>final <|constrain|>json<|message|>')],
  ]
}

/** What a stand-in server received from each client asked for `schema` (and, or instead, `constraints`). */
async function bodiesFor(
  schema: Record<string, unknown> | null,
  constraints: Pick<GenerateRequest, 'argumentSchemas' | 'callArguments'> = {},
): Promise<Record<string, Record<string, unknown>>> {
  const clients: [string, (b: { completion: number[] }) => Promise<FakeEngine>, (url: string) => Engine][] = [
    ['vllm', fakeVllm, (url) => new VllmEngine({ url })],
    ['vllm generate', fakeVllmGenerate, (url) => new VllmEngine({ url, api: 'generate' })],
    ['sglang', fakeSglang, (url) => new SglangEngine({ url })],
    ['trtllm', fakeTrtllm, (url) => new TrtllmEngine({ url, model: 'gpt-oss' })],
    ['llamacpp', fakeLlamaCpp, (url) => new LlamaCppEngine({ url })],
  ]
  const bodies: Record<string, Record<string, unknown>> = {}
  for (const [name, start, client] of clients) {
    const fake = await start({ completion: harmony('<|channel|>final<|message|>{}<|return|>') })
    try {
      const steps: EngineStep[] = []
      const request: GenerateRequest = {
        tokens: [1, 2, 3],
        ...constraints,
        ...(schema === null ? {} : { responseFormat: { name: 'answer', schema } }),
      }
      for await (const step of client(fake.url).generate(request)) steps.push(step)
      bodies[name] = fake.bodies[0]!
    } finally {
      await fake.close()
    }
  }
  return bodies
}

/** The structural tag each xgrammar engine received, as its text. */
function structuralTags(bodies: Record<string, Record<string, unknown>>): Record<string, string> {
  const sampling = (name: string) => bodies[name]!.sampling_params as Record<string, unknown>
  return {
    vllm: (bodies.vllm!.structured_outputs as { structural_tag: string }).structural_tag,
    'vllm generate': (sampling('vllm generate').structured_outputs as { structural_tag: string }).structural_tag,
    sglang: sampling('sglang').structural_tag as string,
    trtllm: JSON.stringify(bodies.trtllm!.response_format),
  }
}

interface Match {
  accepted: boolean
  rejectedAt: number | null
  terminated: boolean
}

function xgrammar(
  cases: { kind: 'structural_tag' | 'ebnf'; grammar: string; sequences: number[][]; stops?: number[] }[],
): (Match[] | { error: string })[] {
  const run = spawnSync(PYTHON, [join(import.meta.dirname, '..', 'helpers', 'xgrammar_match.py')], {
    input: JSON.stringify({ vocabulary: require.resolve('gpt-tokenizer/data/o200k_base.tiktoken'), cases }),
    encoding: 'utf8',
    maxBuffer: 1 << 28,
  })
  if (run.error || run.status !== 0)
    throw new Error(`xgrammar did not run (${run.error?.message ?? run.stderr}); run: node scripts/setup-reference.mjs`)
  return JSON.parse(run.stdout)
}

for (const [name, { schema, valid, others }] of Object.entries(SCHEMAS)) {
  test(`${name}: every engine's grammar, compiled by xgrammar, takes the completions Ajv finds valid and refuses the others`, async (t) => {
    const bodies = await bodiesFor(schema)
    const tags = structuralTags(bodies)
    // One layout for every xgrammar engine.
    t.is(new Set(Object.values(tags).map((tag) => JSON.stringify(JSON.parse(tag)))).size, 1)
    const llamacpp = bodies.llamacpp!
    t.is(llamacpp.grammar_lazy, true)
    t.deepEqual(llamacpp.grammar_triggers, [{ type: 1, value: '<|channel|>final' }])

    const answers = [...valid, ...others, ...randomAnswers(name.length)]
    const verdicts = answers.map((value) => ajv.validate(schema, value))
    valid.forEach((value, i) => {
      t.true(verdicts[i], `Ajv takes the valid example ${JSON.stringify(value)}`)
    })
    const perAnswer = answers.map((value) => completions(JSON.stringify(value)))
    // Free before the answer: a tool call instead of one, and more text after the JSON or a wrong end refused.
    const toolCall = harmony('<|channel|>commentary to=functions.lookup <|constrain|>json<|message|>{"q":1}<|call|>')
    const firstValid = JSON.stringify(valid[0])
    const wrongEnds = [
      harmony(`<|channel|>final<|message|>${firstValid} and more<|return|>`),
      harmony(`<|channel|>final<|message|>${firstValid}<|end|>`),
    ]
    const [tagResult, tagReturnOnly, gbnfResult] = xgrammar([
      { kind: 'structural_tag', grammar: tags.vllm!, sequences: [...perAnswer.flat(), toolCall, ...wrongEnds] },
      // As an engine whose xgrammar vocabulary has <|return|> alone for a stop token: the same verdicts.
      { kind: 'structural_tag', grammar: tags.vllm!, sequences: [...perAnswer.flat(), toolCall, ...wrongEnds], stops: [200_002] },
      // llama.cpp's grammar is fed the text from its trigger on: the final message's header, then the answer.
      {
        kind: 'ebnf',
        grammar: llamacpp.grammar as string,
        sequences: answers.flatMap((value) => [
          harmony(`<|channel|>final<|message|>${JSON.stringify(value)}<|return|>`),
          harmony(`<|channel|>final <|constrain|>json<|message|>${JSON.stringify(value)}<|return|>`),
        ]),
      },
    ])
    if (!Array.isArray(tagResult) || !Array.isArray(tagReturnOnly) || !Array.isArray(gbnfResult))
      throw new Error(`xgrammar could not compile: ${JSON.stringify([tagResult, gbnfResult])}`)
    // Whether <|return|> is a stop token to xgrammar or text, every id is taken or refused alike.
    t.deepEqual(
      tagReturnOnly.map((match) => match.accepted),
      tagResult.map((match) => match.accepted),
    )

    const perCompletion = perAnswer[0]!.length
    answers.forEach((value, i) => {
      const label = `${JSON.stringify(value)} (Ajv: ${verdicts[i] ? 'valid' : 'invalid'})`
      const canonical = i < valid.length
      for (let k = 0; k < perCompletion; k++) {
        const result = tagResult[i * perCompletion + k]!
        const taken = result.accepted && result.terminated
        if (canonical) t.true(taken, `structural tag, completion ${k}: ${label} ${JSON.stringify(result)}`)
        else if (!verdicts[i]) t.false(taken, `structural tag, completion ${k}: ${label}`)
      }
      for (let k = 0; k < 2; k++) {
        const result = gbnfResult[i * 2 + k]!
        const taken = result.accepted && result.terminated
        if (canonical) t.true(taken, `GBNF, header ${k}: ${label} ${JSON.stringify(result)}`)
        // The GBNF generates a part of what the schema accepts (its property order, bounded numbers): what
        // it takes must be valid.
        if (taken) t.true(verdicts[i], `GBNF takes only valid answers: ${label}`)
      }
    })
    const rest = tagResult.slice(answers.length * perCompletion)
    t.true(rest[0]!.accepted && rest[0]!.terminated, 'a tool call instead of an answer is free')
    t.false(rest[1]!.accepted && rest[1]!.terminated, 'text after the JSON is refused')
    t.false(rest[2]!.accepted && rest[2]!.terminated, 'a final answer ends with <|return|>, not <|end|>')
  })
}

test('a responseFormat the grammars cannot enforce is refused by every client before any request', async (t) => {
  const fake = await fakeVllm({ completion: [200_002] })
  try {
    const engine = new VllmEngine({ url: fake.url })
    const request = (responseFormat: unknown) => () => engine.generate({ tokens: [1], responseFormat: responseFormat as never })
    t.throws(request({ name: 'x', schema: { type: 'string', pattern: '^a$' } }), {
      instanceOf: HarmonyRequestError,
      message: /responseFormat\.schema\.pattern/,
    })
    t.throws(request({ schema: {} }), { instanceOf: TypeError, message: /responseFormat must be/ })
    t.is(fake.bodies.length, 0)
  } finally {
    await fake.close()
  }
})

/**
 * Strict tools: `get_weather`'s arguments enforced, the others free. A call counts as taken when xgrammar took
 * every id of it, `<|call|>` included (the engine stops there: whether xgrammar then counts itself ended
 * depends on whether `<|call|>` is one of its stop tokens, which the tag leaves open).
 */
/** Strict tools: `get_weather`'s arguments enforced, `get` (whose name starts the other's) and `lookup` free. */
const WEATHER = {
  type: 'object',
  properties: { city: { enum: ['Paris', 'Rome'] }, days: { type: 'integer' } },
  required: ['city'],
  additionalProperties: false,
}
const TOOLS = [
  { name: 'get_weather', schema: WEATHER },
  { name: 'get', schema: null },
  { name: 'lookup', schema: null },
]

for (const withFormat of [false, true]) {
  test(`strict tools${withFormat ? ' with a response format' : ''}: calls of a strict tool take only arguments Ajv finds valid, other calls and the rest stay free`, async (t) => {
    const answerSchema = SCHEMAS.verdict!.schema
    const bodies = await bodiesFor(withFormat ? answerSchema : null, { argumentSchemas: TOOLS })
    const tags = structuralTags(bodies)
    t.is(new Set(Object.values(tags).map((tag) => JSON.stringify(JSON.parse(tag)))).size, 1)
    const llamacpp = bodies.llamacpp!
    t.deepEqual(llamacpp.grammar_triggers, [
      ...(withFormat ? [{ type: 1, value: '<|channel|>final' }] : []),
      { type: 1, value: ' to=functions.' },
    ])
    const argumentsTried = [
      { city: 'Paris' },
      { city: 'Rome', days: 3 },
      { city: 'Oslo' },
      { days: 3 },
      { city: 'Paris', extra: 1 },
      'Paris',
      [],
    ]
    const verdicts = argumentsTried.map((value) => ajv.validate(WEATHER, value))
    // The two header orders gpt-oss writes (the prompt ends with `<|start|>assistant`), after some analysis.
    const analysis = harmony('<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant')
    const calls = (args: string, name = 'get_weather') => [
      harmony(`<|channel|>commentary to=functions.${name} <|constrain|>json<|message|>${args}<|call|>`),
      [...analysis, ...harmony(` to=functions.${name}<|channel|>commentary json<|message|>${args}<|call|>`)],
    ]
    // What llama.cpp's lazy grammar is fed in each order: the text from the trigger word on.
    const fromTrigger = (args: string, name = 'get_weather') => [
      harmony(` to=functions.${name} <|constrain|>json<|message|>${args}<|call|>`),
      harmony(` to=functions.${name}<|channel|>commentary json<|message|>${args}<|call|>`),
    ]
    const strictCalls = argumentsTried.flatMap((value) => calls(JSON.stringify(value)))
    const freeCalls = [...calls('not json at all', 'lookup'), ...calls('{"anything": true}', 'get')]
    const freeAnswer = harmony('<|channel|>final<|message|>Any text at all.<|return|>')
    const [tag, tagReturnOnly, gbnf] = xgrammar([
      { kind: 'structural_tag', grammar: tags.vllm!, sequences: [...strictCalls, ...freeCalls, freeAnswer] },
      { kind: 'structural_tag', grammar: tags.vllm!, sequences: [...strictCalls, ...freeCalls, freeAnswer], stops: [200_002] },
      // llama.cpp's grammar is fed from the trigger word on: ` to=functions.` and the rest of the call.
      {
        kind: 'ebnf',
        grammar: llamacpp.grammar as string,
        sequences: [
          ...argumentsTried.flatMap((value) => fromTrigger(JSON.stringify(value))),
          ...fromTrigger('not json at all', 'lookup'),
          ...fromTrigger('{"anything": true}', 'get'),
        ],
      },
    ])
    if (!Array.isArray(tag) || !Array.isArray(tagReturnOnly) || !Array.isArray(gbnf))
      throw new Error(`xgrammar: ${JSON.stringify([tag, gbnf])}`)
    for (const result of [tag, tagReturnOnly, gbnf]) {
      argumentsTried.forEach((value, i) => {
        for (let k = 0; k < 2; k++) {
          const match = result[i * 2 + k]!
          t.is(match.accepted, verdicts[i], `${JSON.stringify(value)}, header order ${k}: ${JSON.stringify(match)}`)
        }
      })
      const free = result.slice(argumentsTried.length * 2)
      t.true(
        free.slice(0, 4).every((match) => match.accepted),
        `free tools: ${JSON.stringify(free)}`,
      )
    }
    // Without a response format the answer is free; with one, prose is refused.
    const answer = tag[tag.length - 1]!
    t.is(answer.accepted, !withFormat)
  })
}

test("a required call's arguments (callArguments): held to the schema from the first token, by every engine's grammar", async (t) => {
  const bodies = await bodiesFor(null, { callArguments: { schema: WEATHER } })
  const tags = structuralTags(bodies)
  t.is(new Set(Object.values(tags).map((tag) => JSON.stringify(JSON.parse(tag)))).size, 1)
  const llamacpp = bodies.llamacpp!
  t.is(llamacpp.grammar_lazy, undefined, 'not waiting for a trigger')
  const tried = [{ city: 'Paris' }, { city: 'Rome', days: 3 }, { city: 'Oslo' }, { days: 3 }, 'Paris']
  const verdicts = tried.map((value) => ajv.validate(WEATHER, value))
  const sequences = [...tried.map((value) => harmony(`${JSON.stringify(value)}<|call|>`)), harmony('Hello world<|call|>')]
  const [tag, tagReturnOnly, gbnf] = xgrammar([
    { kind: 'structural_tag', grammar: tags.vllm!, sequences },
    { kind: 'structural_tag', grammar: tags.vllm!, sequences, stops: [200_002] },
    { kind: 'ebnf', grammar: llamacpp.grammar as string, sequences },
  ])
  if (!Array.isArray(tag) || !Array.isArray(tagReturnOnly) || !Array.isArray(gbnf))
    throw new Error(`xgrammar: ${JSON.stringify([tag, gbnf])}`)
  for (const result of [tag, tagReturnOnly, gbnf]) {
    for (const [i, value] of tried.entries())
      t.is(result[i]!.accepted, verdicts[i], `${JSON.stringify(value)}: ${JSON.stringify(result[i])}`)
    t.false(result[tried.length]!.accepted, 'prose is refused')
  }
})
