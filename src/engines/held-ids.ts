/**
 * Ids that llama-server generated but did not stream, found again. The server sends no partial result while
 * the text it generated ends inside a UTF-8 sequence, and each partial result carries only its own id
 * (tools/server/server-context.cpp: `process_token` skips `send_partial_response` while the text is
 * incomplete; `send_partial_response` sets `tokens` to the one id it was called for; the streamed final
 * result's `tokens` is empty). So the first id of a character split over two ids never arrives as an id.
 * Its bytes do: the result that completes the character carries in `content` all the text since the last
 * result, the held ids' bytes followed by its own id's. The held ids are the split of those leading bytes
 * into as many vocabulary tokens as `tokens_predicted` says are missing; it is taken only when there is
 * exactly one such split.
 */
import { sharedVocabulary } from '../backend/js/vocabulary'

/** The longest o200k token is 128 bytes: no held id is longer. */
const LONGEST_TOKEN_BYTES = 128
/** More held bytes than this is not a split character: nothing is guessed. */
const MOST_HELD_BYTES = 4096

/**
 * The `count` ids whose bytes, followed by those of `shown` (the ids the result carried), make `content`;
 * null when `content` does not end with `shown`'s bytes, or when no split or more than one fits. `before` is
 * the text the server sent before this result (its last few characters are enough): a split is taken only
 * where the server would have held each of those ids, i.e. where the text after each ends inside a
 * character by the server's own rule (`heldBack`), so a U+FFFD the server put in place of bytes that are not
 * UTF-8 is never taken for an id.
 */
export function heldIds(content: string, shown: readonly number[], count: number, before: string): number[] | null {
  if (count < 1) return []
  const vocabulary = sharedVocabulary()
  const bytes = Buffer.from(before.slice(-8) + content, 'utf8')
  // Only the last 4 bytes of the earlier text count (heldBack looks no further back).
  const from = Math.max(0, bytes.length - Buffer.byteLength(content, 'utf8'))
  let end = bytes.length
  for (let i = shown.length - 1; i >= 0; i--) {
    const own = vocabulary.tokenBytes(shown[i])
    if (own.length > end - from || !bytes.subarray(end - own.length, end).equals(own)) return null
    end -= own.length
  }
  if (end === from || end - from > MOST_HELD_BYTES) return null
  const splits: number[][] = []
  const split: number[] = []
  /** Positions (byte offset, ids so far) from which no split ends: each is searched once, so the search is linear in the bytes. */
  const dead = new Set<number>()
  // Depth-first over the token that starts at `at`; it stops at two splits (one is the answer, a second
  // makes it ambiguous).
  const search = (at: number): boolean => {
    if (split.length === count) {
      if (at !== end) return false
      splits.push([...split])
      return true
    }
    const key = at * (count + 1) + split.length
    if (dead.has(key)) return false
    let found = false
    for (let to = at + 1; to <= Math.min(end, at + LONGEST_TOKEN_BYTES) && splits.length < 2; to++) {
      if (!heldBack(bytes, to)) continue
      const id = vocabulary.idOfBytes(bytes, at, to)
      if (id === undefined) continue
      split.push(id)
      found = search(to) || found
      split.pop()
    }
    if (!found) dead.add(key)
    return found
  }
  search(from)
  return splits.length === 1 ? splits[0] : null
}

/**
 * Whether llama-server holds back text ending at `bytes[end - 1]`: one of its last 4 bytes starts a UTF-8
 * sequence longer than the bytes from it to the end (tools/server/server-common.cpp, `validate_utf8`,
 * followed exactly: it looks at lead bytes only).
 */
function heldBack(bytes: Uint8Array, end: number): boolean {
  for (let i = 1; i <= 4 && i <= end; i++) {
    const c = bytes[end - i]
    const needs = (c & 0xe0) === 0xc0 ? 2 : (c & 0xf0) === 0xe0 ? 3 : (c & 0xf8) === 0xf0 ? 4 : 0
    if (i < needs) return true
  }
  return false
}
