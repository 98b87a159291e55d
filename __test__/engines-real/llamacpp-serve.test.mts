/**
 * `harmony-stream serve --engine-url` with no `--engine`, in front of a real llama-server (issue 48): the kind is
 * asked of the server (its `Server: llama.cpp` header, its models `owned_by: "llamacpp"`), the startup line names
 * it, and a chat is answered by it, not by recorded completions.
 */
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { join } from 'node:path'

import test from 'ava'
import OpenAI from 'openai'

import { llamaBuildOrSkip, llamaServerForFile } from '../helpers/llama-server.mjs'

const build = llamaBuildOrSkip()
const real = build ? test.serial : test.skip
const llama = llamaServerForFile(test, build)
const bin = join(import.meta.dirname, '..', '..', 'bin', 'harmony-stream.cjs')

real('serve --engine-url alone serves the llama-server found there', async (t) => {
  const child = spawn(process.execPath, [bin, 'serve', '--engine-url', llama().url, '--port', '0', '--response-store', 'memory'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const closed = once(child, 'close')
  let output = ''
  child.stderr.on('data', (chunk) => (output += chunk))
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.on('data', (chunk) => {
      output += chunk
      const match = /http:\/\/127\.0\.0\.1:(\d+)\/v1/.exec(output)
      if (match) resolve(Number(match[1]))
    })
    child.once('exit', (code) => reject(new Error(`serve exited (${code}): ${output}`)))
  })
  try {
    t.regex(output, new RegExp(`the llamacpp engine at ${llama().url}, responses kept in memory`))
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'x', maxRetries: 0 })
    const completion = await client.chat.completions.create({
      model: 'gpt-oss',
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 8,
    })
    // The real engine's usage: the prompt it read and the ids it generated (the replay engine has none of this prompt).
    t.true(completion.usage!.prompt_tokens > 0)
    t.true(completion.usage!.completion_tokens > 0 && completion.usage!.completion_tokens <= 8)
    const health = (await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as { engine: string }
    t.is(health.engine, 'llamacpp')
  } finally {
    child.kill('SIGTERM')
  }
  t.is((await closed)[0], 0, output)
})
