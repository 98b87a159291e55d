/**
 * The wire frames of the fast lane, as both backends write them: a text delta's SSE frame is, apart from
 * its text (and the Responses API's sequence number), the same for every delta of a message, so the wire
 * adapters describe it once per message as a `FrameTemplate`. Their SSE face writes every delta with
 * `writeFrame`; while a stream stays inside that message and receives only ordinary tokens, a backend's
 * lane stepper (js/lane.ts; crate/core/src/frames.rs and `StreamPool::step_frames` in pool.rs) writes the
 * same frame without going through the adapter. The codes and slots here mirror crate/node/src/lib.rs and
 * pool.rs (__test__/parser/constants.test.mts compares them).
 */

/**
 * What goes between two literals: the text as a JSON string, or the lane's counter in decimal (it
 * advances by one per frame the lane writes). A template without slots is silent: no frame at all.
 */
export const FRAME_TEXT = 0
export const FRAME_COUNTER = 1

/** A frame: `literals[0] slots[0] literals[1] … literals[n]` (one literal more than slots). */
export interface FrameTemplate {
  readonly literals: readonly string[]
  readonly slots: readonly number[]
}

/**
 * JSON strings of recent short texts. At one token per step most deltas are one token's text, the same
 * few thousand again and again, and `JSON.stringify` of a short string costs several times a map lookup
 * (docs/PERFORMANCE.md, "Native at one token per step"). Bounded: emptied when full.
 */
const jsonOfText = new Map<string, string>()
const JSON_CACHE_ENTRIES = 8192
/** Longer texts (several tokens) rarely repeat, and hashing them would cost more than it saves. */
const JSON_CACHE_TEXT = 24

function jsonString(text: string): string {
  if (text.length > JSON_CACHE_TEXT) return JSON.stringify(text)
  let json = jsonOfText.get(text)
  if (json === undefined) {
    if (jsonOfText.size >= JSON_CACHE_ENTRIES) jsonOfText.clear()
    json = JSON.stringify(text)
    jsonOfText.set(text, json)
  }
  return json
}

/** The frame for `text`, with `counter` in its counter slots. */
export function writeFrame(template: FrameTemplate, text: string, counter: number): string {
  const { literals, slots } = template
  const json = jsonString(text)
  let frame = literals[0]
  for (let i = 0; i < slots.length; i++) frame += (slots[i] === FRAME_TEXT ? json : counter) + literals[i + 1]
  return frame
}

/** What a stream's lane did since the adapter last looked. */
export interface LaneProgress {
  text: string
  tokens: number
  counter: number
}

/** The top bit of a lane report: the lane holds text to take (mirrors `LaneReport::TEXT` in pool.rs). */
export const LANE_TEXT = 2 ** 31

/**
 * Where a lane step writes into `ends` (FRAMES_ENDS + FRAMES_SLOTS_PER_STREAM × streams slots), as
 * `parserStepFrames` in crate/node: a
 * status, the index it concerns, how many streams are left to the caller, one end per stream in the
 * native step's buffer (unused by `stepFrames`), then for each stream left to the caller its index and its
 * lane report.
 */
export const FRAMES_STATUS = 0
export const FRAMES_BAD_INDEX = 1
export const FRAMES_SLOW = 2
export const FRAMES_ENDS = 3
/** Slots `ends` needs per stream past FRAMES_ENDS: its end, and its index and report if left to the caller. */
export const FRAMES_SLOTS_PER_STREAM = 3
/**
 * `parserStepFrames`' answer when the step's frames do not fit in the chunk bound (they go to the start of the
 * next one). Mirrors FRAMES_NO_ROOM in crate/node/src/lib.rs.
 */
export const FRAMES_NO_ROOM = 0xffff_ffff
