// Installs the reference parser for the differential tests (PyPI openai-harmony 0.0.8, pinned with its
// dependencies in __test__/reference-requirements.txt) into .venv, unless it is already there.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'

const python = '.venv/bin/python'
const run = (command, args) => {
  const result = spawnSync(command, args, { stdio: 'inherit' })
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed`)
}
const ready = () => existsSync(python) && spawnSync(python, ['-c', 'import openai_harmony'], { stdio: 'ignore' }).status === 0

if (!ready()) {
  console.log('Installing the reference parser (openai-harmony 0.0.8) into .venv for the differential tests')
  run('python3', ['-m', 'venv', '.venv'])
  run(python, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '-r', '__test__/reference-requirements.txt'])
}
