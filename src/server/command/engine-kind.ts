/**
 * Which inference server answers at an engine URL, for `serve --engine-url` without `--engine`: a gateway that
 * guessed would answer real clients from the wrong engine, or from none. One `GET /v1/models` tells the four
 * apart, each server writing its own `owned_by` into every model card:
 *
 * - vLLM: `vllm` (vllm/entrypoints/serve/engine/protocol.py, `ModelCard`; vllm/entrypoints/openai/models/serving.py);
 * - SGLang: `sglang` (python/sglang/srt/entrypoints/openai/protocol.py, `ModelCard`; http_server.py `available_models`);
 * - llama.cpp: `llamacpp` (tools/server/server-context.cpp, `get_models`), and every answer of llama-server, a 401
 *   included, carries the header `Server: llama.cpp` (tools/server/server-http.cpp, `set_default_headers`);
 * - TensorRT-LLM: `tensorrt_llm` (tensorrt_llm/serve/openai_protocol.py, `ModelCard`; openai_server.py `get_model`).
 *
 * A server that asks for an API key (vLLM and SGLang with `--api-key`) answers 401 and is not told: the gateway
 * sends engines no key, so it could not use it either.
 */
import type { EngineName } from '../../engines/registry'

export type EngineKind = Exclude<EngineName, 'replay'>

const OWNERS: Readonly<Record<string, EngineKind>> = { vllm: 'vllm', sglang: 'sglang', llamacpp: 'llamacpp', tensorrt_llm: 'trtllm' }

/** What a probe found: the engine's kind and the model it serves (its first card's id), or why it could not tell. */
export type EngineProbe = { kind: EngineKind; model: string | null } | { kind: null; why: string }

/** The names `--engine` takes for what `/v1/models` says, as the startup line and errors show them. */
export const ENGINE_KINDS: readonly EngineKind[] = ['vllm', 'sglang', 'llamacpp', 'trtllm']

/** Asks the server at `url` (a base URL, as `--engine-url` takes it) what it is; never throws. */
export async function probeEngine(url: string, timeoutMs = 10_000): Promise<EngineProbe> {
  let response: Response
  try {
    response = await fetch(new URL('v1/models', baseOf(url)), { signal: AbortSignal.timeout(timeoutMs) })
  } catch (error) {
    return { kind: null, why: `it does not answer (${reasonOf(error)})` }
  }
  if (response.headers.get('server') === 'llama.cpp') {
    await response.body?.cancel()
    return { kind: 'llamacpp', model: null }
  }
  if (response.status === 401 || response.status === 403) {
    await response.body?.cancel()
    return { kind: null, why: `GET /v1/models answered ${response.status}: it asks for an API key, which the gateway does not send` }
  }
  let body: unknown
  try {
    body = await response.json()
  } catch {
    return { kind: null, why: `GET /v1/models answered ${response.status}, not JSON` }
  }
  const data = (body as { data?: unknown } | null)?.data
  const card = Array.isArray(data) ? (data[0] as { id?: unknown; owned_by?: unknown } | undefined) : undefined
  const owner = card?.owned_by
  if (!response.ok || typeof owner !== 'string')
    return { kind: null, why: `GET /v1/models answered ${response.status} with no model card's owned_by` }
  const kind = Object.hasOwn(OWNERS, owner) ? OWNERS[owner] : undefined
  if (kind === undefined)
    return { kind: null, why: `its models are owned_by ${JSON.stringify(owner.slice(0, 64))}, no engine this gateway drives` }
  return { kind, model: typeof card?.id === 'string' && card.id !== '' ? card.id : null }
}

/** The URL with a trailing `/` (and without a trailing `/v1`): `v1/models` resolves against it. */
function baseOf(url: string): URL {
  const base = new URL(url)
  base.pathname = `${base.pathname.replace(/\/+$/, '').replace(/\/v1$/, '')}/`
  return base
}

/** A fetch failure's cause in a few words: `ECONNREFUSED`, a timeout. */
function reasonOf(error: unknown): string {
  const cause = (error as { cause?: { code?: unknown } } | null)?.cause
  if (typeof cause?.code === 'string') return cause.code
  if ((error as Error | null)?.name === 'TimeoutError') return 'no answer in time'
  return (error as Error | null)?.message ?? String(error)
}
