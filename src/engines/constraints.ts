/**
 * Structured outputs enforced by the engine: the final answer's JSON (`GenerateRequest.responseFormat`) and
 * the arguments of strict function tools (`GenerateRequest.argumentSchemas`; `callArguments` where the prompt
 * ends with the call's header, as a required call's second step does: then from the first token, with no
 * trigger), with the grammar each engine's constrained decoding takes, laid out as gpt-oss writes a
 * completion so that nothing else is constrained: analysis and preambles stay free, and so does everything up
 * to a constrained message's header.
 *
 * - The final answer starts at `<|channel|>final`; its header is `<|channel|>final<|message|>` or
 *   `<|channel|>final <|constrain|>json<|message|>`; then comes the JSON, then `<|return|>`.
 * - A tool call starts at ` to=functions.NAME` (after `<|channel|>commentary`, or first in the header after
 *   `<|start|>assistant`); the rest of its header is free up to `<|message|>`; then come the arguments (JSON
 *   the tool's schema accepts for a strict tool, anything for another offered tool), then `<|call|>`.
 *
 * Two forms, one layout:
 * - xgrammar's structural tag (vLLM, SGLang, TensorRT-LLM all compile it with xgrammar): a `triggered_tags`
 *   format on the triggers `<|channel|>final` and ` to=functions.`, one tag per header form and tool,
 *   `stop_after_first` so nothing follows the constrained message. Followed: xgrammar
 *   docs/tutorials/structural_tag.md (the `format` form; vLLM's own gpt-oss tags in
 *   vllm/reasoning/gptoss_reasoning_parser.py begin a final answer the same way). Harmony's special tokens match by
 *   their text there: the engines build xgrammar's vocabulary from the Hugging Face tokenizer, which gives
 *   them their names as text. Whether `<|return|>` and `<|call|>` are stop tokens to xgrammar depends on how
 *   the engine built that vocabulary, so a tag takes either: its JSON, then the end token's text or nothing.
 * - llama.cpp: a lazy GBNF grammar (`grammar`, `grammar_lazy`, `grammar_triggers`) that waits for the same
 *   words and is then fed the text from the word on (src/llama-grammar.cpp llama_grammar_accept_impl,
 *   common/sampling.cpp: a word trigger is matched as an escaped pattern), so its root starts with the word.
 *   `<|return|>` and `<|call|>` are end-of-generation tokens, which llama.cpp allows only where the grammar
 *   may end: right after the JSON. The JSON rules come from json-grammar.ts.
 *
 * A limit of triggers on text: free text that happens to contain a trigger (an answer without a response format
 * that writes ` to=functions.` in its prose, with strict tools offered) is then held to a call's layout.
 */
import type { OutputSchema } from '../render/developer'
import type { ArgumentSchema } from '../render/output-schema'
import { GrammarBuilder, gbnfLiteral } from './json-grammar'

/** What a request constrains. */
export interface OutputConstraints {
  responseFormat?: OutputSchema
  argumentSchemas?: readonly ArgumentSchema[]
  /** The whole completion is a call's arguments (its header ends the prompt): from the first token, no trigger. */
  callArguments?: { schema: Record<string, unknown> }
}

/** The text every final message starts with, and every tool call's recipient. */
const FINAL = '<|channel|>final'
const TOOL_CALL = ' to=functions.'

/** The final message's two header forms, as text from the trigger on. */
const FINAL_HEADERS = ['<|channel|>final<|message|>', '<|channel|>final <|constrain|>json<|message|>']

type Format = Record<string, unknown>

const constant = (value: string): Format => ({ type: 'const_string', value })
const json = (schema: object): Format => ({ type: 'json_schema', json_schema: schema })

/**
 * The rest of a tool call's header after its name, up to and with `<|message|>`: nothing, or text that starts
 * with a space or a marker (so that no longer name can pass for a shorter one's header) and holds no
 * `<|message|>`.
 */
const HEADER_REST: Format = {
  type: 'or',
  elements: [
    constant('<|message|>'),
    {
      type: 'sequence',
      elements: [
        { type: 'or', elements: [constant(' '), constant('<|channel|>'), constant('<|constrain|>')] },
        { type: 'any_text', excludes: ['<|message|>'] },
        constant('<|message|>'),
      ],
    },
  ],
}

