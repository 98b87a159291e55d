/**
 * The packages only some features use (the stores' drivers, the JSON Schema validator) are optional
 * dependencies: npm installs them by default, an install may leave them out, and the package loads each one
 * only when the feature that needs it is used. Missing, the feature says which package to install.
 *
 * They are loaded with `require` when first needed, never by an `import` at the top of a module: a module that
 * throws while loading is an uncaught exception under Node 20's ES module loader even where the `import()` was
 * caught.
 */
import { HarmonySetupError } from './errors'

export function requireOptional<T>(name: string, usedBy: string): T {
  return requireOr<T>(
    name,
    `${usedBy} needs the package ${name}, an optional dependency of harmony-stream that is not installed: npm install ${name}`,
  )
}

/**
 * A peer dependency: a package the user's own stack brings (the AI SDK), which harmony-stream must share rather
 * than install a second copy of. Missing, the error names what to install.
 */
export function requirePeer<T>(name: string, usedBy: string, install: string): T {
  return requireOr<T>(name, `${usedBy} needs the package ${name}, which is not installed: ${install}`)
}

function requireOr<T>(name: string, message: string): T {
  try {
    return require(name) as T
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code
    if (code !== 'MODULE_NOT_FOUND' || !String((error as Error).message).includes(`'${name}'`)) throw error
    throw new HarmonySetupError('package-missing', message, { cause: error })
  }
}
