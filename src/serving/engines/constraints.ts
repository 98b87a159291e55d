/**
 * Structured outputs enforced by the engine (`GenerateRequest.responseFormat`): the grammar each engine's
 * constrained decoding takes, laid out as gpt-oss writes a completion, so that only the final answer is
 * constrained. Everything before the final message's header stays free (analysis, preambles, and a tool call
 * instead of an answer, which ends at `<|call|>`); from `<|channel|>final` on, the header may be
 * `<|channel|>final<|message|>` or `<|channel|>final <|constrain|>json<|message|>`, then comes the JSON the
 * schema accepts, then nothing but a stop token (`<|return|>`).
 *
 * Two forms, one layout:
 * - xgrammar's structural tag (vLLM, SGLang, TensorRT-LLM all compile it with xgrammar): a `triggered_tags`
 *   format whose trigger is `<|channel|>final`, one tag per header form with the schema as `json_schema`
 *   content, `stop_after_first` so nothing follows the JSON. Followed: xgrammar docs/tutorials/structural_tag.md
 *   (the `format` form; vLLM's own gpt-oss tags in vllm/reasoning/gptoss_reasoning_parser.py use the same
 *   begin strings). Harmony's special tokens match by their text there, as the engines build xgrammar's
 *   vocabulary from the Hugging Face tokenizer, which gives them their names as text.
 * - llama.cpp: a lazy GBNF grammar (`grammar`, `grammar_lazy`, `grammar_triggers`) that waits for the word
 *   `<|channel|>final` and is then fed the text from that word on (src/llama-grammar.cpp
 *   llama_grammar_accept_impl, common/sampling.cpp: a word trigger is matched as an escaped pattern), so its
 *   root starts with the header. `<|return|>` is an end-of-generation token, which llama.cpp allows only where
 *   the grammar may end: right after the JSON. The JSON rules come from json-grammar.ts.
 */
import type { OutputSchema } from '../../render/developer'
import { gbnfLiteral, jsonGrammar } from './json-grammar'

/** The text every final message starts with: the trigger of both forms. */
const FINAL = '<|channel|>final'

/** The final message's two header forms, as text from the trigger on. */
const FINAL_HEADERS = ['<|channel|>final<|message|>', '<|channel|>final <|constrain|>json<|message|>']

/** xgrammar's structural tag for `format` (the JSON object; vLLM and SGLang take it as a JSON string). */
export function structuralTag(format: OutputSchema): { type: 'structural_tag'; format: Record<string, unknown> } {
  return {
    type: 'structural_tag',
    format: {
      type: 'triggered_tags',
      triggers: [FINAL],
      tags: FINAL_HEADERS.map((begin) => ({ type: 'tag', begin, content: { type: 'json_schema', json_schema: format.schema }, end: '' })),
      at_least_one: false,
      stop_after_first: true,
    },
  }
}

/** llama.cpp's trigger type for a word (common/common.h, COMMON_GRAMMAR_TRIGGER_TYPE_WORD). */
const LLAMACPP_WORD_TRIGGER = 1

/** The `/completion` fields that make llama.cpp enforce `format` on the final answer. */
export function llamaCppGrammarFields(format: OutputSchema): Record<string, unknown> {
  const header = `${gbnfLiteral(FINAL)} ( ${gbnfLiteral(' <|constrain|>json')} )? ${gbnfLiteral('<|message|>')}`
  return {
    grammar: jsonGrammar(format.schema, header),
    grammar_lazy: true,
    grammar_triggers: [{ type: LLAMACPP_WORD_TRIGGER, value: FINAL }],
  }
}
