/**
 * Where the native addon of this machine comes from: napi-rs names each build by platform, architecture and
 * ABI (`linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`), and each published build is a package of its own,
 * `harmony-stream-<that name>`, that npm installs beside harmony-stream as an optional dependency. The names
 * follow the loader napi-rs generates (native.cjs), so that a message names the file and package that loader
 * looked for.
 */
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

interface Manifest {
  name: string
  version: string
  napi: { binaryName: string; targets: string[] }
}

/** The package's own package.json: two folders up from src/backend and from dist/backend alike. */
function manifest(): Manifest {
  return JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as Manifest
}

/**
 * Linux's C library as napi-rs's loader tells it: `ldd` names musl, else the process report (which costs
 * milliseconds, so it comes second) says whether glibc is there.
 */
function linuxLibc(): 'gnu' | 'musl' {
  try {
    return readFileSync('/usr/bin/ldd', 'utf8').includes('musl') ? 'musl' : 'gnu'
  } catch {
    const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined
    return report?.header?.glibcVersionRuntime ? 'gnu' : 'musl'
  }
}

/** This machine's build name, as napi-rs names builds (`linux-x64-gnu`). */
function platformName(): string {
  const { platform, arch } = process
  if (platform === 'linux') return `${platform}-${arch}-${linuxLibc()}`
  if (platform === 'win32') return `${platform}-${arch}-msvc`
  return `${platform}-${arch}`
}

const archNames: Record<string, string> = { x86_64: 'x64', aarch64: 'arm64', i686: 'ia32', armv7: 'arm' }

/** A Rust target triple's build name: `x86_64-unknown-linux-gnu` is `linux-x64-gnu` (napi-rs's mapping). */
function platformNameOfTarget(triple: string): string {
  const [cpu = '', , system = '', abi] = triple.split('-')
  const arch = archNames[cpu] ?? cpu
  if (system === 'darwin') return `darwin-${arch}`
  if (system === 'windows') return `win32-${arch}${abi ? `-${abi}` : ''}`
  return `${system}-${arch}${abi ? `-${abi}` : ''}`
}

export interface NativeDistribution {
  /** This machine's build name. */
  platform: string
  /** The package that carries that build (whether or not one is published for it). */
  packageName: string
  /** Whether the package publishes a build for this machine. */
  published: boolean
  /** The build names of every platform package published (package.json `napi.targets`). */
  platforms: string[]
  /** harmony-stream's version: its platform package must have the same. */
  version: string
  /** The addon file a local build leaves in the package folder. */
  localFile: string
}

let distribution: NativeDistribution | undefined

/** This machine's native distribution (worked out once). */
export function nativeDistribution(): NativeDistribution {
  distribution ??= distributionOf()
  return distribution
}

function distributionOf(): NativeDistribution {
  const { name, version, napi } = manifest()
  const platform = platformName()
  const platforms = napi.targets.map(platformNameOfTarget)
  return {
    platform,
    packageName: `${name}-${platform}`,
    published: platforms.includes(platform),
    platforms,
    version,
    localFile: `${napi.binaryName}.${platform}.node`,
  }
}
