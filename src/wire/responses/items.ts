/**
 * A Responses stream's output items while they stream: what the stream keeps of an open item, a new item by its
 * message's route, and the frame templates its deltas are written with (byte for byte the events' JSON).
 */

import { FRAME_COUNTER, FRAME_TEXT, type FrameTemplate } from '../../backend/frames'
import type { WireMessage } from '../adapter'
import type { OutputLogprob } from '../logprobs'
import type { CitationMarkers } from './citations'
import type { ResponseItem, ResponsesDialect } from './types'

/** The raw reasoning events' names in each dialect. */
export const REASONING_EVENTS = {
  openai: { delta: 'response.reasoning_text.delta', done: 'response.reasoning_text.done' },
  'open-responses': { delta: 'response.reasoning.delta', done: 'response.reasoning.done' },
} as const satisfies Record<ResponsesDialect, { delta: string; done: string }>

/** The output item of a message, while it is open. */
export interface OpenItem {
  outputIndex: number
  item: ResponseItem
  /** Text released by text-call recovery (held messages); other items take their message's content at its close. */
  released: string
  /** SSE: the delta frame around its sequence number and delta, made on the item's first delta. */
  frame: FrameTemplate | null
  /** SSE, a reasoning item with the `reasoningSummary` option: its summary delta frame, made as `frame` is. */
  summaryFrame: FrameTemplate | null
  /** A message item's log probabilities so far (the `logprobs` option). */
  logprobs: OutputLogprob[]
  /** A message item's text with its citation markers replaced, as it goes out (the `citedPage` option); else null. */
  cited: CitationMarkers | null
}

type ItemHeader = Pick<WireMessage<OpenItem>, 'index' | 'route' | 'toolName' | 'toolNamespace'>

/** The SSE frame of a response event, `{ type, sequence_number, response }`, from the response's JSON. */
export function responseFrame(type: string, sequence: number, response: string): string {
  return `event: ${type}\ndata: {"type":"${type}","sequence_number":${sequence},"response":${response}}\n\n`
}

/** The item of a message by its route, in progress and empty. */
export function newItem(base: string, message: ItemHeader): ResponseItem {
  if (message.route === 'reasoning') return { id: `rs_${base}`, type: 'reasoning', summary: [], content: [], status: 'in_progress' }
  if (message.route === 'content') return { id: `msg_${base}`, type: 'message', role: 'assistant', status: 'in_progress', content: [] }
  const call = { id: `fc_${base}`, type: 'function_call' as const, call_id: `call_${base}` }
  const namespace = message.toolNamespace
  if (namespace === null) return { ...call, name: message.toolName!, arguments: '', status: 'in_progress' }
  return { ...call, name: message.toolName!.slice(namespace.length + 1), namespace, arguments: '', status: 'in_progress' }
}

/** Where a reasoning item's (one) summary part is, as its summary events say. */
export function summaryAt(open: OpenItem): { item_id: string; output_index: number; summary_index: 0 } {
  return { item_id: open.item.id, output_index: open.outputIndex, summary_index: 0 }
}

/** A reasoning item's summary delta frame, as `response.reasoning_summary_text.delta` objects serialize. */
export function summaryDeltaFrame(open: OpenItem): FrameTemplate {
  const type = 'response.reasoning_summary_text.delta'
  const middle = `,"item_id":${JSON.stringify(open.item.id)},"output_index":${open.outputIndex},"summary_index":0,"delta":`
  return { literals: [`event: ${type}\ndata: {"type":"${type}","sequence_number":`, middle, '}\n\n'], slots: [FRAME_COUNTER, FRAME_TEXT] }
}

/**
 * An item's delta frame around the sequence number and the delta, as the event objects serialize
 * (`reasoningDelta`: the reasoning delta's name in the stream's dialect).
 */
export function deltaFrame(open: OpenItem, reasoningDelta: string): FrameTemplate {
  const type =
    open.item.type === 'reasoning'
      ? reasoningDelta
      : open.item.type === 'message'
        ? 'response.output_text.delta'
        : 'response.function_call_arguments.delta'
  const where = `,"item_id":${JSON.stringify(open.item.id)},"output_index":${open.outputIndex}`
  const middle = open.item.type === 'function_call' ? `${where},"delta":` : `${where},"content_index":0,"delta":`
  const tail = open.item.type === 'message' ? ',"logprobs":[]}\n\n' : '}\n\n'
  return { literals: [`event: ${type}\ndata: {"type":"${type}","sequence_number":`, middle, tail], slots: [FRAME_COUNTER, FRAME_TEXT] }
}