/** `content`, then the text of the end token or nothing (a stop token to xgrammar, or not: see the top). */
function endingWith(content: Format, end: string): Format {
  return { type: 'or', elements: [content, { type: 'sequence', elements: [content, constant(end)] }] }
}

/** xgrammar's structural tag for `constraints`, or null when they constrain nothing (vLLM and SGLang take it as a JSON string). */
export function structuralTag(constraints: OutputConstraints): { type: 'structural_tag'; format: Format } | null {
  const { responseFormat, argumentSchemas, callArguments } = constraints
  if (callArguments !== undefined) return { type: 'structural_tag', format: endingWith(json(callArguments.schema), '<|call|>') }
  const tags: Format[] = []
  const triggers: string[] = []
  if (responseFormat !== undefined) {
    triggers.push(FINAL)
    for (const begin of FINAL_HEADERS)
      tags.push({ type: 'tag', begin, content: endingWith(json(responseFormat.schema), '<|return|>'), end: '' })
  }
  if (argumentSchemas !== undefined) {
    triggers.push(TOOL_CALL)
    for (const { name, schema } of argumentSchemas) {
      // The rest of the header (`<|channel|>commentary`, ` <|constrain|>json`…), then the arguments. Free
      // arguments are unlimited content, which xgrammar takes only before an end string: `<|call|>` as text,
      // or nothing (where `<|call|>` is a stop token to it, as `endingWith` allows).
      const content = {
        type: 'sequence',
        elements: [HEADER_REST, schema === null ? { type: 'any_text' } : endingWith(json(schema), '<|call|>')],
      }
      tags.push({ type: 'tag', begin: `${TOOL_CALL}${name}`, content, end: schema === null ? ['<|call|>', ''] : '' })
    }
  }
  if (tags.length === 0) return null
  return { type: 'structural_tag', format: { type: 'triggered_tags', triggers, tags, at_least_one: false, stop_after_first: true } }
}

/** llama.cpp's trigger type for a word (common/common.h, COMMON_GRAMMAR_TRIGGER_TYPE_WORD). */
const LLAMACPP_WORD_TRIGGER = 1

/** The `/completion` fields that make llama.cpp enforce `constraints`, or null when they constrain nothing. */
export function llamaCppGrammarFields(constraints: OutputConstraints): Record<string, unknown> | null {
  const builder = new GrammarBuilder()
  const { responseFormat, argumentSchemas, callArguments } = constraints
  // From the first token: the arguments, after which only an end-of-generation token (`<|call|>`) may come.
  if (callArguments !== undefined) return { grammar: builder.text('root', builder.json(callArguments.schema)) }
  const branches: string[] = []
  const triggers: { type: number; value: string }[] = []
  if (responseFormat !== undefined) {
    triggers.push({ type: LLAMACPP_WORD_TRIGGER, value: FINAL })
    branches.push(
      `${gbnfLiteral(FINAL)} ( ${gbnfLiteral(' <|constrain|>json')} )? ${gbnfLiteral('<|message|>')} ${builder.json(responseFormat.schema)}`,
    )
  }
  if (argumentSchemas !== undefined) {
    triggers.push({ type: LLAMACPP_WORD_TRIGGER, value: TOOL_CALL })
    // The rest of a header after the name (as HEADER_REST): nothing, or from a space or a marker on, any text
    // but `<` and the two markers a header may hold. Free arguments: any text without a marker's `<|`.
    const marker = `${gbnfLiteral('<|channel|>')} | ${gbnfLiteral('<|constrain|>')}`
    builder.define('header-rest', `( ( " " | ${marker} ) ( [^<] | ${marker} )* )?`)
    builder.define('free-arguments', '( [^<] | "<" [^|] )*')
    const calls = argumentSchemas.map(
      ({ name, schema }) =>
        `${gbnfLiteral(name)} header-rest ${gbnfLiteral('<|message|>')} ${schema === null ? 'free-arguments' : builder.json(schema)}`,
    )
    branches.push(`${gbnfLiteral(TOOL_CALL)} ( ${calls.join(' | ')} )`)
  }
  if (branches.length === 0) return null
  return {
    grammar: builder.text('root', branches.map((branch) => `( ${branch} )`).join(' | ')),
    grammar_lazy: true,
    grammar_triggers: triggers,
  }
}
