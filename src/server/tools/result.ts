/** What each of the tools a gateway runs (python, the browser, MCP servers) gives back for one call. */

/**
 * What a call gives back. `output` is what the model reads, whatever happened (a notebook's traceback, a page, or
 * what went wrong). `failure` is there when the tool could not do what was asked (it timed out, crashed, its
 * server or the web failed): the model still reads `output`, the step carries a `tool-failed` diagnostic and the
 * call's item ends `failed`. A model's own mistake (code that raises, a link that is not on the page) is output.
 */
export interface ToolResult {
  output: string
  failure?: string
}

/** A result the tool could not produce: the model reads `output`, and `failure` says why. */
export function failed(output: string, failure: string = output): ToolResult {
  return { output, failure }
}
