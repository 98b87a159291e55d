// Installs the Python oracles and clients of the tests into .venv, unless they are already there: the reference
// parser and renderer (PyPI openai-harmony 0.0.8) for the differential tests, the grammar engine xgrammar 0.2.8
// (the one vLLM, SGLang and TensorRT-LLM constrain generation with) for the structured-output grammars, and
// OpenAI's Python client (openai 3.57.0) that __test__/server/python-client drives against the gateway, and Prometheus's
// own Python client (prometheus_client 0.26.0), whose text parser reads the gateway's /metrics in the tests.
// __test__/reference-requirements.txt pins every package, dependencies included, and pip installs exactly
// those (--no-deps): xgrammar declares torch, transformers and triton, gigabytes that its grammar compiler
// and matcher never use (__test__/helpers/xgrammar_match.py says how it runs without them).
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'

const python = '.venv/bin/python'
const run = (command, args) => {
  const result = spawnSync(command, args, { stdio: 'inherit' })
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed`)
}
const MODULES = ['openai_harmony', 'xgrammar', 'tvm_ffi', 'numpy', 'pydantic', 'openai', 'prometheus_client']
const ready = () =>
  existsSync(python) &&
  spawnSync(
    python,
    ['-c', `import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) for m in ${JSON.stringify(MODULES)}) else 1)`],
    {
      stdio: 'ignore',
    },
  ).status === 0

if (!ready()) {
  console.log(
    'Installing the test oracles and clients (openai-harmony 0.0.8, xgrammar 0.2.8, openai 3.57.0, prometheus_client 0.26.0) into .venv',
  )
  if (!existsSync(python)) run('python3', ['-m', 'venv', '.venv'])
  run(python, ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-deps', '-r', '__test__/reference-requirements.txt'])
}
