/**
 * The example gateway on 127.0.0.1 for a test, with the official openai client pointed at it: closed in the
 * test's teardown, no retries (a test sees every answer as it came).
 */
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'

import type { ExecutionContext } from 'ava'
import OpenAI from 'openai'

const root = join(import.meta.dirname, '..', '..')

interface GatewayModule {
  createGateway(options: Record<string, unknown>): Server
  loadReplay(path: string): number[][]
}

/** The example gateway's module (examples/gateway/server.mjs). */
async function gatewayModule(): Promise<GatewayModule> {
  return (await import(join(root, 'examples/gateway/server.mjs'))) as GatewayModule
}

/** The example's own replay completions (examples/gateway/replay.json). */
export async function exampleReplay(): Promise<number[][]> {
  return (await gatewayModule()).loadReplay(join(root, 'examples/gateway/replay.json'))
}

/** Starts `createGateway(options)` on a free port; returns the server and an openai client for its /v1. */
export async function startGateway(
  t: ExecutionContext,
  options: Record<string, unknown>,
): Promise<{ server: Server; client: OpenAI; port: number }> {
  const server = (await gatewayModule()).createGateway(options)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const { port } = server.address() as AddressInfo
  return { server, port, client: new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'x', maxRetries: 0 }) }
}
