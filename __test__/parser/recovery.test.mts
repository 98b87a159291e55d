/**
 * Lenient recovery from the malformed model output catalogued in docs/SEMANTICS.md "Malformed model output (A–H)".
 * Each case states what the model emitted and what the parser gives; the table of docs/SEMANTICS.md "What the
 * model emitted → what you get" lists the same cases. For every case, on both implementations:
 * - nothing is thrown, at every batch size from 1 to the whole stream, and the outcome (messages and
 *   diagnostics) does not depend on the batch size;
 * - the messages and diagnostic codes are the documented ones, and text not placed in a message is in a
 *   diagnostic;
 * - a well-formed message after the malformed part parses exactly as it would in a clean stream.
 */
import test from 'ava'

import type { HarmonyDiagnostic, HarmonyMessage, HarmonyStreamParserOptions } from 'harmony-stream'

import { batches, harmony, IMPLEMENTATIONS, replay } from '../helpers/harmony.mjs'

type Expected = Partial<HarmonyMessage>

interface Case {
  /** Catalogue section and source. */
  source: string
  emitted: string
  options?: HarmonyStreamParserOptions
  messages: Expected[]
  diagnostics: string[]
  /** Text that must appear in some diagnostic's `text` (what was not placed in a message). */
  kept?: string[]
}

const CLEAN = '<|start|>assistant<|channel|>final<|message|>All good.<|return|>'

