/**
 * harmony-stream/ai-sdk: gpt-oss for the Vercel AI SDK, in process, over any engine client.
 *
 *   import { createHarmony } from 'harmony-stream/ai-sdk'
 *   import { createEngine } from 'harmony-stream/engines'
 *   import { generateText } from 'ai'
 *
 *   const harmony = createHarmony({ engine: createEngine('vllm', { url: 'http://127.0.0.1:8000', model: 'openai/gpt-oss-20b' }) })
 *   const { text } = await generateText({ model: harmony('gpt-oss-20b'), prompt: 'Hello' })
 *
 * Needs `@ai-sdk/provider` 3 (which `ai` 6 brings).
 */
export { createHarmony, HarmonyLanguageModel, type HarmonyProvider, type HarmonySettings } from './ai-sdk/provider'
export type { HarmonyProviderOptions } from './ai-sdk/request'
export { AiSdkStream, type AiSdkStreamOptions } from './ai-sdk/stream'
