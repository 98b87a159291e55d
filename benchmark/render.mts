/**
 * Rendering benchmark: a ~100k-token agent conversation (multi-turn, tool calls with large outputs, English,
 * code, JSON and CJK/Cyrillic text taken in order from files that packages ship, so nothing repeats) as a
 * Chat Completions request.
 * - first render (no cache): native vs js vs gpt-tokenizer encoding the same texts alone;
 * - warm: the same conversation plus one new user turn, with the per-message cache holding the rest.
 * Each number is the median of several runs in this process, all cases side by side: every path warmed up
 * first, then native and js alternating run by run (measured one after the other, the first to run a path
 * paid for its compilation: the warm render, the same code on both, measured 1.2-1.4× slower first).
 *
 *   npm run bench:render    (also the last part of npm run bench)
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { encode } from 'gpt-tokenizer/encoding/o200k_base'
import { RenderCache, renderChatCompletionRequest } from 'harmony-stream'

const require = createRequire(import.meta.url)

/** Texts read in order from a source, so that no two messages repeat. */
function reader(path: string, transform: (raw: string) => string = (s) => s): (chars: number) => string {
  const text = transform(readFileSync(require.resolve(path), 'utf8'))
  let at = 0
  return (chars) => {
    if (at + chars > text.length) at = 0
    const piece = text.slice(at, at + chars)
    at += chars
    return piece
  }
}

const values = (raw: string) => Object.values(JSON.parse(raw) as Record<string, string>).join(' ')
const sources = {
  english: reader('typescript/lib/lib.es5.d.ts'),
  code: reader('typescript/lib/lib.dom.d.ts'),
  chinese: reader('typescript/lib/zh-cn/diagnosticMessages.generated.json', values),
  japanese: reader('typescript/lib/ja/diagnosticMessages.generated.json', values),
  russian: reader('typescript/lib/ru/diagnosticMessages.generated.json', values),
  json: reader('typescript/package.json'),
}

const TOOLS = ['read_file', 'search_code', 'run_tests', 'web_search'].map((name) => ({
  type: 'function',
  function: {
    name,
    description: `${name.replace('_', ' ')} in the workspace.`,
    parameters: {
      type: 'object',
      properties: {
        query: { type: 'string', description: 'What to look for' },
        limit: { type: 'integer', default: 10 },
        mode: { type: 'string', enum: ['fast', 'exact'] },
      },
      required: ['query'],
    },
  },
}))

/** The conversation: turns of question → reasoning → calls → outputs → answer until `targetTokens`. */
export function agentConversation(targetTokens = 100_000): { messages: Record<string, unknown>[]; tools: typeof TOOLS } {
  const messages: Record<string, unknown>[] = [{ role: 'system', content: sources.english(1500) }]
  let tokens = 0
  let call = 0
  const count = (text: string) => {
    tokens += text.length / 3.5 // rough; the exact count is printed from the render
    return text
  }
  for (let turn = 0; tokens < targetTokens; turn++) {
    const language = [sources.chinese, sources.japanese, sources.russian, sources.english][turn % 4]
    messages.push({ role: 'user', content: count(language(400)) })
    const id = `call_${call++}`
    messages.push({
      role: 'assistant',
      reasoning_content: count(sources.english(1200)),
      content: null,
      tool_calls: [
        {
          id,
          type: 'function',
          function: {
            name: TOOLS[turn % TOOLS.length].function.name,
            arguments: JSON.stringify({ query: sources.english(60), limit: turn }),
          },
        },
      ],
    })
    messages.push({ role: 'tool', tool_call_id: id, content: count(turn % 3 === 2 ? sources.json(3000) : sources.code(8000)) })
    messages.push({ role: 'assistant', reasoning_content: count(sources.english(800)), content: count(language(1500)) })
  }
  return { messages, tools: TOOLS }
}

function median(runs: number, fn: (run: number) => void): number {
  const samples: number[] = []
  for (let i = 0; i < runs; i++) {
    const t = performance.now()
    fn(i)
    samples.push(performance.now() - t)
  }
  return samples.sort((a, b) => a - b)[Math.floor(runs / 2)]
}

