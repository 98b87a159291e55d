/** One tool loop the Responses tests share: a call of `get_weather` with its reasoning, then the answer after it. */
import { harmony } from './harmony.mjs'

export const CALL = harmony(
  '<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
)
export const ANSWER = harmony('<|channel|>final<|message|>It is sunny in Paris.<|return|>')
export const TOOLS = [
  {
    type: 'function' as const,
    name: 'get_weather',
    parameters: { type: 'object', properties: { city: { type: 'string' } } },
    strict: null,
  },
]
