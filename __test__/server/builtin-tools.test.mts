/**
 * gpt-oss's own tools run by the gateway inside one response (issue 34): a Responses request's
 * `code_interpreter` tool offered as `python`, the model's call run in the real Pyodide sandbox, its result
 * appended to the exact ids the engine saw and generated, and the engine going on from there; streamed and
 * whole, both parser implementations. The engine is a stand-in that calls the tool as gpt-oss does and answers
 * with what the tool printed, read from its prompt.
 */
import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

import test, { type ExecutionContext } from 'ava'
import { BrowserSession, HttpSearch, LocalSearch, PyodidePython, SettingError, serveSettings } from 'harmony-stream/server'

import { startGateway } from '../helpers/gateway.mjs'
import { harmony, IMPLEMENTATIONS } from '../helpers/harmony.mjs'
import { startMcpServer } from '../helpers/mcp-server.mjs'
import { scripted } from '../helpers/scripted-engine.mjs'
import { decodeTokens } from '../helpers/token-bytes.mjs'

const run = promisify(execFile)

const CODE = 'print(sum(range(10)))'

/**
 * Calls python with `code` as gpt-oss does (analysis, then the call on analysis to `python`, `code` content
 * type), `calls` times; once its prompt ends with that many results, answers with the last one.
 */
function pythonCaller(code: string, calls = 1): ReturnType<typeof scripted> {
  return scripted((prompt) => {
    const results = [...prompt.matchAll(/<\|start\|>python to=assistant<\|channel\|>analysis<\|message\|>([\s\S]*?)<\|end\|>/g)]
    return results.length >= calls
      ? `<|channel|>final<|message|>The sum is ${results.at(-1)![1]!.trim()}.<|return|>`
      : `<|channel|>analysis<|message|>Let me compute it.<|end|><|start|>assistant<|channel|>analysis to=python code<|message|>${code}<|call|>`
  })
}

/** A python runner for one test's gateway, which closes it with itself. */
const python = () => new PyodidePython()

const REQUEST = {
  model: 'gpt-oss',
  input: 'What is the sum of 0 to 9?',
  tools: [{ type: 'code_interpreter' as const, container: { type: 'auto' as const } }],
  include: ['code_interpreter_call.outputs' as const],
}

