/**
 * The non-streaming form of every wire format (`chatCompletion`, `responseObject`, …): one
 * adapter reads one whole completion, and gives its wire object with its diagnostics.
 */

import type { OptionSpec } from '../base/options'
import type { AdapterDiagnostic, AdapterOptions, WireAdapter } from './adapter'
import type { FinishOptions } from './finish'
import type { AdapterInput } from './input'
import { checkAdapterOptions } from './options'

/**
 * The non-streaming form of every format (`chatCompletion`, `responseObject`, …): `options`
 * checked as the function `where` takes them (`whole`: the format's, and `truncated`), the whole completion read
 * by one new adapter, and its wire object (`answer`, once finished), with the adapter's diagnostics.
 */
export function wholeAnswer<Options extends AdapterOptions, Adapter extends WireAdapter<object, unknown, Options>, Answer>(
  where: string,
  whole: OptionSpec,
  completion: AdapterInput,
  options: Options & FinishOptions,
  adapterOf: (options: Options) => Adapter,
  answer: (adapter: Adapter) => Answer,
): Answer & { diagnostics: AdapterDiagnostic[] } {
  checkAdapterOptions(options, whole, where)
  const { truncated, ...streamOptions } = options
  const adapter = adapterOf(streamOptions as unknown as Options)
  adapter.push(completion)
  adapter.finish({ truncated })
  return { ...answer(adapter), diagnostics: adapter.diagnostics }
}
