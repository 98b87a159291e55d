// The package suites (`npm run test:package`): what is published, so they run without the export condition
// `harmony-stream-source` the other suites use (package.json "ava"), on dist/ as `npm run build:ts` writes it
// and on the packed tarballs. Otherwise the same settings as package.json's; with --config, ava reads only this.
export default {
  files: ['__test__/package/**/*.test.mts'],
  extensions: { mts: 'module' },
  nodeArguments: ['--import=tsx'],
  workerThreads: false,
  timeout: '3m',
}
