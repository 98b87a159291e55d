/**
 * A raw WebSocket client of the gateway's Responses WebSocket mode (the `ws` package), read a turn at a time:
 * the frames up to and with the turn's terminal one (`response.completed`, `.incomplete`, `.failed`, or an
 * error frame). Closed in the test's teardown.
 */
import type { ExecutionContext } from 'ava'
import { WebSocket } from 'ws'

export const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed', 'error'])

export type Frame = Record<string, unknown> & { type: string }

/** A raw WebSocket to the gateway's /v1/responses, read a turn at a time (up to and with its terminal frame). */
export async function connect(t: ExecutionContext, port: number) {
  const socket = new WebSocket(`ws://127.0.0.1:${port}/v1/responses`)
  t.teardown(() => socket.terminate())
  const frames: Frame[] = []
  const waiting: (() => void)[] = []
  let closed: { code: number } | null = null
  socket.on('message', (data) => {
    frames.push(JSON.parse(data.toString()) as Frame)
    for (const wake of waiting.splice(0)) wake()
  })
  socket.on('close', (code) => {
    closed = { code }
    for (const wake of waiting.splice(0)) wake()
  })
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve())
    socket.once('error', reject)
  })
  let read = 0
  return {
    socket,
    send(message: Record<string, unknown>) {
      socket.send(JSON.stringify(message))
    },
    /** The frames of the next turn, its terminal frame last. */
    async turn(): Promise<Frame[]> {
      for (;;) {
        const end = frames.findIndex((frame, i) => i >= read && TERMINAL.has(frame.type))
        if (end >= 0) {
          const turn = frames.slice(read, end + 1)
          read = end + 1
          return turn
        }
        if (closed !== null) throw new Error(`closed (${closed.code}) before a terminal frame`)
        await new Promise<void>((resolve) => waiting.push(resolve))
      }
    },
    get closed() {
      return closed
    },
    get frames() {
      return frames
    },
  }
}

/** The last frame's response (a terminal event), or its error. */
export const responseOf = (turn: Frame[]) => turn.at(-1)!.response as Record<string, unknown> & { id: string; status: string }
export const errorOf = (turn: Frame[]) => {
  const last = turn.at(-1)!
  return { status: last.status, ...(last.error as Record<string, unknown>) }
}
