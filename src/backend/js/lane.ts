/**
 * The TypeScript backend's fast lane of many streams per engine step (as crate/core/src/frames.rs and
 * `StreamPool::step_frames` in pool.rs for the native one): a stream inside a message, given only ordinary
 * tokens, gets its frame written here from the template its adapter set (../frames.ts). Everything else
 * (headers, closes, diagnostics, errors) is left to the adapter itself, on the same parser.
 */
import {
  COMPACT_STATUS_BAD_OFFSETS,
  COMPACT_STATUS_INVALID_TOKEN,
  COMPACT_STATUS_OK,
  COMPACT_STATUS_REPEATED_STREAM,
  COMPACT_STATUS_UNKNOWN_STREAM,
} from '../compact'
import {
  FRAMES_BAD_INDEX,
  FRAMES_ENDS,
  FRAMES_SLOW,
  FRAMES_STATUS,
  type FrameTemplate,
  LANE_TEXT,
  type LaneProgress,
  writeFrame,
} from '../frames'
import { STATE_CONTENT } from '../protocol'
import { FIRST_SPECIAL } from '../tokens'
import { type Lane, runGuarded, type Stream } from './guarded-stream'
import { INDEX_BITS, INDEX_MASK } from './pool'
import { sharedVocabulary } from './vocabulary'

/** Opens the lane of a claimed stream or changes its template (`set_lane` in pool.rs); false if not claimed. */
export function setLane(stream: Stream, template: FrameTemplate | null, counter: number): boolean {
  if (stream.owner === 0) return false
  if (stream.lane === null) stream.lane = { template, counter, text: '', tokens: 0 }
  else {
    stream.lane.template = template
    stream.lane.counter = counter
  }
  return true
}

/** What the caller learns of a lane before a step it serves itself: its tokens (which start afresh) and LANE_TEXT. */
function laneReport(lane: Lane | null): number {
  if (lane === null) return 0
  const tokens = lane.tokens
  lane.tokens = 0
  return (tokens % LANE_TEXT) + (lane.text === '' ? 0 : LANE_TEXT)
}

export function takeLane(stream: Stream): LaneProgress | null {
  const lane = stream.lane
  if (lane === null) return null
  const progress = { text: lane.text, tokens: lane.tokens, counter: lane.counter }
  lane.text = ''
  lane.tokens = 0
  return progress
}

/**
 * The streams lane steppers were given, by id (slot and generation, as pool.ts numbers streams): the
 * TypeScript side of a thread's Rust pool, where every native parser is a stream. One table per thread,
 * so that an id names one stream whichever stepper is asked, and `owner` says which stepper may serve it.
 */
const laneSlots: { generation: number; stream: Stream | null }[] = []
const freeLaneSlots: number[] = []

/** Lets stepper `owner` serve `stream`; its id, or null if another stepper has it. */
export function claimLane(stream: Stream, owner: number): number | null {
  if (stream.owner !== 0 && stream.owner !== owner) return null
  stream.owner = owner
  let index = freeLaneSlots.pop()
  if (index === undefined) {
    if (laneSlots.length > INDEX_MASK) throw new Error('2^24 streams are in lane steppers: the table is full')
    index = laneSlots.push({ generation: 0, stream: null }) - 1
  }
  const slot = laneSlots[index]
  slot.stream = stream
  return (index | (slot.generation << INDEX_BITS)) >>> 0
}

/** Forgets stream `id` of stepper `owner` (a finished or abandoned stream). */
export function releaseLane(id: number, owner: number): void {
  const stream = laneStream(id)
  if (stream === null || stream.owner !== owner) return
  stream.owner = 0
  stream.lane = null
  const slot = laneSlots[id & INDEX_MASK]
  slot.stream = null
  slot.generation = (slot.generation + 1) & 0xff
  freeLaneSlots.push(id & INDEX_MASK)
}

function laneStream(id: number): Stream | null {
  const slot = laneSlots[id & INDEX_MASK]
  return slot !== undefined && slot.generation === id >>> INDEX_BITS ? slot.stream : null
}

let step = 0