for (const implementation of IMPLEMENTATIONS) {
  test(`code_interpreter runs in Pyodide inside the response and the answer uses its output (${implementation})`, async (t) => {
    const { engine, prompts } = pythonCaller(CODE)
    const { client } = await startGateway(t, { engine, python: python(), implementation })
    const response = await client.responses.create(REQUEST)
    t.is(response.status, 'completed')
    t.deepEqual(
      response.output.map((item) => item.type),
      ['reasoning', 'code_interpreter_call', 'message'],
    )
    const call = response.output[1] as { code: string; outputs: { type: string; logs: string }[]; status: string; container_id: string }
    t.is(call.code, CODE)
    t.is(call.status, 'completed')
    t.deepEqual(call.outputs, [{ type: 'logs', logs: '45' }])
    t.regex(call.container_id, /^cntr_/)
    t.is(response.output_text, 'The sum is 45.')

    // The system message declares python as gpt-oss was trained; the second prompt is the first, the ids the
    // engine generated, and the tool's result: nothing re-rendered.
    t.is(prompts.length, 2)
    const [first, second] = prompts as [number[], number[]]
    t.regex(decodeTokens(first), /# Tools\n\n## python\n\nUse this tool to execute Python code/)
    t.deepEqual(second.slice(0, first.length), first)
    t.regex(
      decodeTokens(second.slice(first.length)),
      /^<\|channel\|>analysis<\|message\|>Let me compute it\.<\|end\|><\|start\|>assistant<\|channel\|>analysis to=python code<\|message\|>print\(sum\(range\(10\)\)\)<\|call\|><\|start\|>python to=assistant<\|channel\|>analysis<\|message\|>45<\|end\|><\|start\|>assistant$/,
    )
    // The tool's result is input the gateway gave, not output.
    const generated = harmony('<|channel|>final<|message|>The sum is 45.<|return|>').length
    t.true(response.usage!.output_tokens < second.length - first.length + generated)
  })
}

test('streamed: the code_interpreter events as OpenAI sends them, and the same response as the whole one', async (t) => {
  const { engine } = pythonCaller(CODE)
  const { client } = await startGateway(t, { engine, python: python() })
  const stream = await client.responses.create({ ...REQUEST, stream: true })
  const types: string[] = []
  let code = ''
  let completed: { output: { type: string }[]; output_text?: string } | null = null
  for await (const event of stream) {
    types.push(event.type)
    if (event.type === 'response.code_interpreter_call_code.delta') code += event.delta
    if (event.type === 'response.completed') completed = event.response
  }
  t.is(code, CODE)
  const calls = types.filter((type) => type.startsWith('response.code_interpreter_call'))
  t.deepEqual(
    [...new Set(calls)],
    [
      'response.code_interpreter_call.in_progress',
      'response.code_interpreter_call_code.delta',
      'response.code_interpreter_call_code.done',
      'response.code_interpreter_call.interpreting',
      'response.code_interpreter_call.completed',
    ],
  )
  t.deepEqual(
    completed!.output.map((item) => item.type),
    ['reasoning', 'code_interpreter_call', 'message'],
  )
  const message = completed!.output[2] as unknown as { content: { text: string }[] }
  t.is(message.content[0]!.text, 'The sum is 45.')
})

test('the notebook keeps its state between the calls of one response; without include, no outputs', async (t) => {
  const { engine, prompts } = pythonCaller('x = 41 if "x" not in globals() else x + 1\nx', 2)
  const { client } = await startGateway(t, { engine, python: python() })
  const response = await client.responses.create({ ...REQUEST, include: [] })
  t.is(response.output_text, 'The sum is 42.')
  t.is(prompts.length, 3)
  const calls = response.output.filter((item) => item.type === 'code_interpreter_call') as { outputs: unknown }[]
  t.is(calls.length, 2)
  t.true(calls.every((call) => call.outputs === null))
})

test('the gateway runs at most toolCalls calls per response; the call past it ends the response, its item incomplete', async (t) => {
  const { engine, prompts } = pythonCaller(CODE, 3)
  const { client } = await startGateway(t, { engine, python: python(), toolCalls: 1 })
  const response = await client.responses.create(REQUEST)
  t.is(prompts.length, 2)
  t.is(response.status, 'completed')
  const calls = response.output.filter((item) => item.type === 'code_interpreter_call') as { status: string }[]
  t.deepEqual(
    calls.map((call) => call.status),
    ['completed', 'incomplete'],
  )
})

test('without python the code_interpreter tool is a hosted tool, left out and said', async (t) => {
  const { engine, prompts } = pythonCaller(CODE)
  const { client } = await startGateway(t, { engine })
  const { response } = await client.responses.create(REQUEST).withResponse()
  t.regex(response.headers.get('x-harmony-not-applied') ?? '', /tools\[0\]/)
  t.notRegex(decodeTokens(prompts[0]!), /## python/)
})

test('the python sandbox: state per session, no way to the host, errors and time limits told to the model', async (t) => {
  process.env.HARMONY_TEST_SECRET = 'not for python'
  const sandbox = new PyodidePython({ timeMs: 5_000 })
  t.teardown(() => sandbox.close())
  const output = async (session: string, code: string) => {
    const result = await sandbox.run(session, code)
    t.is(result.failure, undefined, 'an error of the code is its output, not a failure')
    return result.output
  }
  t.is(await output('a', 'x = 2\nx * 21'), '42')
  t.regex(await output('b', 'x'), /NameError: name 'x' is not defined/)
  t.regex(await output('a', 'import js'), /ModuleNotFoundError/)
  t.regex(await output('a', 'from pyodide.ffi import to_js'), /ModuleNotFoundError/)
  t.regex(await output('a', 'open("/etc/hostname").read()'), /FileNotFoundError/)
  t.is(await output('a', 'import os\n[k for k in os.environ if k.startswith("HARMONY")]'), '[]', "none of the host's environment")
  const stopped = await sandbox.run('a', 'while True: pass')
  t.regex(stopped.output, /^Timed out after 5 seconds: the python session was stopped/)
  t.is(stopped.failure, stopped.output, 'a call the sandbox stopped failed')
  t.regex(await output('a', 'x'), /NameError/, 'a stopped session starts again empty')
  t.throws(() => new PyodidePython({ timeMs: 0 }), { instanceOf: RangeError, message: /timeMs/ })
  t.throws(() => new PyodidePython({ timeLimit: 5 } as never), { instanceOf: TypeError, message: /timeLimit/ })
})

const PAGES = [
  {
    url: 'https://towers.example/eiffel',
    title: 'Eiffel Tower',
    text: 'The Eiffel Tower is a wrought-iron lattice tower in Paris.\nIt is 330 metres tall, about 1,083 feet.',
  },
  {
    url: 'https://towers.example/big-ben',
    title: 'Big Ben',
    text: 'Big Ben is the nickname of the Great Bell of the clock at the Palace of Westminster.',
  },
]

/** A collection of documents in a JSON Lines file, removed after the test. */
function collection(t: { teardown(fn: () => void): void }, lines: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'harmony-browser-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'pages.jsonl')
  writeFileSync(file, lines)
  return file
}

/**
 * Searches, opens the first result, and answers citing the line it read, as gpt-oss browses; `lead`: what the
 * answer starts with; `idsPerStep`: the engine's batching.
 */
function browsing(lead = 'It is', idsPerStep = 3): ReturnType<typeof scripted> {
  return scripted((prompt) => {
    const results = [...prompt.matchAll(/<\|start\|>browser\.(\w+) to=assistant<\|channel\|>analysis<\|message\|>([\s\S]*?)<\|end\|>/g)]
    // A prompt ends with `<|start|>assistant` (after a result too): the model goes on from the channel.
    const call = (tool: string, args: object) => `<|channel|>analysis to=browser.${tool} code<|message|>${JSON.stringify(args)}<|call|>`
    if (results.length === 0)
      return `<|channel|>analysis<|message|>Let me search.<|end|><|start|>assistant${call('search', { query: 'Eiffel tower height' })}`
    const [, tool, page] = results.at(-1)!
    if (tool === 'search') {
      const first = /【(\d+)†Eiffel Tower†towers\.example】/.exec(page!)
      return call('open', { id: Number(first![1]) })
    }
    const cursor = /^\[(\d+)\] Eiffel Tower \(https:\/\/towers\.example\/eiffel\)/.exec(page!)
    const line = /L(\d+): It is 330 metres tall/.exec(page!)
    return `<|channel|>final<|message|>${lead} 330 metres tall 【${cursor![1]}†L${line![1]}】.<|return|>`
  }, idsPerStep)
}

/** What gpt-oss's browser tool puts where the model cited the Eiffel Tower's page. */
const EIFFEL_LINK = ' ([towers.example](https://towers.example/eiffel)) '

test('web_search runs on the local index inside the response: searched, opened, cited as url_citation', async (t) => {
  const { engine, prompts } = browsing()
  const browser = LocalSearch.fromFile(collection(t, PAGES.map((page) => JSON.stringify(page)).join('\n')))
  const { client } = await startGateway(t, { engine, browser })
  const response = await client.responses.create({
    model: 'gpt-oss',
    input: 'How tall is the Eiffel Tower?',
    tools: [{ type: 'web_search' }],
  })
  t.is(prompts.length, 3)
  t.regex(decodeTokens(prompts[0]!), /## browser\n\n\/\/ Tool for browsing\./)
  t.deepEqual(
    response.output.map((item) => item.type),
    ['reasoning', 'web_search_call', 'web_search_call', 'message'],
  )
  const [search, open] = response.output.slice(1, 3) as { action: unknown; status: string }[]
  t.deepEqual(search!.action, { type: 'search', query: 'Eiffel tower height' })
  t.deepEqual(open!.action, { type: 'open_page', url: PAGES[0]!.url }, 'a link followed by its number: the url of the page shown')
  t.true([search, open].every((call) => call!.status === 'completed'))
  const message = response.output[3] as { content: { text: string; annotations: unknown[] }[] }
  const { text, annotations } = message.content[0]!
  // The marker replaced as gpt-oss's browser tool replaces it, the annotation over the replacement.
  t.is(text, `It is 330 metres tall ${EIFFEL_LINK}.`)
  t.deepEqual(annotations, [
    { type: 'url_citation', start_index: 22, end_index: 22 + EIFFEL_LINK.length, url: PAGES[0]!.url, title: 'Eiffel Tower' },
  ])
  // Each prompt continues the one before: the ids the engine generated, then the tool's page.
  t.deepEqual(prompts[1]!.slice(0, prompts[0]!.length), prompts[0])
  t.deepEqual(prompts[2]!.slice(0, prompts[1]!.length), prompts[1])
})

/** What the model reads for a browser call; `failed`: whether the call must be a failure (the backend's, not the model's). */
async function shown(t: ExecutionContext, session: BrowserSession, tool: string, args: string, failed = false): Promise<string> {
  const result = await session.call(tool, args)
  t.is(result.failure !== undefined, failed, `${tool} ${args}: ${failed ? 'a failure' : 'no failure'}`)
  return result.output
}

test('web_search in a background response: the same tools, and its answer cited', async (t) => {
  const { engine } = browsing()
  const browser = LocalSearch.fromFile(collection(t, PAGES.map((page) => JSON.stringify(page)).join('\n')))
  const { client } = await startGateway(t, { engine, browser })
  const stream = await client.responses.create({
    model: 'gpt-oss',
    input: 'How tall is the Eiffel Tower?',
    tools: [{ type: 'web_search' }],
    background: true,
    stream: true,
  })
  let last: { type: string; response?: { id: string } } | undefined
  for await (const event of stream) last = event
  t.is(last?.type, 'response.completed')
  const kept = await client.responses.retrieve(last!.response!.id)
  const message = kept.output.at(-1) as { content: { annotations: { url: string }[] }[] }
  t.deepEqual(
    message.content[0]!.annotations.map((annotation) => annotation.url),
    [PAGES[0]!.url],
  )
})

test('the browser as trained: pages with cursors, numbered lines and links; find; errors told to the model', async (t) => {
  const session = new BrowserSession(new LocalSearch(PAGES))
  const results = await shown(t, session, 'browser.search', JSON.stringify({ query: 'tower' }))
  t.regex(results, /^\[0\] tower\n\*\*viewing lines \[0 - \d+\] of \d+\*\*\n\nL0: URL: \nL1: # Search Results\n/)
  t.regex(results, /L3: {3}\* 【0†Eiffel Tower†towers\.example】 /)
  const page = await shown(t, session, 'browser.open', JSON.stringify({ id: 0 }))
  t.regex(page, /^\[1\] Eiffel Tower \(https:\/\/towers\.example\/eiffel\)\n\*\*viewing lines \[0 - 1\] of 1\*\*\n\nL0: The Eiffel Tower/)
  const found = await shown(t, session, 'browser.find', JSON.stringify({ pattern: 'Metres' }))
  t.regex(found, /^\[2\] Find results for text: `metres` in `Eiffel Tower`/)
  t.regex(found, /# 【0†match at L1】\nL\d+: It is 330 metres tall/)
  t.is(session.urlAt(1)?.url, PAGES[0]!.url)
  t.is(session.urlAt(0), null, 'a search results page cites nothing')
  t.is(await shown(t, session, 'browser.open', JSON.stringify({ id: 9, cursor: 0 })), 'Invalid link id `9`.')
  t.regex(await shown(t, session, 'browser.open', JSON.stringify({ id: 'https://nowhere.example/' }), true), /not found/)
  t.regex(await shown(t, session, 'browser.find', JSON.stringify({ pattern: 'x', cursor: 7 })), /Cursor `7` is out of range/)
  t.is(await shown(t, session, 'browser.search', 'not json'), '{"error":"Invalid function arguments"}')
  t.deepEqual(await new LocalSearch(PAGES).search('"); DROP TABLE pages; --', 5), [], 'the query is words, never FTS5 syntax')
})

test('HARMONY_BROWSER=local:FILE loads the collection; a bad file or value stops the start naming it', (t) => {
  const good = collection(t, `${JSON.stringify(PAGES[0])}\n`)
  t.true(serveSettings({ HARMONY_BROWSER: `local:${good}` }).options().tools?.browser instanceof LocalSearch)
  const bad = collection(t, `${JSON.stringify(PAGES[0])}\n{"url": 1}\n`)
  t.throws(() => serveSettings({ HARMONY_BROWSER: `local:${bad}` }), { instanceOf: SettingError, message: /line 2 must be a JSON object/ })
  t.throws(() => serveSettings({ HARMONY_BROWSER: 'bing' }), {
    instanceOf: SettingError,
    message: /HARMONY_BROWSER \(--browser\) must be local:FILE/,
  })
})

test('web_search streamed: the web_search_call events as OpenAI sends them, and the citation as annotation.added', async (t) => {
  const { engine } = browsing()
  const { client } = await startGateway(t, { engine, browser: new LocalSearch(PAGES) })
  const stream = await client.responses.create({ model: 'gpt-oss', input: 'How tall?', tools: [{ type: 'web_search' }], stream: true })
  const types: string[] = []
  let annotation: unknown = null
  let completed: { output: { type: string }[] } | null = null
  for await (const event of stream) {
    types.push(event.type)
    if (event.type === 'response.output_text.annotation.added') annotation = event.annotation
    if (event.type === 'response.completed') completed = event.response
  }
  t.deepEqual(
    types.filter((type) => type.startsWith('response.web_search_call')),
    [
      'response.web_search_call.in_progress',
      'response.web_search_call.searching',
      'response.web_search_call.completed',
      'response.web_search_call.in_progress',
      'response.web_search_call.searching',
      'response.web_search_call.completed',
    ],
  )
  t.like(annotation as object, { type: 'url_citation', url: PAGES[0]!.url, title: 'Eiffel Tower' })
  const message = completed!.output.at(-1) as unknown as { content: { annotations: unknown[] }[] }
  t.deepEqual(message.content[0]!.annotations, [annotation])
})

for (const idsPerStep of [1, 3, 1000]) {
  test(`web_search answers cite as gpt-oss's browser tool does, whole and streamed ${idsPerStep} ids a step, as the openai client reads them`, async (t) => {
    // An emoji and a flag before the citation: its indexes count code points.
    const { engine } = browsing('🗼 La tour 🇫🇷 is', idsPerStep)
    const { client } = await startGateway(t, { engine, browser: new LocalSearch(PAGES) })
    const request = { model: 'gpt-oss', input: 'How tall?', tools: [{ type: 'web_search' as const }] }
    const expected = `🗼 La tour 🇫🇷 is 330 metres tall ${EIFFEL_LINK}.`

    const whole = await client.responses.create(request)
    const message = whole.output.at(-1) as { content: { text: string; annotations: { start_index: number; end_index: number }[] }[] }
    t.is(message.content[0]!.text, expected)
    t.is(whole.output_text, expected)

    const stream = await client.responses.create({ ...request, stream: true })
    const deltas: string[] = []
    const added: { start_index: number; end_index: number }[] = []
    let done = ''
    let completed: { output: { type: string }[] } | null = null
    for await (const event of stream) {
      if (event.type === 'response.output_text.delta') deltas.push(event.delta)
      if (event.type === 'response.output_text.annotation.added') {
        added.push(event.annotation as { start_index: number; end_index: number })
        t.true([...deltas.join('')].length >= (event.annotation as { end_index: number }).end_index, 'added after the text it covers')
      }
      if (event.type === 'response.output_text.done') done = event.text
      if (event.type === 'response.completed') completed = event.response
    }
    t.false(
      deltas.some((delta) => delta.includes('【')),
      'no marker in any delta',
    )
    t.is(deltas.join(''), expected, 'the deltas add up to the final text')
    t.is(done, expected)
    const streamed = completed!.output.at(-1) as unknown as typeof message
    t.deepEqual(streamed.content[0], message.content[0], 'the same text and annotations as the whole answer')
    t.deepEqual(added, message.content[0]!.annotations)
    const [annotation] = added
    t.is([...expected].slice(annotation!.start_index, annotation!.end_index).join(''), EIFFEL_LINK)
    t.not(expected.slice(annotation!.start_index, annotation!.end_index), EIFFEL_LINK, 'code points, not UTF-16 units')

    // The client's own stream helper, which adds the deltas up itself, ends with the same text.
    const helper = client.responses.stream(request)
    let snapshot = ''
    helper.on('response.output_text.delta', (event) => {
      snapshot = event.snapshot
    })
    const final = (await helper.finalResponse()).output.at(-1) as unknown as typeof message
    t.is(final.content[0]!.text, expected)
    t.is(snapshot, expected)
  })
}

test('the Python client slices each annotation out of the text with its own indexes, whole and streamed', async (t) => {
  const { engine } = browsing('🗼 La tour 🇫🇷 is', 1)
  const { port } = await startGateway(t, { engine, browser: new LocalSearch(PAGES) })
  const python = join(import.meta.dirname, '..', '..', '.venv', 'bin', 'python')
  const script = join(import.meta.dirname, '..', 'helpers', 'python_citations.py')
  const { stdout } = await run(python, [script, `http://127.0.0.1:${port}/v1`])
  const expected = { text: `🗼 La tour 🇫🇷 is 330 metres tall ${EIFFEL_LINK}.`, spans: [EIFFEL_LINK] }
  t.deepEqual(JSON.parse(stdout), { whole: expected, streamed: expected, deltas: expected.text })
})

/** Calls `calc.add` as gpt-oss calls a namespace's function, then answers with its result. */
/** Calls the `calc` server's `tool` with `args` as gpt-oss calls a namespace's function; then answers with its result. */
function mcpCaller(tool = 'add', args = '{"a":2,"b":40}'): ReturnType<typeof scripted> {
  return scripted((prompt) => {
    const result = new RegExp(
      `<\\|start\\|>calc\\.${tool} to=assistant<\\|channel\\|>commentary<\\|message\\|>([\\s\\S]*?)<\\|end\\|>`,
    ).exec(prompt)
    if (result !== null) return `<|channel|>final<|message|>The answer is ${result[1]}.<|return|>`
    return `<|channel|>commentary to=calc.${tool} <|constrain|>json<|message|>${args}<|call|>`
  })
}

test('a remote MCP server: listed, its tool called inside the response with the request headers, the result used', async (t) => {
  const mcp = await startMcpServer(t)
  const { engine, prompts } = mcpCaller()
  const { client } = await startGateway(t, { engine, mcpServers: ['http://127.0.0.1:'] })
  const tool = {
    type: 'mcp' as const,
    server_label: 'calc',
    server_url: mcp.url,
    allowed_tools: ['add'],
    require_approval: 'never' as const,
    headers: { Authorization: 'Bearer sk-test-secret' },
  }
  const response = await client.responses.create({ model: 'gpt-oss', input: 'What is 2 + 40?', tools: [tool] })
  t.deepEqual(
    response.output.map((item) => item.type),
    ['mcp_list_tools', 'mcp_call', 'message'],
  )
  const [list, call] = response.output as unknown as [{ tools: { name: string }[]; server_label: string }, Record<string, unknown>]
  t.is(list.server_label, 'calc')
  t.deepEqual(
    list.tools.map((entry) => entry.name),
    ['add'],
    'allowed_tools',
  )
  t.like(call, { server_label: 'calc', name: 'add', arguments: '{"a":2,"b":40}', output: '42', status: 'completed' })
  t.is(response.output_text, 'The answer is 42.')
  t.deepEqual(mcp.calls, [{ name: 'add', args: { a: 2, b: 40 }, authorization: 'Bearer sk-test-secret' }])
  // Declared as a namespace of the prompt; the second prompt continues the first exactly.
  t.regex(decodeTokens(prompts[0]!), /## calc\n\nnamespace calc \{/)
  t.deepEqual(prompts[1]!.slice(0, prompts[0]!.length), prompts[0])
  // The credential is neither echoed nor kept.
  const echoed = response.tools[0] as unknown as Record<string, unknown>
  t.is(echoed.headers, undefined)
  const kept = await client.responses.retrieve(response.id)
  t.false(JSON.stringify(kept).includes('sk-test-secret'))
})

test('a tool that fails: the model reads why, the item is failed with its error, and a tool-failed diagnostic is said', async (t) => {
  const mcp = await startMcpServer(t)
  const { engine, prompts } = mcpCaller('divide', '{"a":1,"b":0}')
  const diagnostics: { code: string; message: string }[] = []
  const { client } = await startGateway(t, {
    engine,
    mcpServers: ['http://127.0.0.1:'],
    onDiagnostic: (diagnostic: { code: string; message: string }) => diagnostics.push(diagnostic),
  })
  const tools = [{ type: 'mcp' as const, server_label: 'calc', server_url: mcp.url, require_approval: 'never' as const }]
  const request = { model: 'gpt-oss', input: 'What is 1 / 0?', tools }
  const stream = await client.responses.create({ ...request, stream: true })
  const events: { type: string }[] = []
  for await (const event of stream) events.push(event)
  const types = events.map((event) => event.type)
  t.true(types.indexOf('response.mcp_call.failed') > types.indexOf('response.mcp_call_arguments.done'))
  t.false(types.includes('response.mcp_call.completed'))
  const response = (events.at(-1) as unknown as { response: { output: Record<string, unknown>[]; output_text?: string } }).response
  t.like(response.output[1], { type: 'mcp_call', name: 'divide', status: 'failed', output: null, error: 'Error: division by zero' })
  // The model read the error as the call's result, and answered; the response itself completed.
  t.regex(
    decodeTokens(prompts[1]!.slice(prompts[0]!.length)),
    /<\|start\|>calc\.divide to=assistant<\|channel\|>commentary<\|message\|>Error: division by zero<\|end\|>/,
  )
  t.is(types.at(-1), 'response.completed')
  t.deepEqual(
    diagnostics.filter(({ code }) => code === 'tool-failed').map(({ code, message }) => ({ code, message })),
    [{ code: 'tool-failed', message: 'calc.divide: Error: division by zero' }],
  )
  // The whole response says the same.
  const whole = await client.responses.create(request)
  t.like(whole.output[1] as unknown as object, { type: 'mcp_call', status: 'failed', output: null, error: 'Error: division by zero' })
})

test('two calls, the first failing: each item says how its own call ended, streamed and whole', async (t) => {
  const mcp = await startMcpServer(t)
  const { engine } = scripted((prompt) => {
    const call = (tool: string, args: string) => `<|channel|>commentary to=calc.${tool} <|constrain|>json<|message|>${args}<|call|>`
    if (!prompt.includes('<|start|>calc.divide to=assistant')) return call('divide', '{"a":1,"b":0}')
    if (!prompt.includes('<|start|>calc.add to=assistant')) return call('add', '{"a":2,"b":40}')
    return '<|channel|>final<|message|>Done.<|return|>'
  })
  const { client } = await startGateway(t, { engine, mcpServers: ['http://127.0.0.1:'] })
  const request = {
    model: 'gpt-oss',
    input: 'Divide, then add.',
    tools: [{ type: 'mcp' as const, server_label: 'calc', server_url: mcp.url, require_approval: 'never' as const }],
  }
  const calls = (output: readonly { type: string }[]) =>
    output
      .filter((item) => item.type === 'mcp_call')
      .map((item) => {
        const { name, status, output: text, error } = item as unknown as Record<string, unknown>
        return { name, status, output: text, error }
      })
  const expected = [
    { name: 'divide', status: 'failed', output: null, error: 'Error: division by zero' },
    { name: 'add', status: 'completed', output: '42', error: null },
  ]
  t.deepEqual(calls((await client.responses.create(request)).output), expected, 'whole')
  const stream = await client.responses.create({ ...request, stream: true })
  let last: { response?: { output: { type: string }[] } } = {}
  for await (const event of stream) last = event as typeof last
  t.deepEqual(calls(last.response!.output), expected, 'streamed')
})

test('an MCP tool that requires approval (the default) is not run: the response ends with an mcp_approval_request', async (t) => {
  const mcp = await startMcpServer(t)
  const { engine } = mcpCaller()
  const { client } = await startGateway(t, { engine, mcpServers: ['http://127.0.0.1:'] })
  const stream = await client.responses.create({
    model: 'gpt-oss',
    input: 'What is 2 + 40?',
    tools: [{ type: 'mcp', server_label: 'calc', server_url: mcp.url }],
    stream: true,
  })
  const types: string[] = []
  let completed: { output: Record<string, unknown>[] } | null = null
  for await (const event of stream) {
    types.push(event.type)
    if (event.type === 'response.completed') completed = event.response as unknown as { output: Record<string, unknown>[] }
  }
  t.deepEqual(
    completed!.output.map((item) => item.type),
    ['mcp_list_tools', 'mcp_approval_request'],
  )
  t.like(completed!.output[1]!, { server_label: 'calc', name: 'add', arguments: '{"a":2,"b":40}' })
  t.deepEqual(mcp.calls, [])
  t.true(types.includes('response.mcp_list_tools.completed'))
})

test('MCP servers: only the prefixes the gateway allows; a server that cannot be listed is a 424; without prefixes, a hosted tool', async (t) => {
  const mcp = await startMcpServer(t)
  const { engine, prompts } = mcpCaller()
  const tools = (url: string) => [{ type: 'mcp' as const, server_label: 'calc', server_url: url, require_approval: 'never' as const }]
  const { client } = await startGateway(t, { engine, mcpServers: ['http://127.0.0.1:'] })
  const refused = await t.throwsAsync(client.responses.create({ model: 'gpt-oss', input: 'x', tools: tools('http://localhost:1/mcp') }))
  t.like(refused, { status: 400, param: 'tools[0].server_url' })
  const unreachable = await t.throwsAsync(client.responses.create({ model: 'gpt-oss', input: 'x', tools: tools('http://127.0.0.1:1/mcp') }))
  t.like(unreachable, { status: 424, param: 'tools[0].server_url' })
  const { client: plain } = await startGateway(t, { engine })
  const { response } = await plain.responses.create({ model: 'gpt-oss', input: 'x', tools: tools(mcp.url) }).withResponse()
  t.regex(response.headers.get('x-harmony-not-applied') ?? '', /tools\[0\]/)
  t.notRegex(decodeTokens(prompts.at(-1)!), /namespace calc/)
  t.deepEqual(mcp.listed, [], 'no request reached the MCP server')
  t.throws(() => serveSettings({ HARMONY_MCP_SERVERS: 'http://127.0.0.1' }), { instanceOf: SettingError, message: /HARMONY_MCP_SERVERS/ })
})

test('an approval answered: the approved call runs, its result follows the kept ids, and the model goes on', async (t) => {
  const mcp = await startMcpServer(t)
  const { engine, prompts } = mcpCaller()
  const { client } = await startGateway(t, { engine, mcpServers: ['http://127.0.0.1:'] })
  const tools = [{ type: 'mcp' as const, server_label: 'calc', server_url: mcp.url, headers: { Authorization: 'Bearer k' } }]
  const asked = await client.responses.create({ model: 'gpt-oss', input: 'What is 2 + 40?', tools })
  const request = asked.output.find((item) => item.type === 'mcp_approval_request')!
  t.deepEqual(mcp.calls, [])
  const approved = await client.responses.create({
    model: 'gpt-oss',
    previous_response_id: asked.id,
    input: [{ type: 'mcp_approval_response', approval_request_id: request.id, approve: true }],
    tools,
  })
  t.is(approved.output_text, 'The answer is 42.')
  t.deepEqual(mcp.calls, [{ name: 'add', args: { a: 2, b: 40 }, authorization: 'Bearer k' }])
  // The approved call leads the new response, as OpenAI shows it.
  t.deepEqual(
    approved.output.map((item) => item.type),
    ['mcp_list_tools', 'mcp_call', 'message'],
  )
  t.like(approved.output[1] as unknown as object, { name: 'add', output: '42', status: 'completed', approval_request_id: request.id })
  // The second prompt is the first, the ids generated (up to the call), then the result: exact.
  const [first, second] = prompts.slice(-2) as [number[], number[]]
  t.deepEqual(second.slice(0, first.length), first)
  t.regex(
    decodeTokens(second.slice(first.length)),
    /<\|call\|><\|start\|>calc\.add to=assistant<\|channel\|>commentary<\|message\|>42<\|end\|><\|start\|>assistant$/,
  )

  // Declined, without previous_response_id (the request item sent back): the model is told, nothing runs.
  const declined = await client.responses.create({
    model: 'gpt-oss',
    input: [
      { role: 'user', content: 'What is 2 + 40?' },
      request as never,
      { type: 'mcp_approval_response', approval_request_id: request.id, approve: false },
    ],
    tools,
  })
  t.is(declined.output_text, 'The answer is The user did not approve this call..')
  t.is(mcp.calls.length, 1)
  const unknown = await t.throwsAsync(
    client.responses.create({
      model: 'gpt-oss',
      input: [{ type: 'mcp_approval_response', approval_request_id: 'mcpr_x', approve: true }],
      tools,
    }),
  )
  t.like(unknown, { status: 400, param: 'input[0].approval_request_id' })
})

/** A web for the HTTP backend on 127.0.0.1: a search API and pages (one redirecting, one huge, one not text). */
async function startWeb(t: { teardown(fn: () => Promise<void>): void }): Promise<{ base: string; searched: unknown[] }> {
  const searched: unknown[] = []
  const server = createServer((request, response) => {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    if (request.url === '/search') {
      let body = ''
      request
        .on('data', (chunk) => (body += chunk))
        .on('end', () => {
          searched.push({ body: JSON.parse(body), authorization: request.headers.authorization })
          response.setHeader('content-type', 'application/json')
          response.end(JSON.stringify({ results: [{ url: `${base}/eiffel`, title: 'Eiffel Tower', snippet: 'A tower in Paris.' }] }))
        })
      return
    }
    const pages: Record<string, () => void> = {
      '/eiffel': () => {
        response.setHeader('content-type', 'text/html; charset=utf-8')
        response.end(
          '<html><head><title>Eiffel Tower</title><script>alert(1)</script></head><body><p>It is 330 metres tall.</p>' +
            '<p>See <a href="/height">its height</a> and <a href="https://elsewhere.example/paris">Paris</a>.</p></body></html>',
        )
      },
      '/height': () => {
        response.setHeader('content-type', 'text/plain')
        response.end('330 metres, 1,083 feet.')
      },
      '/loop': () => {
        response.writeHead(302, { location: '/loop' })
        response.end()
      },
      '/huge': () => {
        response.setHeader('content-type', 'text/plain')
        response.end('x'.repeat(100_000))
      },
      '/image': () => {
        response.setHeader('content-type', 'image/png')
        response.end('png')
      },
    }
    const page = pages[request.url ?? '']
    if (page === undefined) {
      response.statusCode = 404
      response.end()
    } else page()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, searched }
}

test('the HTTP backend: a search API, pages fetched and shown with their links, which open follows', async (t) => {
  const web = await startWeb(t)
  const backend = new HttpSearch({
    searchUrl: `${web.base}/search`,
    headers: { authorization: 'Bearer s' },
    allowPrivateAddresses: true,
    maxPageBytes: 1000,
  })
  const session = new BrowserSession(backend)
  t.regex(
    await shown(t, session, 'browser.search', JSON.stringify({ query: 'eiffel' })),
    /【0†Eiffel Tower†127\.0\.0\.1:\d+】 A tower in Paris\./,
  )
  t.deepEqual(web.searched, [{ body: { query: 'eiffel', topn: 20 }, authorization: 'Bearer s' }])
  const page = await shown(t, session, 'browser.open', JSON.stringify({ id: 0 }))
  t.regex(page, /^\[1\] Eiffel Tower \(http:\/\/127\.0\.0\.1:\d+\/eiffel\)/)
  t.regex(page, /It is 330 metres tall\./)
  t.regex(page, /See 【0†its height】 and 【1†Paris†elsewhere\.example】\./)
  t.notRegex(page, /alert/)
  t.regex(
    await shown(t, session, 'browser.open', JSON.stringify({ id: 0 })),
    /^\[2\] 127\.0\.0\.1:\d+ .*\n[\s\S]*L0: 330 metres, 1,083 feet\./,
  )
  t.regex(await shown(t, session, 'browser.open', JSON.stringify({ id: `${web.base}/loop` }), true), /more than 3 redirects/)
  t.regex(await shown(t, session, 'browser.open', JSON.stringify({ id: `${web.base}/missing` }), true), /not found/)
  t.regex(await shown(t, session, 'browser.open', JSON.stringify({ id: `${web.base}/image` }), true), /not a page of text \(image\/png\)/)
  t.is((await backend.open(`${web.base}/huge`))!.text.length, 1000, 'read up to maxPageBytes')
  t.regex(await shown(t, session, 'browser.open', JSON.stringify({ id: 'file:///etc/passwd' }), true), /file: addresses are not opened/)
})

test('the HTTP backend opens nothing on the gateway own networks unless allowed, by name or by address', async (t) => {
  const web = await startWeb(t)
  const backend = new HttpSearch({ searchUrl: `${web.base}/search` })
  const port = new URL(web.base).port
  await t.throwsAsync(backend.open(`http://127.0.0.1:${port}/eiffel`), { message: /private network/ })
  await t.throwsAsync(backend.open(`http://localhost:${port}/eiffel`), { message: /private network/ })
  await t.throwsAsync(backend.open(`http://[::1]:${port}/eiffel`), { message: /private network/ })
  await t.throwsAsync(backend.open('http://169.254.169.254/latest/meta-data/'), { message: /private network/ })
  t.true(serveSettings({ HARMONY_BROWSER: `search:${web.base}/search` }).options().tools?.browser instanceof HttpSearch)
})
