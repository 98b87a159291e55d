/**
 * The npm package `openai-harmony` 0.4.0 (an unofficial WASM build of openai/harmony), loaded offline, for
 * benchmarks: it is what a Node gateway can use today. It embeds an older reference (0.0.4-era error texts,
 * no strict option, content after invalid UTF-8 dropped), so the differential tests use the official
 * 0.0.8 build from PyPI instead (reference.mts). Its module fetches its own `.wasm` through a `file:` URL, which Node 20's
 * fetch refuses, so a fetch that reads `file:` URLs from disk is installed first; its vocabulary is fetched
 * over HTTP, so the `o200k_base.tiktoken` file of gpt-tokenizer is served on 127.0.0.1 while it loads.
 * Used only in tests and benchmarks.
 */
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'

import type { ReferenceMessage } from './reference.mjs'

const require = createRequire(import.meta.url)

type ReferenceResult = { messages: ReferenceMessage[] } | { error: string }

interface JsHarmonyEncoding {
  parseMessagesFromCompletionTokens(tokens: Uint32Array, role?: string | null): string
}

interface JsStreamableParser {
  process(token: number): void
  readonly lastContentDelta: string
  readonly messages: string
  free(): void
}

interface Module {
  load_harmony_encoding(name: string, baseUrl?: string | null): Promise<JsHarmonyEncoding>
  JsStreamableParser: new (encoding: JsHarmonyEncoding, role: string) => JsStreamableParser
}

export interface Reference {
  /** `parseMessagesFromCompletionTokens`: every token, then end of stream; stops at the first error. */
  parseCompletion(tokens: readonly number[], role: string | null): ReferenceResult
  /** `JsStreamableParser` token by token (the WASM build has no end-of-stream call), with each delta. */
  stream(tokens: readonly number[], role: string): { messages: ReferenceMessage[]; deltas: string[]; error?: string }
}

function installFileFetch(): void {
  const original = globalThis.fetch
  globalThis.fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = input instanceof URL ? input : new URL(typeof input === 'string' ? input : input.url)
    if (url.protocol !== 'file:') return original(input, init)
    return new Response(readFileSync(fileURLToPath(url)), { headers: { 'content-type': 'application/wasm' } })
  }) as typeof fetch
}

/** The reference's JSON message: author flattened into role/name, content a string or text parts. */
function normalize(raw: Record<string, unknown>): ReferenceMessage {
  const content = raw.content
  const text = typeof content === 'string' ? content : (content as { text?: string }[]).map((part) => part.text ?? '').join('')
  const message: ReferenceMessage = { role: raw.role as string, content: text }
  if (raw.name != null) message.name = raw.name as string
  if (raw.channel != null) message.channel = raw.channel as string
  if (raw.recipient != null) message.recipient = raw.recipient as string
  if (raw.content_type != null) message.contentType = raw.content_type as string
  return message
}

function messagesOf(json: string): ReferenceMessage[] {
  return (JSON.parse(json) as Record<string, unknown>[]).map(normalize)
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error)
}

let loading: Promise<Reference> | undefined

export function loadReference(): Promise<Reference> {
  loading ??= load()
  return loading
}

async function load(): Promise<Reference> {
  const vocabulary = readFileSync(require.resolve('gpt-tokenizer/data/o200k_base.tiktoken'))
  const server = createServer((request, response) => {
    if (request.url?.endsWith('/o200k_base.tiktoken')) response.end(vocabulary)
    else response.writeHead(404).end()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  try {
    installFileFetch()
    const module = (await import('openai-harmony')) as unknown as Module
    const { port } = server.address() as AddressInfo
    const encoding = await module.load_harmony_encoding('HarmonyGptOss', `http://127.0.0.1:${port}/`)
    return {
      parseCompletion(tokens, role) {
        try {
          return { messages: messagesOf(encoding.parseMessagesFromCompletionTokens(Uint32Array.from(tokens), role)) }
        } catch (error) {
          return { error: errorText(error) }
        }
      },
      stream(tokens, role) {
        const parser = new module.JsStreamableParser(encoding, role)
        const deltas: string[] = []
        try {
          for (const token of tokens) {
            parser.process(token)
            deltas.push(parser.lastContentDelta)
          }
          return { messages: messagesOf(parser.messages), deltas }
        } catch (error) {
          return { messages: messagesOf(parser.messages), deltas, error: errorText(error) }
        } finally {
          parser.free()
        }
      },
    }
  } finally {
    server.close()
  }
}
