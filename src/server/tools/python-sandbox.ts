/**
 * The process a python session runs in (python.ts starts it with `fork`): Pyodide (CPython compiled to
 * WebAssembly, standard library only), one interpreter whose state lasts as long as the process. Started under
 * Node's permission model, reading only Pyodide's files and this one, with no environment: no file writes, no
 * child processes, no workers. The `js`, `pyodide_js` and FFI modules, Python's way to the JavaScript host, are
 * removed before any code runs. Files the code writes live in the interpreter's memory.
 *
 * Messages: `{ code }` in; `{ output }` (what it printed, then the value of its last expression as a notebook
 * shows it, or the traceback) or `{ ready: true }` out. argv[2]: the path of the `pyodide` package's entry.
 */
interface Pyodide {
  runPythonAsync(code: string): Promise<unknown>
  runPython(code: string): unknown
}

// Pyodide asks `process.binding('constants').fs` at start, which the permission model refuses: the same
// constants from `fs`, and nothing else.
const fsConstants = require('node:fs').constants
Object.defineProperty(process, 'binding', {
  value: (name: string) => {
    if (name === 'constants') return { fs: fsConstants }
    throw new Error('process.binding is not available in the python sandbox')
  },
})

/** Python's ways out to JavaScript: set to None in sys.modules, so importing them fails. */
const CLOSED_MODULES = ['js', 'pyodide_js', 'pyodide.ffi', 'pyodide.http', 'pyodide.code', 'pyodide.webloop', 'micropip', '_pyodide_core']

/** A traceback as a notebook shows it: from the code's own frame (`<exec>`), without Pyodide's frames above it. */
function traceback(text: string): string {
  const own = text.indexOf('  File "<exec>"')
  return (text.startsWith('Traceback') && own > 0 ? `Traceback (most recent call last):\n${text.slice(own)}` : text).trimEnd()
}

async function main(): Promise<void> {
  let printed: string[] = []
  const { loadPyodide } = require(process.argv[2]!) as {
    loadPyodide(options: object): Promise<Pyodide>
  }
  const python = await loadPyodide({
    jsglobals: Object.create(null),
    env: {},
    stdout: (line: string) => printed.push(line),
    stderr: (line: string) => printed.push(line),
  })
  python.runPython(`import sys\nfor name in ${JSON.stringify(CLOSED_MODULES)}:\n    sys.modules[name] = None\n`)
  process.on('message', async (message: { code: string }) => {
    printed = []
    let output: string
    try {
      const value = await python.runPythonAsync(message.code)
      // A notebook shows the last expression's value.
      if (value !== undefined && value !== null) printed.push(String(value))
      output = printed.join('\n')
    } catch (error) {
      printed.push(traceback(String((error as Error).message ?? error)))
      output = printed.join('\n')
    }
    process.send!({ output })
  })
  process.send!({ ready: true })
}

main().catch((error) => {
  process.send?.({ failed: String((error as Error).message ?? error) })
  process.exit(1)
})
