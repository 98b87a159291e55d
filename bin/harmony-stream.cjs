#!/usr/bin/env node
// The command-line entry: `harmony-stream inspect [file]` (see `harmony-stream --help`).
const { readFileSync } = require('node:fs')
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
