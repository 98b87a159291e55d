#!/usr/bin/env node
// The command-line entry: `harmony-stream inspect [file]` and `harmony-stream serve` (see `harmony-stream --help`).
const { readFileSync } = require('node:fs')

if (process.argv[2] === '--version' || process.argv[2] === '-v') {
  console.log(require('../package.json').version)
} else if (process.argv[2] === 'serve') {
  // The gateway's modules load only for `serve`: `inspect` stays a parser-only command.
  let server
  try {
    server = require('../dist/server.js')
  } catch (error) {
    // harmony-stream-gateway is not installed: the one line that says so, as serve reports its other setup problems.
    if (error?.name !== 'HarmonySetupError') throw error
    console.error(`harmony-stream serve: ${error.message}`)
    process.exit(2)
  }
  server.serve(process.argv.slice(3)).then(
    (status) => {
      if (status !== 0) process.exit(status)
    },
    (error) => {
      console.error(`harmony-stream serve: ${error?.stack ?? error}`)
      process.exit(1)
    },
  )
} else {
  const { run } = require('../dist/cli.js')

  // Piped into `head`: stop quietly when the reader goes away.
  process.stdout.on('error', (error) => {
    if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0)
    throw error
  })

  process.exitCode = run(process.argv.slice(2), {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: () => readFileSync(0, 'utf8'),
    stdinIsTTY: process.stdin.isTTY === true,
    env: process.env,
  })
}
