/**
 * The request fields of Anthropic's Messages API, each with how this gateway handles it (honoured, accepted or
 * refused): the tables `checkRequestFields` holds a body to, and docs/API.md prints.
 */
import { accepted, honoured, type RequestField, refused } from '../../http/fields'

/**
 * Anthropic's `POST /v1/messages` (the `@anthropic-ai/sdk` package's MessageCreateParams, its beta ones, and the
 * 2023-06-01 version's sampling fields): each mapped onto the Chat request it means (translate.ts).
 */
export const MESSAGES_REQUEST_FIELDS = Object.freeze({
  model: honoured('echoed in the message (any name: the gateway serves one model)'),
  max_tokens: honoured('required; sent to the engine, and held to by the gateway'),
  messages: honoured(
    "rendered into the Harmony prompt as the Chat request it means: text, `thinking` (the chain of thought), `tool_use` and `tool_result` blocks, and `system` messages; `redacted_thinking` left out; `document` blocks of text read as text (under their title); images and other documents refused (gpt-oss reads text), except inside a tool's result, where the model reads that one was left out (said)",
  ),
  system: honoured("the developer message's instructions"),
  stream: honoured('SSE events or one message'),
  stop_sequences: honoured('up to 4: the answer ends before the first (never shown), `stop_reason` `stop_sequence` naming it'),
  temperature: honoured('sent to the engine'),
  top_p: honoured('sent to the engine'),
  top_k: accepted('the engine clients have no top-k setting: taken, and said', 'number'),
  tools: honoured(
    "custom tools rendered as functions (`input_schema` their parameters; `strict` enforced; `defer_loading` and `cache_control` taken: every tool is in the prompt); Anthropic's typed tools (`web_search_…`, `bash_…`, `text_editor_…`, …) left out and said (`hostedTools: 'refuse'`: a 400)",
  ),
  tool_choice: honoured(
    "`auto`, `any` (a call is required), `tool` (that one), `none`, as Chat's `tool_choice`; `disable_parallel_tool_use` taken (a gpt-oss turn makes one call)",
  ),
  thinking: honoured(
    "gpt-oss always reasons, shown as `thinking` blocks: `enabled` sets the reasoning level from `budget_tokens` (under 4,096 low, under 16,384 medium, else high), `adaptive` and `between_tools` leave it to `output_config.effort`; `disabled` (and `display: 'omitted'`) hides the thinking, `disabled` runs at low (said)",
  ),
  output_config: honoured(
    "`effort` is the reasoning level (`xhigh` and `max` run as high, said); `format` (`json_schema`) is structured output, as Chat's `response_format`",
  ),
  output_format: honoured('the older name of `output_config.format`'),
  metadata: honoured('`user_id` is the Chat `user`; cannot change a generation'),
  context_management: accepted('the gateway does not edit the conversation: taken, and said', 'object'),
  cache_control: accepted("the engines' prefix caches need no marks", 'object'),
  service_tier: accepted('one tier here', 'string'),
  inference_geo: accepted('one place here', 'string'),
  speed: accepted('one speed here', 'string'),
  diagnostics: accepted('cannot change a generation', 'object'),
  container: refused("no containers here: Anthropic's code execution is not run"),
  mcp_servers: refused('the MCP connector is not served from Messages: use a Responses request with `mcp` tools'),
} as const satisfies Record<string, RequestField>)

/** `POST /v1/messages/count_tokens`: the prompt a Messages request would render, counted. */
export const COUNT_TOKENS_REQUEST_FIELDS = Object.freeze({
  model: MESSAGES_REQUEST_FIELDS.model,
  messages: MESSAGES_REQUEST_FIELDS.messages,
  system: MESSAGES_REQUEST_FIELDS.system,
  tools: MESSAGES_REQUEST_FIELDS.tools,
  tool_choice: MESSAGES_REQUEST_FIELDS.tool_choice,
  thinking: MESSAGES_REQUEST_FIELDS.thinking,
  output_config: MESSAGES_REQUEST_FIELDS.output_config,
  output_format: MESSAGES_REQUEST_FIELDS.output_format,
  context_management: MESSAGES_REQUEST_FIELDS.context_management,
  cache_control: MESSAGES_REQUEST_FIELDS.cache_control,
  speed: MESSAGES_REQUEST_FIELDS.speed,
  mcp_servers: MESSAGES_REQUEST_FIELDS.mcp_servers,
} as const satisfies Record<string, RequestField>)
