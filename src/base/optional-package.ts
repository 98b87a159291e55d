/**
 * The packages only some features use (the stores' drivers, the JSON Schema validator) are optional
 * dependencies: npm installs them by default, an install may leave them out, and the package loads each one
 * only when the feature that needs it is used. Missing, the feature says which package to install.
 *
 * They are loaded with `require` when first needed, never by an `import` at the top of a module: a module that
 * throws while loading is an uncaught exception under Node 20's ES module loader even where the `import()` was
 * caught.
 *
 * The gateway's packages are not harmony-stream's dependencies but those of harmony-stream-gateway, which a user
 * installs beside it (`npm install harmony-stream harmony-stream-gateway`), so that a parser user does not
 * install a server. They are looked up from that package's folder first, where every package manager puts a
 * package's own dependencies (pnpm does not hoist them to where harmony-stream could see them), then from
 * harmony-stream's, where the repository has them as devDependencies.
 */
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'

import { HarmonySetupError } from './errors'

/** The package that brings the gateway's dependencies. */
const GATEWAY_PACKAGE = 'harmony-stream-gateway'

export function requireOptional<T>(name: string, usedBy: string): T {
  return requireOr<T>(name, { fromGateway: true }, () => {
    const install = packageOf(name)
    // harmony-stream's own (the schema validator), else one of harmony-stream-gateway's (the stores' drivers, the tools').
    const owner = install in (ownManifest().optionalDependencies ?? {}) ? 'harmony-stream' : GATEWAY_PACKAGE
    return `${usedBy} needs the package ${install}, an optional dependency of ${owner} that is not installed: npm install ${install}`
  })
}

/**
 * Where an optional package's file is (a package run from a path of its own, such as pyodide in the python
 * sandbox's child process), looked up as `requireOptional` loads it: from harmony-stream-gateway's folder first.
 */
export function resolveOptional(name: string, usedBy: string): string {
  // Resolved, not loaded: the process that runs it loads it (the python sandbox's child), not this one.
  for (const from of [gatewayRequire(), require]) {
    try {
      if (from !== undefined) return from.resolve(name)
    } catch (error) {
      if (!isMissing(error, name)) throw error
    }
  }
  // Not found from either: the setup error that names what to install.
  return requireOptional<never>(name, usedBy)
}

/**
 * One of the gateway's own dependencies (pino, prom-client, ws, @opentelemetry/api). Where harmony-stream-gateway
 * is not installed, the one line says to install it (at harmony-stream's version: it depends on exactly that one).
 */
export function requireGatewayPackage<T>(name: string): T {
  return requireOr<T>(name, { fromGateway: true }, () => {
    const install = `npm install ${GATEWAY_PACKAGE}@${ownManifest().version}`
    return gatewayRequire() === undefined
      ? `harmony-stream/server (the gateway, and harmony-stream serve) needs the package ${GATEWAY_PACKAGE}, which is not installed: ${install}`
      : `harmony-stream/server (the gateway) needs the package ${name}, a dependency of ${GATEWAY_PACKAGE} that is not installed: ${install}`
  })
}

/**
 * A peer dependency: a package the user's own stack brings (the AI SDK), which harmony-stream must share rather
 * than install a second copy of. Missing, the error names what to install.
 */
export function requirePeer<T>(name: string, usedBy: string, install: string): T {
  return requireOr<T>(name, { fromGateway: false }, () => `${usedBy} needs the package ${name}, which is not installed: ${install}`)
}

/** `@scope/name/sub/path.js` → `@scope/name`, `name/sub` → `name`: what npm installs. */
function packageOf(specifier: string): string {
  return specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/')
}

/** harmony-stream's package.json: two folders up from src/base and from dist/base alike. */
function ownManifest(): { version: string; optionalDependencies?: Record<string, string> } {
  return JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version: string }
}

let gateway: NodeJS.Require | null | undefined
/**
 * `require` as harmony-stream-gateway's own modules have it, the package found from harmony-stream (npm puts both
 * side by side) or else from the working directory (the user's project, under pnpm); undefined where it is not
 * installed (the repository itself).
 */
function gatewayRequire(): NodeJS.Require | undefined {
  if (gateway === undefined) {
    try {
      gateway = createRequire(require.resolve(`${GATEWAY_PACKAGE}/package.json`, { paths: [__dirname, process.cwd()] }))
    } catch {
      gateway = null
    }
  }
  return gateway ?? undefined
}

function requireOr<T>(name: string, { fromGateway }: { fromGateway: boolean }, message: () => string): T {
  const gatewayLoad = fromGateway ? gatewayRequire() : undefined
  if (gatewayLoad !== undefined) {
    try {
      return gatewayLoad(name) as T
    } catch (error) {
      if (!isMissing(error, name)) throw error
    }
  }
  try {
    return require(name) as T
  } catch (error) {
    if (!isMissing(error, name)) throw error
    throw new HarmonySetupError('package-missing', message(), { cause: error })
  }
}

/** The package itself is not found (a package that is there but fails to load is its own error, not "missing"). */
function isMissing(error: unknown, name: string): boolean {
  return (error as { code?: unknown } | null)?.code === 'MODULE_NOT_FOUND' && String((error as Error).message).includes(`'${name}'`)
}
