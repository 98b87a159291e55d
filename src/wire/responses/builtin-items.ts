/**
 * The items of the tools a gateway runs for the model (gpt-oss's `python` and `browser`, remote MCP servers'
 * tools): `code_interpreter_call`, `web_search_call`, `mcp_call`, `mcp_approval_request` and `mcp_list_tools`,
 * with their events, as OpenAI's Responses API shows its own tools' work. A Responses stream hands these messages
 * here (route `builtin`); their items are written through the stream (`ItemWriter`), in its sequence.
 */

import type { WireMessage } from '../adapter'
import { isBuiltinTool, splitRecipient } from '../routing'
import { type Fields, fieldsOf, stringOr } from './echo'
import type { OpenItem } from './items'
import type { ResponseItem, ResponsesAdapterOptions, ToolItemStatus, WebSearchAction } from './types'

/** What the built-in tools' items need of the stream that holds them. */
export interface ItemWriter {
  /** A new item in the output, with its added events. */
  add(item: ResponseItem): OpenItem
  /** An event, numbered next in the stream's sequence. */
  emit(type: string, fields: Record<string, unknown>): void
  /** `response.output_item.done` of an item. */
  itemDone(open: OpenItem): void
  /** The next tool result's failure (its `tool-failed` diagnostic), or null: asked once per result read. */
  nextToolFailure(): string | null
}

/** The built-in tool items of one response. */
export class BuiltinItems {
  /** The item of the built-in tool call made last, until its result comes (the gateway runs one at a time). */
  private awaitingResult: OpenItem | null = null

  constructor(
    private readonly writer: ItemWriter,
    /** The response id's stem, which the items' ids derive from. */
    private readonly idStem: string,
    private readonly options: ResponsesAdapterOptions,
  ) {}

  /** The `mcp_list_tools` items of the request's MCP servers, first in the output; then the calls approved in it. */
  listMcpTools(): void {
    for (const { server_label, tools } of this.options.mcpListTools ?? []) {
      const open = this.writer.add({ id: `mcpl_${this.idStem}_${server_label}`, type: 'mcp_list_tools', server_label, tools })
      const where = { item_id: open.item.id, output_index: open.outputIndex }
      this.writer.emit('response.mcp_list_tools.in_progress', where)
      this.writer.emit('response.mcp_list_tools.completed', where)
      this.writer.itemDone(open)
    }
    for (const call of this.options.mcpApproved ?? []) {
      const item: ResponseItem = {
        id: `mcp_${this.idStem}_${call.approval_request_id}`,
        type: 'mcp_call',
        server_label: call.server_label,
        name: call.name,
        arguments: call.arguments,
        output: call.output,
        error: call.error,
        status: 'in_progress',
        approval_request_id: call.approval_request_id,
      }
      const open = this.writer.add(item)
      this.writer.emit('response.mcp_call.in_progress', { item_id: item.id, output_index: open.outputIndex })
      this.done(open, call.error === null ? 'completed' : 'failed')
    }
  }

  /**
   * The item of a built-in tool's message, added (with its events) on first sight: a python call's and an MCP
   * call's as their headers complete; null for a tool's result (it completes its call's item), for a call that
   * waits for approval, and for a browser call until its arguments are whole.
   */
  itemOf(message: WireMessage<OpenItem>): OpenItem | null {
    if (message.kept !== null) return message.kept
    const { tool, result } = message.builtin!
    if (result || tool.startsWith('browser.') || this.options.needsApproval?.(tool) === true) return null
    const mcp = isBuiltinTool(tool) ? null : splitRecipient(tool)
    if (mcp !== null) {
      message.kept = this.writer.add({
        id: `mcp_${this.idStem}_${message.index}`,
        type: 'mcp_call',
        server_label: mcp.namespace,
        name: mcp.name,
        arguments: '',
        output: null,
        error: null,
        status: 'in_progress',
      })
      this.writer.emit('response.mcp_call.in_progress', { item_id: message.kept.item.id, output_index: message.kept.outputIndex })
      return message.kept
    }
    message.kept = this.writer.add({
      id: `ci_${this.idStem}_${message.index}`,
      type: 'code_interpreter_call',
      status: 'in_progress',
      code: '',
      container_id: `cntr_${this.idStem}`,
      outputs: null,
    })
    this.writer.emit('response.code_interpreter_call.in_progress', {
      item_id: message.kept.item.id,
      output_index: message.kept.outputIndex,
    })
    return message.kept
  }

