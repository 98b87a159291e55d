/**
 * The example gateway, now a thin file over harmony-stream/server: `createGateway(options)` is the library's
 * (an OpenAI-compatible server for gpt-oss: Chat Completions, Responses with memory, background runs,
 * compaction, the WebSocket mode; and Anthropic's Messages API), and running this file is `harmony-stream serve`
 * with the same environment variables it always read. Start it with `npm run gateway`; point any OpenAI client
 * at http://127.0.0.1:8787/v1, and Anthropic's (Claude Code: ANTHROPIC_BASE_URL) at http://127.0.0.1:8787.
 *
 *   HARMONY_ENGINE   vllm | sglang | llamacpp | trtllm (default with ENGINE_URL: asked of the engine) | replay
 *                    (default without one, in this example: `harmony-stream serve` asks for an engine)
 *   ENGINE_URL       the engine's base URL, e.g. http://127.0.0.1:8000 (vllm, sglang, llamacpp)
 *   ENGINE_MODEL     the model name the engine serves (vllm; required by trtllm)
 *   ENGINE_API       vllm: completions (default) or generate (the tokens-only /inference/v1/generate)
 *   HARMONY_REPLAY   replay engine: JSON file [{ "tokens": number[] }, …] of completions, served round-robin;
 *                    default replay.json beside this file, whose recordings answer what fits the request (a
 *                    call only where functions are offered, never the one cut short); header
 *                    x-harmony-replay: <index> picks one
 *   STREAM_INTERVAL  replay engine: tokens per engine step, default 1
 *   PORT             default 8787 (HOST: default 127.0.0.1)
 *   BODY_LIMIT       largest request body in bytes, default 4 MiB
 *   MODEL            the model id /v1/models lists, default gpt-oss
 *   GATEWAY_WORKERS  processes serving the port (node:cluster), default 1: one per core uses them all
 *   GATEWAY_FRAMES   sse (default): SSE bytes straight from the adapters; objects: events serialized (to compare)
 *   GATEWAY_STATS    1: GET /stats answers this process's CPU time, GC time and heap (for benchmarks)
 *   SSE_COALESCE_MS  collect each stream's frames for this many ms per write (default 0: write every step)
 *   LOG_DIAGNOSTICS  0: do not log what the parser recovered from (default 1: one line each on stderr)
 *   RENDER_WORKERS   threads that render requests off the event loop (default: cores less one; 0: render inline)
 *   RENDER_INLINE_BYTES  bodies up to this many bytes are parsed and rendered inline, larger ones in a worker (default 16384)
 *   HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS, KEEPALIVE_TIMEOUT_MS  the server's timeouts (default 10 s, 30 s, 5 s)
 *   UNKNOWN_FIELDS   refuse (default): a request field no table knows is a 400, as OpenAI answers; ignore: taken without it
 *   CALL_ID_CACHE    0: a request that sends a tool loop's history back is re-rendered, not prompted with the ids the
 *                    engine saw and generated (CallIdCache); default 1 (CHAT_ID_CACHE, deprecated, the same)
 *   HARMONY_RESPONSE_STORE  where Responses are kept (store, previous_response_id, GET/DELETE /v1/responses/{id}):
 *                    sqlite:PATH (default sqlite:responses.sqlite), memory, redis://HOST:PORT (shared by processes), none
 *   SOCKET_LIFETIME_MS  how long a Responses WebSocket connection lives (default 60 minutes, as the specification says)
 *   HARMONY_COMPACTION_KEY  64 hex digits: the key that seals compaction items (POST /v1/responses/compact); gateways
 *                    that share one open each other's compactions. Default: a random key per process
 *   SHUTDOWN_GRACE_MS  on SIGTERM, how long running streams may finish before they are cut (default 10 s)
 *   HARMONY_PYTHON   pyodide: run gpt-oss's python tool (a Responses code_interpreter tool) here, in a sandbox
 *   HARMONY_BROWSER  local:FILE: run gpt-oss's browser (a Responses web_search tool) on a JSON Lines collection
 *   HARMONY_MCP_SERVERS  comma-separated URL prefixes of the remote MCP servers a Responses request may name
 *
 * `harmony-stream serve --help` lists the same settings as flags.
 */
import { pathToFileURL } from 'node:url'

import { serve } from 'harmony-stream/server'

export { createGateway, engineFromEnvironment, loadReplay, responseStoreFromEnvironment } from 'harmony-stream/server'

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  // `npm run gateway -- --port 9000`: flags as `harmony-stream serve` takes them. This example serves its recorded
  // completions when no engine is named at all (`serve` itself asks for one); an engine URL alone is served by the
  // engine found there, as `serve` does.
  const args = process.argv.slice(2)
  const { HARMONY_ENGINE, ENGINE_URL, ENGINE_URLS } = process.env
  const named = HARMONY_ENGINE || ENGINE_URL || ENGINE_URLS || args.some((arg) => /^--engine(-urls?)?(=|$)/.test(arg))
  process.exitCode = await serve(args, process, named ? process.env : { ...process.env, HARMONY_ENGINE: 'replay' })
}
