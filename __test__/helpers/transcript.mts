/** A whole replay as data, errors included, so that two replays can be compared with one deepEqual. */
import { HarmonyParseError, HarmonyStreamParser, type HarmonyStreamParserOptions, type Implementation } from 'harmony-stream'

/**
 * Everything observable about one replay, including errors, so two replays can be compared whole; `states`:
 * the parser's state after each batch too.
 */
export function transcript(
  chunks: number[][],
  options: HarmonyStreamParserOptions,
  implementation: Implementation,
  { states = true } = {},
): unknown[] {
  const parser = new HarmonyStreamParser({ ...options, implementation })
  const log: unknown[] = []
  let consumed = 0
  const record = (call: () => unknown) => {
    try {
      log.push(call())
    } catch (error) {
      if (!(error instanceof HarmonyParseError)) throw error
      const { code, message, tokenOffset, header, partial } = error as HarmonyParseError
      log.push({ error: { code, message, tokenOffset, header, partial } })
      return tokenOffset
    }
    return null
  }
  for (const chunk of chunks) {
    // After a strict error the rest of the batch was not consumed: push it again, as a caller would.
    let rest = chunk
    for (;;) {
      const failedAt = record(() => parser.push(rest))
      if (failedAt === null || failedAt + 1 - consumed >= rest.length) {
        consumed += rest.length
        break
      }
      rest = rest.slice(failedAt + 1 - consumed)
      consumed = failedAt + 1
    }
    // Reading the state makes the native parser parse the tokens it kept back: without it, what it keeps is tested too.
    if (states) log.push(parser.state)
  }
  record(() => parser.finish())
  log.push(parser.messages, parser.state)
  return log
}