export const CASES: Case[] = [
  {
    source: 'A. leftover header word (openai/harmony #38)',
    emitted: '<|channel|>commentary ––commentary to=functions.get_weather json<|message|>{"city":"Rome"}<|call|>',
    messages: [
      { channel: 'commentary', recipient: 'functions.get_weather', contentType: 'json', content: '{"city":"Rome"}', terminator: 'call' },
    ],
    diagnostics: ['extra-header-words'],
    kept: ['––commentary'],
  },
  {
    source: 'A. words after <|constrain|> (openai/harmony PR #114)',
    emitted: '<|channel|>commentary <|constrain|>response to=functions.bash json<|message|>{"cmd":"ls"}<|call|>',
    messages: [{ channel: 'commentary', recipient: 'functions.bash', contentType: 'json', content: '{"cmd":"ls"}', terminator: 'call' }],
    diagnostics: ['extra-header-words'],
    kept: ['<|constrain|>response'],
  },
  {
    source: 'A. duplicated recipient (SGLang PR #35299)',
    emitted: '<|channel|>commentary to=functions.get_weather to=functions.get_weather<|message|>{}<|call|>',
    messages: [{ channel: 'commentary', recipient: 'functions.get_weather', content: '{}', terminator: 'call' }],
    diagnostics: ['duplicate-recipient'],
  },
  {
    source: 'A. refusal without <|message|> (openai/harmony PR #82)',
    emitted: 'I must refuse<|end|><|start|>assistant<|channel|>analysis<|message|>We must refuse<|end|>',
    messages: [
      { channel: 'analysis', content: 'I must refuse', terminator: 'end' },
      { channel: 'analysis', content: 'We must refuse', terminator: 'end' },
    ],
    diagnostics: ['headerless-reasoning'],
  },
  {
    source: 'A. channel then text without <|message|> (openai/harmony PR #82)',
    emitted: '<|channel|>commentary Hello<|end|>',
    messages: [{ channel: 'commentary', content: 'Hello', terminator: 'end' }],
    diagnostics: ['header-without-message'],
  },
  {
    source: 'A. a later final without <|message|> (ai-dynamo PR #236: the reference drops it)',
    emitted: '<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final The answer is 4.<|return|>',
    messages: [
      { channel: 'analysis', content: 'Think.', terminator: 'end' },
      { channel: 'final', content: 'The answer is 4.', terminator: 'return' },
    ],
    diagnostics: ['header-without-message'],
  },
  {
    source: 'B. channel word as the role (openai/harmony PR #114: "Unknown role: final")',
    emitted: '<|channel|>analysis<|message|>Think.<|end|><|start|>final<|message|>4<|return|>',
    messages: [
      { channel: 'analysis', content: 'Think.', terminator: 'end' },
      { role: 'assistant', channel: 'final', content: '4', terminator: 'return' },
    ],
    diagnostics: ['missing-channel-marker'],
  },
  {
    source: 'B. two <|channel|> markers (PR #114: "Unknown role: assistant<|channel|>commentary")',
    emitted: '<|start|>assistant<|channel|>commentary<|channel|>commentary<|message|>Checking.<|end|>',
    options: { role: null },
    messages: [{ role: 'assistant', channel: 'commentary', content: 'Checking.', terminator: 'end' }],
    diagnostics: ['repeated-channel'],
  },
  {
    source: 'B. a tool name as an extra channel (PR #114: "assistant<|channel|>bash<|channel|>commentary")',
    emitted: '<|start|>assistant<|channel|>bash<|channel|>commentary to=functions.bash json<|message|>{"cmd":"pwd"}<|call|>',
    options: { role: null },
    messages: [
      {
        role: 'assistant',
        channel: 'commentary',
        recipient: 'functions.bash',
        contentType: 'json',
        content: '{"cmd":"pwd"}',
        terminator: 'call',
      },
    ],
    diagnostics: ['repeated-channel'],
    kept: ['bash'],
  },
  {
    source: 'B. doubled <|start|> (vLLM PR #43408, exo #1126)',
    emitted: '<|channel|>analysis<|message|>Think.<|end|><|start|><|start|>assistant<|channel|>final<|message|>Done.<|return|>',
    messages: [
      { channel: 'analysis', content: 'Think.', terminator: 'end' },
      { channel: 'final', content: 'Done.', terminator: 'return' },
    ],
    diagnostics: ['repeated-start'],
  },
  {
    source: 'B. role glued to a channel or role (tenstorrent/vllm #386: "assistantassistant")',
    emitted:
      '<|channel|>analysis<|message|>Think.<|end|><|start|>assistantfinal<|message|>Done.<|end|><|start|>assistantassistant<|channel|>final<|message|>Again.<|return|>',
    messages: [
      { channel: 'analysis', content: 'Think.', terminator: 'end' },
      { role: 'assistant', channel: 'final', content: 'Done.', terminator: 'end' },
      { role: 'assistant', channel: 'final', content: 'Again.', terminator: 'return' },
    ],
    diagnostics: ['glued-role', 'glued-role'],
  },
  {
    source: 'B. unknown role word (tiles #145: "Unknown role: bash")',
    emitted: '<|start|>bash<|message|>ls -la<|end|>',
    options: { role: null },
    messages: [{ role: 'bash', content: 'ls -la', terminator: 'end' }],
    diagnostics: ['unknown-role'],
  },
  {
    source: 'B. empty channel (vLLM PR #43408)',
    emitted: '<|channel|><|message|>Hello<|end|>',
    messages: [{ channel: undefined, content: 'Hello', terminator: 'end' }],
    diagnostics: ['empty-channel'],
  },
  {
    source: 'C. "comment"+"ary" after <|call|> (vLLM #22519, gpt-oss-20b)',
    emitted: '<|channel|>commentary to=functions.f json<|message|>{}<|call|>commentary',
    messages: [{ channel: 'commentary', recipient: 'functions.f', contentType: 'json', content: '{}', terminator: 'call' }],
    diagnostics: ['stray-tokens'],
    kept: ['commentary'],
  },
  {
    source: 'C. <|return|> after <|end|> (vLLM #50690)',
    emitted: '<|channel|>final<|message|>Answer<|end|><|return|>',
    messages: [{ channel: 'final', content: 'Answer', terminator: 'end' }],
    diagnostics: ['stray-tokens'],
    kept: ['<|return|>'],
  },
  {
    source: 'C. consecutive stop tokens, stray <|constrain|> and <|message|> (vLLM #46464, PR #47350)',
    emitted: '<|channel|>final<|message|>Answer<|return|><|end|><|call|><|constrain|><|message|>',
    messages: [{ channel: 'final', content: 'Answer', terminator: 'return' }],
    diagnostics: ['stray-tokens'],
    kept: ['<|end|><|call|><|constrain|><|message|>'],
  },
  {
    source: 'C. free text between messages (vLLM PR #43408, #35906): after <|end|>, an answer without its header',
    emitted: '<|channel|>analysis<|message|>Think.<|end|> and then some.<|start|>assistant<|channel|>final<|message|>Done.<|return|>',
    messages: [
      { channel: 'analysis', content: 'Think.', terminator: 'end' },
      { role: 'assistant', channel: 'final', content: 'and then some.' },
      { channel: 'final', content: 'Done.', terminator: 'return' },
    ],
    diagnostics: ['stranded-text', 'missing-end'],
    // The text held when it was found to be an answer, its leading space with it.
    kept: [' and'],
  },
  {
    source: 'C. the answer written after <|end|> without its header (SGLang #31019)',
    emitted: '<|channel|>analysis<|message|>reasoning text<|end|>{"country":"France","capital":"Paris"}',
    messages: [
      { channel: 'analysis', content: 'reasoning text', terminator: 'end' },
      { role: 'assistant', channel: 'final', content: '{"country":"France","capital":"Paris"}' },
    ],
    diagnostics: ['stranded-text'],
  },
  {
    source: 'C. white space after <|end|> is no answer',
    emitted: '<|channel|>analysis<|message|>Think.<|end|>\n\n<|start|>assistant<|channel|>final<|message|>Done.<|return|>',
    messages: [
      { channel: 'analysis', content: 'Think.', terminator: 'end' },
      { channel: 'final', content: 'Done.', terminator: 'return' },
    ],
    diagnostics: ['stray-tokens'],
    kept: ['\n\n'],
  },
  {
    source: 'C. <|start|> missing between messages (vLLM PR #35901)',
    emitted: '<|channel|>analysis<|message|>Think.<|end|><|channel|>final<|message|>Done.<|return|>',
    messages: [
      { channel: 'analysis', content: 'Think.', terminator: 'end' },
      { role: 'assistant', channel: 'final', content: 'Done.', terminator: 'return' },
    ],
    diagnostics: ['missing-start'],
  },
  {
    source: 'D. recipient before the channel, as the reference renders history (llama.cpp PR #15181)',
    emitted: '<|start|>assistant to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"city":"Lima"}<|call|>',
    options: { role: null },
    messages: [
      {
        role: 'assistant',
        channel: 'commentary',
        recipient: 'functions.get_weather',
        contentType: 'json',
        content: '{"city":"Lima"}',
        terminator: 'call',
      },
    ],
    diagnostics: [],
  },
  {
    source: 'D. channel leaked into the recipient (vLLM PR #31677, #35901: "bash<|channel|>commentary")',
    emitted: '<|channel|>commentary to=functions.bash<|channel|>commentary<|message|>{"cmd":"ls"}<|call|>',
    messages: [{ channel: 'commentary', recipient: 'functions.bash', content: '{"cmd":"ls"}', terminator: 'call' }],
    diagnostics: ['repeated-channel'],
  },
  {
    source: 'D. <|constrain|> glued to the recipient (old harmony: "foo<|constrain|>json")',
    emitted: '<|channel|>commentary to=functions.foo<|constrain|>json<|message|>{}<|call|>',
    messages: [{ channel: 'commentary', recipient: 'functions.foo', contentType: 'json', content: '{}', terminator: 'call' }],
    diagnostics: [],
  },
  {
    source: 'D. a lone <|constrain|>json after final (vLLM #45570, openai/harmony PR #144)',
    emitted: '<|channel|>final <|constrain|>json<|message|>{"issues":[]}<|return|>',
    messages: [{ channel: 'final', recipient: undefined, contentType: 'json', content: '{"issues":[]}', terminator: 'return' }],
    diagnostics: [],
  },
  {
    source: 'D. content type glued to the tool name, with toolNames (llama.cpp PR #15158)',
    emitted: '<|channel|>commentary to=functions.shelljson<|message|>{"cmd":["ls"]}<|call|>',
    options: { toolNames: ['functions.shell'] },
    messages: [{ channel: 'commentary', recipient: 'functions.shell', contentType: 'json', content: '{"cmd":["ls"]}', terminator: 'call' }],
    diagnostics: ['glued-content-type'],
  },
  {
    source: 'D. a declared tool whose name holds a space (LM Studio bug tracker #876)',
    emitted: '<|channel|>commentary to=functions.Web Search <|constrain|>json<|message|>{ "query": "North XL", "pageSize": 10 }<|call|>',
    options: { toolNames: ['functions.Web Search'] },
    messages: [
      {
        channel: 'commentary',
        recipient: 'functions.Web Search',
        contentType: 'json',
        content: '{ "query": "North XL", "pageSize": 10 }',
        terminator: 'call',
      },
    ],
    diagnostics: ['spaced-recipient'],
  },
  {
    source: 'D. the same name written with two spaces, and a longer declared name that does not match',
    emitted: '<|channel|>commentary to=functions.Web  Search json<|message|>{}<|call|>',
    options: { toolNames: ['functions.Web Search Pro', 'functions.Web Search'] },
    messages: [{ channel: 'commentary', recipient: 'functions.Web Search', contentType: 'json', content: '{}', terminator: 'call' }],
    diagnostics: ['spaced-recipient'],
  },
  {
    source: 'D. a declared tool named without its namespace (Roo Code #6739 over LM Studio)',
    emitted: '<|channel|>commentary to=read_file <|constrain|>json<|message|>{"path":"a.md"}<|call|>',
    options: { toolNames: ['functions.read_file'] },
    messages: [
      { channel: 'commentary', recipient: 'functions.read_file', contentType: 'json', content: '{"path":"a.md"}', terminator: 'call' },
    ],
    diagnostics: ['bare-recipient'],
  },
  {
    source: 'D. a bare recipient that is no declared tool stays as written',
    emitted: '<|channel|>commentary to=read_file json<|message|>{}<|call|>',
    options: { toolNames: ['functions.write_file'] },
    messages: [{ channel: 'commentary', recipient: 'read_file', contentType: 'json', content: '{}', terminator: 'call' }],
    diagnostics: [],
  },
  {
    source: 'D. the same without toolNames: nothing to split on',
    emitted: '<|channel|>commentary to=functions.shelljson<|message|>{"cmd":["ls"]}<|call|>',
    messages: [{ channel: 'commentary', recipient: 'functions.shelljson', content: '{"cmd":["ls"]}', terminator: 'call' }],
    diagnostics: [],
  },
  {
    source: 'D. a tool call on analysis with content type code (vllm-mlx #562)',
    emitted: '<|channel|>analysis to=functions.ffgrep code<|message|>{"path":""}<|call|>',
    messages: [{ channel: 'analysis', recipient: 'functions.ffgrep', contentType: 'code', content: '{"path":""}', terminator: 'call' }],
    diagnostics: [],
  },
  {
    source: 'D. a tool call closed by <|return|> (SGLang PR #10576)',
    emitted: '<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a":1}<|return|>',
    messages: [{ channel: 'commentary', recipient: 'functions.f', contentType: 'json', content: '{"a":1}', terminator: 'return' }],
    diagnostics: [],
  },
  {
    source: 'D. content type spellings: " json", "<|constrain|> json", none',
    emitted:
      '<|channel|>commentary to=functions.a json<|message|>{}<|call|><|start|>assistant<|channel|>commentary to=functions.b <|constrain|> json<|message|>{}<|call|>' +
      '<|start|>assistant<|channel|>commentary to=functions.c<|message|>{}<|call|>',
    messages: [
      { recipient: 'functions.a', contentType: 'json', terminator: 'call' },
      { recipient: 'functions.b', contentType: 'json', terminator: 'call' },
      { recipient: 'functions.c', contentType: undefined, terminator: 'call' },
    ],
    diagnostics: ['spaced-constrain'],
  },
  {
    source: 'F. JSON on the final channel stays final (vLLM #23694)',
    emitted: '<|channel|>final<|message|>{"issues":[]}<|return|>',
    messages: [{ channel: 'final', content: '{"issues":[]}', terminator: 'return' }],
    diagnostics: [],
  },
  {
    source: 'G. analysis closed by <|call|> without a recipient (llama.cpp #15789, suspected)',
    emitted: '<|channel|>analysis<|message|>I will answer now.<|call|>',
    messages: [{ channel: 'analysis', recipient: undefined, content: 'I will answer now.', terminator: 'call' }],
    diagnostics: [],
  },
  {
    source: 'H. a tool body that is not JSON (Ollama: "invalid character \'l\'") is passed through',
    emitted: '<|channel|>commentary to=functions.shell <|constrain|>json<|message|>ls -R\n<|call|>',
    messages: [{ channel: 'commentary', recipient: 'functions.shell', contentType: 'json', content: 'ls -R\n', terminator: 'call' }],
    diagnostics: [],
  },
  {
    source: 'H. a truncated tool body at the end of the stream (LM Studio #942)',
    emitted: '<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"city": "Par',
    messages: [{ channel: 'commentary', recipient: 'functions.f', contentType: 'json', content: '{"city": "Par', terminator: null }],
    diagnostics: [],
  },
  {
    source: 'H. a message cut off without a stop token, then the next message (vLLM PR #35906)',
    emitted: '<|channel|>analysis<|message|>Let me think<|start|>assistant<|channel|>commentary to=functions.f json<|message|>{}<|call|>',
    messages: [
      { channel: 'analysis', content: 'Let me think', terminator: null },
      { channel: 'commentary', recipient: 'functions.f', content: '{}', terminator: 'call' },
    ],
    diagnostics: ['missing-end'],
  },
  {
    source: 'H. the same with <|channel|> and no <|start|>',
    emitted: '<|channel|>analysis<|message|>Let me think<|channel|>final<|message|>42<|return|>',
    messages: [
      { channel: 'analysis', content: 'Let me think', terminator: null },
      { channel: 'final', content: '42', terminator: 'return' },
    ],
    diagnostics: ['missing-end', 'missing-start'],
  },
]