/**
 * One engine step with wire frames out (`StreamPool::step_frames`) for the streams `owner` claimed: a
 * stream inside a message whose lane is set, given only ordinary tokens, is served here, its text written
 * as one frame; the indexes of the others go to the caller (in `ends`, laid out as for the native step).
 * Returns each stream's frame, '' for none and for the streams left to the caller: separate strings, which
 * cost less here than one string to slice (the native step's one buffer saves crossings). Checks
 * everything before consuming anything.
 */
export function stepFrames(owner: number, streams: Uint32Array, offsets: Uint32Array, tokens: Uint32Array, ends: Uint32Array): string[] {
  const n = streams.length
  ends[FRAMES_SLOW] = 0
  const status = checkStep(owner, streams, offsets, tokens, ends)
  ends[FRAMES_STATUS] = status
  const frames: string[] = []
  if (status !== COMPACT_STATUS_OK) return frames
  let slow = 0
  for (let i = 0; i < n; i++) {
    const stream = laneStream(streams[i])!
    const served = serveInLane(stream, tokens, offsets[i], offsets[i + 1])
    if (served === null) {
      ends[FRAMES_ENDS + n + 2 * slow] = i
      ends[FRAMES_ENDS + n + 2 * slow + 1] = laneReport(stream.lane)
      slow++
    }
    frames.push(served ?? '')
  }
  ends[FRAMES_SLOW] = slow
  return frames
}

/** One token's batch, copied into this instead of a fresh view of the step's tokens (the usual case). */
const oneToken = new Uint32Array(1)

function checkStep(owner: number, streams: Uint32Array, offsets: Uint32Array, tokens: Uint32Array, ends: Uint32Array): number {
  const n = streams.length
  const fail = (status: number, index: number) => {
    ends[FRAMES_BAD_INDEX] = index
    return status
  }
  ends[FRAMES_BAD_INDEX] = 0
  if (offsets.length !== n + 1 || offsets[n] > tokens.length) return fail(COMPACT_STATUS_BAD_OFFSETS, 0)
  for (let i = 0; i < n; i++) if (offsets[i] > offsets[i + 1]) return fail(COMPACT_STATUS_BAD_OFFSETS, 0)
  for (let i = 0; i < n; i++) if (laneStream(streams[i]) === null) return fail(COMPACT_STATUS_UNKNOWN_STREAM, i)
  const vocabulary = sharedVocabulary()
  for (let i = offsets[0]; i < offsets[n]; i++) if (!vocabulary.contains(tokens[i])) return fail(COMPACT_STATUS_INVALID_TOKEN, i)
  step++
  for (let i = 0; i < n; i++) {
    const stream = laneStream(streams[i])!
    if (stream.owner !== owner) return fail(COMPACT_STATUS_UNKNOWN_STREAM, i)
    if (stream.servedIn === step) return fail(COMPACT_STATUS_REPEATED_STREAM, i)
    stream.servedIn = step
  }
  return COMPACT_STATUS_OK
}

/**
 * The fast lane (`serve_in_lane` in pool.rs): in content state, ordinary tokens can only add text to the
 * open message, so the frame is exact; a batch the parser takes silently is taken too, with no frame. Null,
 * with nothing consumed, when the batch is not for the lane.
 */
function serveInLane(stream: Stream, tokens: Uint32Array, from: number, to: number): string | null {
  const { lane, parser } = stream
  if (lane === null || stream.broken) return null
  const writesText = lane.template !== null && !parser.isFinished() && parser.state === STATE_CONTENT && ordinary(tokens, from, to)
  if (!writesText && !parser.takesSilently(tokens, from, to)) return null
  if (from === to) return ''
  let batch: Uint32Array
  if (to - from === 1) {
    oneToken[0] = tokens[from]
    batch = oneToken
  } else batch = tokens.subarray(from, to)
  if (runGuarded(stream, batch) !== COMPACT_STATUS_OK) return null
  lane.tokens += to - from
  const text = parser.output.text
  if (lane.template === null || text === '') return ''
  lane.text += text
  // A template without slots is silent (text the adapter drops): no frame, and the counter stays.
  if (lane.template.slots.length === 0) return ''
  return writeFrame(lane.template, text, lane.counter++)
}

function ordinary(tokens: Uint32Array, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (tokens[i] >= FIRST_SPECIAL) return false
  return true
}
