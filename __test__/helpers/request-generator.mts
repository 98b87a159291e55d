/**
 * Seeded random conversations for the rendering tests, each expressible three ways: as a Chat Completions
 * request, as a Responses request, and as the reference renderer's own conversation JSON (built here from
 * the mapping rules of the rendering issue, independently of src/render). Random JSON schemas cover what
 * the reference's schema → TypeScript conversion handles: descriptions (multi-line), titles, examples, enums,
 * defaults of every JSON type, nullable, type arrays, arrays with and without items, nested objects, oneOf at
 * the top and on properties, tools without parameters; text covers unicode, and special-token spellings.
 */
import { random } from './harmony.mjs'

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }

interface AbstractCall {
  id: string
  name: string
  args: string
}

type AbstractTurn =
  | { kind: 'user'; text: string }
  | { kind: 'reasoning'; text: string }
  | { kind: 'final'; text: string }
  /** An assistant step that calls tools: optional preamble, then the calls (parallel when several). */
  | { kind: 'calls'; preamble: string | null; calls: AbstractCall[] }
  | { kind: 'results'; results: { id: string; name: string; output: string }[] }

export interface AbstractConversation {
  instructions: string[]
  tools: { name: string; description: string | null; parameters: Json | null }[]
  turns: AbstractTurn[]
  effort: 'low' | 'medium' | 'high' | null
}

const WORDS = [
  'weather',
  'Paris',
  'docs',
  'query',
  '東京',
  '天气',
  'погода',
  'الطقس',
  '👩‍💻',
  'a|>b',
  '<|start|>',
  '<|end|>',
  'x\ty',
  '"quoted"',
  'back\\slash',
  '  spaced  ',
  'line\nbreak',
  'ünïcödé',
  '𝔘𝔫𝔦',
  '\r\n',
  '',
]
const NAMES = ['get_weather', 'search_docs', 'run_sql', 'send_email', 'lookup', 'calc-v2', 'a_b_c', 'T1']
const KEYS = ['location', 'unit', 'query', 'limit', 'options', 'filters', 'mode', 'über', 'snake_case', 'camelCase', 'with space']