function pick(message: HarmonyMessage, expected: Expected): Partial<HarmonyMessage> {
  return Object.fromEntries(Object.keys(expected).map((key) => [key, message[key as keyof HarmonyMessage]]))
}

function outcome(result: ReturnType<typeof replay>): { messages: HarmonyMessage[]; diagnostics: HarmonyDiagnostic[] } {
  return { messages: result.messages, diagnostics: result.batches.flatMap((b) => b.diagnostics) }
}

for (const implementation of IMPLEMENTATIONS) {
  for (const c of CASES) {
    test(`${implementation}: ${c.source}`, (t) => {
      const options = { ...c.options, implementation }
      const tokens = harmony(c.emitted)
      const whole = outcome(replay([tokens], options))
      t.deepEqual(
        whole.messages.map((m, i) => pick(m, c.messages[i] ?? {})),
        c.messages,
      )
      t.is(whole.messages.length, c.messages.length)
      t.deepEqual(
        whole.diagnostics.map((d) => d.code),
        c.diagnostics,
      )
      for (const kept of c.kept ?? []) {
        t.true(
          whole.diagnostics.some((d) => d.text?.includes(kept)),
          `"${kept}" is in a diagnostic`,
        )
      }
      for (let size = 1; size < tokens.length; size++) {
        t.deepEqual(outcome(replay(batches(tokens, size), options)), whole, `batch size ${size}`)
      }
      // A well-formed message after the malformed part parses as it does in a clean stream.
      const clean = replay([harmony(CLEAN)], { implementation, role: null }).messages
      const after = replay([harmony(c.emitted + CLEAN)], options).messages
      t.deepEqual(after.slice(-1), clean)
    })
  }
}
