/**
 * What `SsePool` needs of an adapter to serve it through the fast lane (backend/frames.ts): the frame its
 * SSE face writes for every text delta of the open message, and a way to take in what the lane did.
 */

import type { FrameTemplate, LaneProgress } from '../backend/frames'
import type { BackendStream } from '../backend/protocol'
import type { Implementation } from '../base/types'
import type { FinishOptions } from './finish'

/** A message whose text is sent nowhere (a dropped message): a template without slots, which writes nothing. */
export const SILENT_FRAME: FrameTemplate = { literals: [''], slots: [] }

export interface LaneTemplate {
  template: FrameTemplate
  /** The counter of the next frame (the Responses API's next `sequence_number`). */
  counter: number
}

export interface PooledAdapter {
  /**
   * Moves the adapter's parser onto `implementation` if it can (made without one, nothing fed yet); false if
   * it runs on the other and cannot.
   */
  laneOn(implementation: Implementation): boolean
  /** The backend stream under the adapter's parser; null once the parser is released. */
  laneStream(): BackendStream | null
  /**
   * Whether the lane may take steps that write nothing (header tokens): false while the adapter still
   * owes frames to its first step (the Responses API's `response.created`).
   */
  laneReady(): boolean
  /** Whether a message is being read (its text is what a template is for). */
  readsMessage(): boolean
  /**
   * The frame the SSE face would write for each text delta of the open message from now on, or null when
   * it would do something else (nothing sent yet, text held back for tool-call recovery, no open message).
   */
  laneTemplate(): LaneTemplate | null
  /**
   * Takes in what the lane did since the adapter last ran, as if the adapter had written those frames:
   * tokens taken, text of the open message, and (when there is text) the counter after its frames.
   */
  absorbLane(progress: LaneProgress): void
  pushSse(input: Uint32Array): string
  finishSse(options?: FinishOptions): string
  close(): void
}