export function runRenderBenchmark(runs = 9): void {
  const body = { model: 'gpt-oss-120b', ...agentConversation() }
  // keepAnalysis: the render encodes every text of the conversation, as gpt-tokenizer alone does below.
  const options = { currentDate: '2026-01-01', keepAnalysis: true } as const
  const promptTokens = renderChatCompletionRequest(body, { ...options, implementation: 'js', cache: null }).promptTokens
  // The texts the renderer encodes, for gpt-tokenizer alone (message bodies and call arguments; headers are a
  // few tokens each).
  const texts = body.messages.flatMap((m) =>
    [
      m.content,
      m.reasoning_content,
      ...((m.tool_calls as { function: { arguments: string } }[] | undefined) ?? []).map((c) => c.function.arguments),
    ].filter((t): t is string => typeof t === 'string'),
  )
  const ordinary = { disallowedSpecial: new Set<string>() }
  let sink = 0
  const cacheOf = { native: new RenderCache(), js: new RenderCache() }
  let turn = 0
  const renderCold = (implementation: 'native' | 'js') =>
    renderChatCompletionRequest(body, { ...options, implementation, cache: null }).promptTokens
  // Each warm render adds a different user turn, so exactly one message is new to the cache.
  const renderWarm = (implementation: 'native' | 'js') => {
    const next = {
      ...body,
      messages: [...body.messages, { role: 'user', content: `Follow-up question number ${turn++}: and what about the tests?` }],
    }
    return renderChatCompletionRequest(next, { ...options, implementation, cache: cacheOf[implementation] }).promptTokens
  }
  // Warm up the JIT, both encoders (the native one is built once per process) and both caches on every path timed
  // below, so that no case pays for the code it shares with a case measured after it.
  for (const implementation of ['native', 'js'] as const) {
    sink += renderCold(implementation)
    renderChatCompletionRequest(body, { ...options, implementation, cache: cacheOf[implementation] })
    for (let i = 0; i < 3; i++) sink += renderWarm(implementation)
  }
  for (const text of texts) sink += encode(text, ordinary).length

  const alone = median(runs, () => {
    for (const text of texts) sink += encode(text, ordinary).length
  })
  // The two implementations alternate run by run (each first every other run): cold renders, then warm ones.
  const cold = { native: [] as number[], js: [] as number[] }
  const warm = { native: [] as number[], js: [] as number[] }
  for (const [samples, render] of [
    [cold, renderCold],
    [warm, renderWarm],
  ] as const) {
    for (let run = 0; run < runs; run++) {
      for (const implementation of run % 2 === 0 ? (['native', 'js'] as const) : (['js', 'native'] as const)) {
        const t = performance.now()
        sink += render(implementation)
        samples[implementation].push(performance.now() - t)
      }
    }
  }
  const middle = (samples: number[]) => samples.sort((a, b) => a - b)[Math.floor(samples.length / 2)]
  const coldMs = { native: middle(cold.native), js: middle(cold.js) }
  const warmMs = { native: middle(warm.native), js: middle(warm.js) }
  const cacheBytes = { native: cacheOf.native.stats.bytes, js: cacheOf.js.stats.bytes }
  const mtps = (ms: number) => (promptTokens / ms / 1000).toFixed(2)
  console.log(
    `\nRendering: a Chat request of ${body.messages.length} messages, ${promptTokens} prompt tokens; median of ${runs} runs each, one process`,
  )
  console.log('| case | ms | M tokens/s | × gpt-tokenizer alone |')
  console.log('|---|---:|---:|---:|')
  console.log(`| gpt-tokenizer encoding the same texts alone | ${alone.toFixed(1)} | ${mtps(alone)} | 1.00 |`)
  for (const implementation of ['native', 'js'] as const) {
    console.log(
      `| ${implementation} first render (no cache) | ${coldMs[implementation].toFixed(1)} | ${mtps(coldMs[implementation])} | ${(alone / coldMs[implementation]).toFixed(2)} |`,
    )
  }
  for (const implementation of ['native', 'js'] as const) {
    console.log(
      `| ${implementation} + one new user turn, cache warm | ${warmMs[implementation].toFixed(2)} | | ${(alone / warmMs[implementation]).toFixed(1)} |`,
    )
  }
  for (const implementation of ['native', 'js'] as const) {
    console.log(
      `${implementation}: warm re-render ${(coldMs[implementation] / warmMs[implementation]).toFixed(1)}× faster than its cold render; cache holds ${(cacheBytes[implementation] / 2 ** 20).toFixed(1)} MiB (bound ${(new RenderCache().maxBytes / 2 ** 20).toFixed(0)} MiB)`,
    )
  }
  if (sink === 42) console.log('')
}

if (process.argv[1] === import.meta.filename) runRenderBenchmark()
