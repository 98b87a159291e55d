/**
 * The AI SDK's provider package (`@ai-sdk/provider` 3, which `ai` 6 brings): its error classes are what the
 * SDK expects a provider to throw. It is a peer dependency, loaded when the first provider is made, so that
 * harmony-stream/ai-sdk loads (and says what is missing) without it.
 */
import type * as AiSdkProvider from '@ai-sdk/provider'
import { requirePeer } from '../base/optional-package'

let provider: typeof AiSdkProvider | undefined

export function aiSdkProvider(): typeof AiSdkProvider {
  provider ??= requirePeer<typeof AiSdkProvider>(
    '@ai-sdk/provider',
    'harmony-stream/ai-sdk',
    'npm install ai@6 (the AI SDK brings it), or npm install @ai-sdk/provider@3',
  )
  return provider
}
