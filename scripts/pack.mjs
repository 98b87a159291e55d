// Packs every package a user installs, as they are published: `npm run pack [-- --platform] [-- --out DIR]`.
//
// The main package carries no addon and no lifecycle script. In the repository, `prepare` builds dist/ and the
// addon for `npm ci` in a clone and for installs from git; in a published package that script runs for nobody,
// and npm warns every consumer about it. So the package is staged (target/pack/harmony-stream: the files
// `files` names, and package.json without scripts and development fields) and packed from there.
// Its optionalDependencies name every platform package at the same version, as `napi prepublish` writes them,
// so that npm installs the one that fits each machine.
//
// harmony-stream-gateway (packages/gateway/) is packed too, at harmony-stream's version and depending on exactly
// that harmony-stream: it holds the gateway's dependencies, which harmony-stream leaves out so that a parser user
// does not install a server.
//
// --platform also packs this machine's platform package (npm/<platform>/, made by `napi create-npm-dirs`) with
// the addon built here, as `napi artifacts` fills it in the release workflow.
// --prebuilt packs dist/ as it is instead of building it first (the tests pack while other suites read dist/).
// Prints the tarballs' paths, one per line: harmony-stream, harmony-stream-gateway, then the platform package.
import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'

const root = resolve(import.meta.dirname, '..')
const { values } = parseArgs({
  options: { out: { type: 'string', default: 'target/pack' }, platform: { type: 'boolean' }, prebuilt: { type: 'boolean' } },
})
const out = resolve(root, values.out)
const npm = (args, cwd) => execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] })

if (!values.prebuilt)
  execFileSync(process.execPath, [join(root, 'scripts', 'build-ts.mjs')], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] })
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))

// The files npm would pack from the repository (`files`, README, LICENSE, package.json), without running its scripts.
// An addon built here is among them (an install from git packs the one its `prepare` built); a published
// package gets its addon from the platform packages.
const [listing] = JSON.parse(npm(['pack', '--dry-run', '--json', '--ignore-scripts'], root))
const stage = join(out, manifest.name)
rmSync(stage, { recursive: true, force: true })
for (const { path } of listing.files) {
  if (path === 'package.json' || path.endsWith('.node')) continue
  mkdirSync(join(stage, path, '..'), { recursive: true })
  cpSync(join(root, path), join(stage, path))
}

const { nativeDistribution } = createRequire(import.meta.url)(join(root, 'dist', 'backend', 'native-platform.js'))
const { scripts, devDependencies, overrides, ava, ...published } = manifest
published.optionalDependencies = { ...manifest.optionalDependencies }
// The tests' export condition points at src/, which is not published (CONTRIBUTING.md, "Test").
published.exports = JSON.parse(JSON.stringify(manifest.exports, (key, value) => (key === 'harmony-stream-source' ? undefined : value)))
for (const platform of nativeDistribution().platforms) published.optionalDependencies[`${manifest.name}-${platform}`] = manifest.version
writeFileSync(join(stage, 'package.json'), `${JSON.stringify(published, null, 2)}\n`)

// --ignore-scripts: a stage has no scripts, and none of the repository's may run while one is packed.
const pack = (dir) => JSON.parse(npm(['pack', dir, '--json', '--ignore-scripts', '--pack-destination', out], root))[0].filename
const tarballs = [pack(stage)]

const gatewaySource = join(root, 'packages', 'gateway')
const gateway = JSON.parse(readFileSync(join(gatewaySource, 'package.json'), 'utf8'))
const gatewayStage = join(out, gateway.name)
rmSync(gatewayStage, { recursive: true, force: true })
cpSync(gatewaySource, gatewayStage, { recursive: true })
cpSync(join(root, 'LICENSE'), join(gatewayStage, 'LICENSE'))
gateway.version = manifest.version
gateway.dependencies[manifest.name] = manifest.version
writeFileSync(join(gatewayStage, 'package.json'), `${JSON.stringify(gateway, null, 2)}\n`)
tarballs.push(pack(gatewayStage))

if (values.platform) {
  const { platform, localFile } = nativeDistribution()
  const source = join(root, 'npm', platform)
  if (!existsSync(join(source, 'package.json')))
    throw new Error(`npm/${platform} does not exist: no platform package is published for ${platform}`)
  if (!existsSync(join(root, localFile))) throw new Error(`${localFile} is not built: npm run build:native`)
  const platformStage = join(out, `${manifest.name}-${platform}`)
  rmSync(platformStage, { recursive: true, force: true })
  cpSync(source, platformStage, { recursive: true })
  cpSync(join(root, localFile), join(platformStage, localFile))
  cpSync(join(root, 'LICENSE'), join(platformStage, 'LICENSE'))
  tarballs.push(pack(platformStage))
}
for (const tarball of tarballs) console.log(join(out, tarball))