  /**
   * A built-in tool's message closed. The model's call: its item now waits for the result (python: the code is
   * whole and runs; browser: the item is added, its action read from the call's arguments). The result: the
   * call's item completes (python: with what it printed, when asked for).
   */
  closed(message: WireMessage<OpenItem>, content: string, whole: boolean): void {
    const { tool, result } = message.builtin!
    if (result) {
      const failure = this.writer.nextToolFailure()
      const open = this.awaitingResult
      if (open === null) return
      if (open.item.type === 'code_interpreter_call' && this.options.codeInterpreterOutputs === true)
        open.item.outputs = [{ type: 'logs', logs: content }]
      if (open.item.type === 'mcp_call') {
        if (failure === null) open.item.output = content
        else open.item.error = content
      }
      if (open.item.type === 'web_search_call') open.item.action = withShownUrl(open.item.action, content)
      this.done(open, failure === null ? 'completed' : 'failed')
      return
    }
    const mcp = isBuiltinTool(tool) ? null : splitRecipient(tool)
    if (mcp !== null && this.options.needsApproval?.(tool) === true) {
      // Not run: the client is asked (`mcp_approval_response` in its next request).
      this.writer.itemDone(
        this.writer.add({
          id: `mcpr_${this.idStem}_${message.index}`,
          type: 'mcp_approval_request',
          server_label: mcp.namespace,
          name: mcp.name,
          arguments: content,
        }),
      )
      return
    }
    let open = this.itemOf(message)
    if (open === null) {
      open = this.writer.add({
        id: `ws_${this.idStem}_${message.index}`,
        type: 'web_search_call',
        status: 'in_progress',
        action: browserAction(tool, content),
      })
      this.writer.emit('response.web_search_call.in_progress', { item_id: open.item.id, output_index: open.outputIndex })
    }
    const { item } = open
    const where = { item_id: item.id, output_index: open.outputIndex }
    if (item.type === 'code_interpreter_call') {
      item.code = content
      this.writer.emit('response.code_interpreter_call_code.done', { ...where, code: content })
    } else if (item.type === 'mcp_call') {
      item.arguments = content
      this.writer.emit('response.mcp_call_arguments.done', { ...where, arguments: content })
    }
    if (!whole) {
      this.done(open, 'incomplete')
      return
    }
    if (item.type === 'code_interpreter_call') {
      item.status = 'interpreting'
      this.writer.emit('response.code_interpreter_call.interpreting', where)
    } else if (item.type === 'web_search_call') {
      item.status = 'searching'
      this.writer.emit('response.web_search_call.searching', where)
    }
    this.awaitingResult = open
  }

  /** The completion ends: a call whose result never came (the gateway's limits ended the loop, or the engine stopped). */
  closing(): void {
    if (this.awaitingResult !== null) this.done(this.awaitingResult, 'incomplete')
  }

  /** The response failed: no result is awaited any more (its item is cut with the others). */
  cut(): void {
    this.awaitingResult = null
  }

  /**
   * A built-in tool call's item ends: `completed` with its result, `failed` with a result that says the tool failed
   * (OpenAI has a `failed` event for MCP calls only), or `incomplete` without one.
   */
  private done(open: OpenItem, status: ToolItemStatus): void {
    if (this.awaitingResult === open) this.awaitingResult = null
    const { item } = open
    if ('status' in item) item.status = status
    if (status === 'failed' && item.type === 'mcp_call')
      this.writer.emit('response.mcp_call.failed', { item_id: item.id, output_index: open.outputIndex })
    if (status === 'completed') {
      const type =
        item.type === 'code_interpreter_call'
          ? 'response.code_interpreter_call.completed'
          : item.type === 'mcp_call'
            ? 'response.mcp_call.completed'
            : 'response.web_search_call.completed'
      this.writer.emit(type, { item_id: item.id, output_index: open.outputIndex })
    }
    this.writer.itemDone(open)
  }
}

/**
 * What a browser call did, from its tool (`browser.search`, `.open`, `.find`) and arguments (gpt-oss's, as the
 * system message declares them: `query`; `id`, a page number or an address; `pattern`). Arguments that are not
 * the JSON object they should be: a search for their text, as the model wrote it.
 */
function browserAction(tool: string, args: string): WebSearchAction {
  let fields: Fields | null = null
  try {
    fields = fieldsOf(JSON.parse(args))
  } catch {
    // not JSON: below
  }
  if (tool === 'browser.open' && fields !== null) return { type: 'open_page', url: stringOr(fields.id, null) }
  if (tool === 'browser.find' && fields !== null) return { type: 'find', pattern: stringOr(fields.pattern, ''), url: null }
  return { type: 'search', query: fields === null ? args : stringOr(fields.query, args) }
}

/**
 * A browser action whose page the model named by a link's number or a cursor (its `url` null in the call), with
 * the address of the page the browser showed: its first line, `[cursor] title (url)` (a find's page is
 * `{url}/find?pattern=…`).
 */
function withShownUrl(action: WebSearchAction, page: string): WebSearchAction {
  if (action.type === 'search' || action.url !== null) return action
  // Read by position, not by a pattern over the line: its title is a fetched page's, of any length and text.
  const end = page.indexOf('\n')
  const line = end < 0 ? page : page.slice(0, end)
  const open = line.lastIndexOf(' (')
  if (!line.startsWith('[') || open < 0 || !line.endsWith(')')) return action
  const shown = line.slice(open + 2, -1)
  if (!/^https?:\/\/\S+$/.test(shown)) return action
  return { ...action, url: action.type === 'find' ? shown.replace(/\/find\?pattern=[^/]*$/, '') : shown }
}