export function conversationGenerator(seed: number): () => AbstractConversation {
  const next = random(seed)
  const int = (n: number) => Math.floor(next() * n)
  const pick = <T,>(items: readonly T[]): T => items[int(items.length)]
  const chance = (p: number) => next() < p
  const text = (max = 8) => Array.from({ length: 1 + int(max) }, () => pick(WORDS)).join(pick([' ', '', '\n', '. ']))
  const scalar = (): Json => pick<() => Json>([() => text(2), () => int(1000) - 500, () => int(100) / 8, () => chance(0.5), () => null])()

  function schema(depth: number): Record<string, Json> {
    const out: Record<string, Json> = {}
    const type = pick(
      depth > 2
        ? ['string', 'number', 'integer', 'boolean']
        : ['string', 'string', 'number', 'integer', 'boolean', 'array', 'object', 'object', 'typeArray', 'oneOf', 'none'],
    )
    if (type === 'typeArray')
      out.type = pick([
        ['string', 'null'],
        ['integer', 'string'],
        ['number', 'boolean', 'null'],
      ])
    else if (type === 'oneOf') out.oneOf = Array.from({ length: 1 + int(3) }, () => schema(depth + 1))
    else if (type !== 'none') out.type = type
    if (type === 'string' && chance(0.4))
      out.enum = Array.from({ length: 1 + int(4) }, () => pick(['celsius', 'fahrenheit', 'auto', 'a b', 'ü', 'x"y']))
    if (type === 'array' && chance(0.7)) out.items = schema(depth + 1)
    if (type === 'object') {
      const properties: Record<string, Json> = {}
      for (let i = int(5); i > 0; i--) properties[pick(KEYS)] = schema(depth + 1)
      out.properties = properties
      const keys = Object.keys(properties)
      if (chance(0.7)) out.required = keys.filter(() => chance(0.5))
    }
    if (chance(0.5)) out.description = text(6)
    if (chance(0.15)) out.title = text(2)
    if (chance(0.15)) out.examples = Array.from({ length: int(3) }, () => (chance(0.8) ? text(2) : int(10)))
    if (chance(0.25)) out.default = out.enum ? pick(out.enum as Json[]) : scalar()
    if (chance(0.15)) out.nullable = chance(0.8) ? true : pick<Json>([false, 'yes'])
    return out
  }

  return () => {
    const effort = pick(['low', 'medium', 'high', null] as const)
    const instructions = Array.from({ length: int(3) }, () => text(10))
    const names = [...new Set(Array.from({ length: int(4) }, () => pick(NAMES)))]
    const tools = names.map((name) => ({
      name,
      description: chance(0.8) ? text(6) : null,
      parameters: chance(0.85) ? { ...schema(1), ...(chance(0.8) ? { type: 'object' } : {}) } : null,
    }))
    const turns: AbstractTurn[] = []
    let callCounter = 0
    for (let t = 1 + int(3); t > 0; t--) {
      turns.push({ kind: 'user', text: text(12) })
      // Tool loops only with tools offered; the last turn may stop anywhere (an open tool loop).
      for (let rounds = tools.length > 0 ? int(3) : 0; rounds > 0; rounds--) {
        if (chance(0.7)) turns.push({ kind: 'reasoning', text: text(10) })
        const calls = Array.from({ length: 1 + int(3) }, () => ({
          id: `call_${callCounter++}`,
          name: pick(tools).name,
          args: JSON.stringify({ [pick(KEYS)]: scalar() }),
        }))
        turns.push({ kind: 'calls', preamble: chance(0.4) ? text(5) : null, calls })
        turns.push({
          kind: 'results',
          results: calls.map((c) => ({ id: c.id, name: c.name, output: chance(0.5) ? JSON.stringify({ ok: scalar() }) : text(6) })),
        })
      }
      if (t > 1 || chance(0.6)) {
        if (chance(0.7)) turns.push({ kind: 'reasoning', text: text(10) })
        turns.push({ kind: 'final', text: text(12) })
      }
    }
    return { instructions, tools, turns, effort }
  }
}

export function chatRequest(
  c: AbstractConversation,
  toSystem: (i: number) => 'system' | 'developer' = () => 'system',
): Record<string, unknown> {
  const messages: Record<string, unknown>[] = c.instructions.map((text, i) => ({ role: toSystem(i), content: text }))
  let pendingReasoning: string | null = null
  for (const turn of c.turns) {
    if (turn.kind === 'user') messages.push({ role: 'user', content: turn.text })
    else if (turn.kind === 'reasoning') pendingReasoning = turn.text
    else if (turn.kind === 'final') {
      messages.push({
        role: 'assistant',
        content: turn.text,
        ...(pendingReasoning !== null ? { reasoning_content: pendingReasoning } : {}),
      })
      pendingReasoning = null
    } else if (turn.kind === 'calls') {
      messages.push({
        role: 'assistant',
        content: turn.preamble,
        ...(pendingReasoning !== null ? { reasoning: pendingReasoning } : {}),
        tool_calls: turn.calls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.args } })),
      })
      pendingReasoning = null
    } else {
      for (const result of turn.results) messages.push({ role: 'tool', tool_call_id: result.id, content: result.output })
    }
  }
  return {
    model: 'gpt-oss-120b',
    messages,
    ...(c.tools.length > 0
      ? {
          tools: c.tools.map((t) => ({
            type: 'function',
            function: {
              name: t.name,
              ...(t.description !== null ? { description: t.description } : {}),
              ...(t.parameters !== null ? { parameters: t.parameters } : {}),
            },
          })),
        }
      : {}),
    ...(c.effort !== null ? { reasoning_effort: c.effort } : {}),
  }
}

