/**
 * A seeded generator of realistic Harmony streams: reasoning, preambles, tool calls (functions.*, browser.*,
 * python) on commentary and analysis with every content-type spelling and both recipient positions, tool
 * results, multi-turn conversations, long content, JSON with escapes and unicode, CJK, RTL scripts, emoji
 * with ZWJ sequences and flags, and text containing `<|` or `|>`. Same seed, same streams.
 */
import { harmony, random } from './harmony.mjs'

export interface GeneratedStream {
  /** The Harmony text, markers included. */
  text: string
  tokens: number[]
  /** `assistant` for a completion (the prompt ended in `<|start|>assistant`), null for a whole conversation. */
  role: 'assistant' | null
}

const SENTENCES = [
  'The user wants the current weather in Paris.',
  'We should check the docs before answering.',
  'Let me compute: 17 * 23 = 391.',
  'Need to call the search tool with a precise query.',
  'They asked for a summary in three bullet points.',
  '東京の天気を調べる必要がある。',
  '用户想知道明天上海会不会下雨。',
  '사용자가 환율 정보를 원한다.',
  'Пользователь спрашивает о погоде в Москве.',
  'المستخدم يسأل عن الطقس في القاهرة.',
  'उपयोगकर्ता दिल्ली के मौसम के बारे में पूछ रहा है।',
  'Family: 👨‍👩‍👧‍👦, flags: 🇫🇷🇯🇵, skin tones: 👍🏽, keycap: 1️⃣.',
  'Math: ∑ x² ≤ ∞, arrows ⟶, and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 letters.',
  'Templates use <| and |> as delimiters, like <|example|> or a|>b.',
  'Tabs\tand\nnewlines\r\nand trailing spaces   ',
  'A literal backslash \\ and "quotes" and \'single\' ones.',
]
const FUNCTIONS = ['functions.get_weather', 'functions.search_docs', 'functions.run_sql', 'functions.send_email']
const BUILTINS = ['browser.search', 'browser.open', 'python', 'container.exec']
const CONTENT_TYPES = [' <|constrain|>json', '<|constrain|>json', ' json', ' code', '']

export function generator(seed: number): () => GeneratedStream {
  const next = random(seed)
  const pick = <T,>(items: readonly T[]): T => items[Math.floor(next() * items.length)]
  const chance = (p: number) => next() < p

  const prose = () => {
    const count = 1 + Math.floor(next() * (chance(0.1) ? 40 : 5))
    return Array.from({ length: count }, () => pick(SENTENCES)).join(chance(0.5) ? ' ' : '\n')
  }
  const json = () =>
    JSON.stringify({
      query: pick(SENTENCES),
      limit: Math.floor(next() * 100),
      nested: { unicode: '\u00e9\u4e2d\ud83d\ude00', escapes: 'line\nbreak "quoted" \\ back', list: [1, 2.5, null, true] },
    })
  const toolCall = () => {
    const recipient = chance(0.75) ? pick(FUNCTIONS) : pick(BUILTINS)
    const channel = chance(0.8) ? 'commentary' : 'analysis'
    const type = pick(CONTENT_TYPES)
    const body = type.includes('code') ? 'print(sum(range(10)))' : json()
    const header = chance(0.5)
      ? `<|start|>assistant<|channel|>${channel} to=${recipient}${type}`
      : `<|start|>assistant to=${recipient}<|channel|>${channel}${type}`
    return { header, body, recipient }
  }

  return () => {
    const conversation = chance(0.3)
    const parts: string[] = []
    if (conversation) {
      if (chance(0.5))
        parts.push(`<|start|>system<|message|>You are a helpful assistant.\nReasoning: ${pick(['low', 'medium', 'high'])}<|end|>`)
      if (chance(0.3)) parts.push(`<|start|>developer<|message|># Instructions\n\n${prose()}<|end|>`)
      parts.push(`<|start|>user<|message|>${prose()}<|end|>`)
    }
    const turns = conversation ? 1 + Math.floor(next() * 3) : 1
    for (let turn = 0; turn < turns; turn++) {
      const steps = 1 + Math.floor(next() * 3)
      for (let step = 0; step < steps; step++) {
        parts.push(`<|start|>assistant<|channel|>analysis<|message|>${prose()}<|end|>`)
        if (chance(0.3)) parts.push(`<|start|>assistant<|channel|>commentary<|message|>${pick(SENTENCES)}<|end|>`)
        if (chance(0.6)) {
          const call = toolCall()
          parts.push(`${call.header}<|message|>${call.body}<|call|>`)
          if (conversation) parts.push(`<|start|>${call.recipient} to=assistant<|channel|>commentary<|message|>${json()}<|end|>`)
          else break // a completion ends at its tool call
        }
      }
      if (parts[parts.length - 1].endsWith('<|call|>')) break
      const ending = conversation && turn < turns - 1 ? '<|end|>' : pick(['<|return|>', '<|return|>', '<|end|>', ''])
      parts.push(`<|start|>assistant<|channel|>final<|message|>${prose()}${ending}`)
      if (conversation && turn < turns - 1) parts.push(`<|start|>user<|message|>${prose()}<|end|>`)
    }
    let text = parts.join('')
    let role: 'assistant' | null = null
    if (!conversation) {
      // A completion: the prompt already ended in <|start|>assistant.
      text = text.slice('<|start|>assistant'.length)
      role = 'assistant'
    }
    return { text, tokens: harmony(text), role }
  }
}
