/**
 * The packages only some features use (the stores' drivers, the JSON Schema validator) are optional
 * dependencies: npm installs them by default, an install may leave them out, and the package loads each one
 * only when the feature that needs it is used. Missing, the feature says which package to install.
 */
import { HarmonySetupError } from './errors'

export function requireOptional<T>(name: string, usedBy: string): T {
  try {
    return require(name) as T
  } catch (error) {
    const code = (error as { code?: unknown } | null)?.code
    if (code !== 'MODULE_NOT_FOUND' || !String((error as Error).message).includes(`'${name}'`)) throw error
    throw new HarmonySetupError(
      'package-missing',
      `${usedBy} needs the package ${name}, an optional dependency of harmony-stream that is not installed: npm install ${name}`,
      { cause: error },
    )
  }
}