export function responsesRequest(c: AbstractConversation): Record<string, unknown> {
  const [first, ...rest] = c.instructions
  const input: Record<string, unknown>[] = rest.map((text) => ({
    type: 'message',
    role: 'developer',
    content: [{ type: 'input_text', text }],
  }))
  for (const turn of c.turns) {
    if (turn.kind === 'user') input.push({ role: 'user', content: turn.text })
    else if (turn.kind === 'reasoning')
      input.push({ type: 'reasoning', id: 'rs_1', summary: [], content: [{ type: 'reasoning_text', text: turn.text }] })
    else if (turn.kind === 'final')
      input.push({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: turn.text, annotations: [] }] })
    else if (turn.kind === 'calls') {
      if (turn.preamble !== null && turn.preamble !== '')
        input.push({ type: 'message', role: 'assistant', content: [{ type: 'output_text', text: turn.preamble }] })
      for (const call of turn.calls) input.push({ type: 'function_call', call_id: call.id, name: call.name, arguments: call.args })
    } else {
      for (const result of turn.results) input.push({ type: 'function_call_output', call_id: result.id, output: result.output })
    }
  }
  return {
    model: 'gpt-oss-120b',
    input,
    ...(first !== undefined ? { instructions: first } : {}),
    ...(c.tools.length > 0
      ? {
          tools: c.tools.map((t) => ({
            type: 'function',
            name: t.name,
            ...(t.description !== null ? { description: t.description } : {}),
            ...(t.parameters !== null ? { parameters: t.parameters } : {}),
          })),
        }
      : {}),
    ...(c.effort !== null ? { reasoning: { effort: c.effort } } : {}),
  }
}

const text = (t: string) => [{ type: 'text', text: t }]

/**
 * The reference's conversation JSON for the same conversation, with the gateway's drop rule applied unless
 * `drop` is false.
 */
export function referenceConversation(
  c: AbstractConversation,
  currentDate: string,
  { drop = true, defaultEffort = 'medium' } = {},
): { messages: Record<string, unknown>[] } {
  const effort = c.effort ?? defaultEffort
  const system = {
    role: 'system',
    content: [
      {
        type: 'system_content',
        model_identity: 'You are ChatGPT, a large language model trained by OpenAI.',
        reasoning_effort: effort[0].toUpperCase() + effort.slice(1),
        conversation_start_date: currentDate,
        knowledge_cutoff: '2024-06',
        channel_config: { valid_channels: ['analysis', 'commentary', 'final'], channel_required: true },
      },
    ],
  }
  const messages: Record<string, unknown>[] = [system]
  if (c.instructions.length > 0 || c.tools.length > 0) {
    const developer: Record<string, unknown> = { type: 'developer_content' }
    if (c.instructions.length > 0) developer.instructions = c.instructions.join('\n\n')
    if (c.tools.length > 0) {
      developer.tools = {
        functions: {
          name: 'functions',
          tools: c.tools.map((t) => ({
            name: t.name,
            description: t.description ?? '',
            ...(t.parameters !== null ? { parameters: t.parameters } : {}),
          })),
        },
      }
    }
    messages.push({ role: 'developer', content: [developer] })
  }
  const body: Record<string, unknown>[] = []
  for (const turn of c.turns) {
    if (turn.kind === 'user') body.push({ role: 'user', content: text(turn.text) })
    else if (turn.kind === 'reasoning') {
      if (turn.text !== '') body.push({ role: 'assistant', channel: 'analysis', content: text(turn.text) })
    } else if (turn.kind === 'final') body.push({ role: 'assistant', channel: 'final', content: text(turn.text) })
    else if (turn.kind === 'calls') {
      if (turn.preamble !== null && turn.preamble !== '')
        body.push({ role: 'assistant', channel: 'commentary', content: text(turn.preamble) })
      for (const call of turn.calls)
        body.push({
          role: 'assistant',
          channel: 'commentary',
          recipient: `functions.${call.name}`,
          content_type: '<|constrain|>json',
          content: text(call.args),
        })
    } else {
      for (const result of turn.results)
        body.push({
          role: 'tool',
          name: `functions.${result.name}`,
          recipient: 'assistant',
          channel: 'commentary',
          content: text(result.output),
        })
    }
  }
  // The drop rule: analysis before the last assistant final message goes.
  const lastFinal = drop ? body.map((m) => m.role === 'assistant' && m.channel === 'final').lastIndexOf(true) : -1
  messages.push(...body.filter((m, i) => !(i < lastFinal && m.channel === 'analysis')))
  return { messages }
}
