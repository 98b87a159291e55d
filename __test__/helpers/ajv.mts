/**
 * The JSON Schema verdict the structured-output tests take as the truth: Ajv (2020-12, not strict, so that
 * keywords it does not know are let through as the engines let them through) with the formats asked for.
 */
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats, { type FormatName } from 'ajv-formats'

/** An Ajv with `formats` (default: every format ajv-formats knows). */
export function schemaValidator(formats?: FormatName[]): Ajv2020 {
  const ajv = new Ajv2020({ strict: false })
  if (formats === undefined) addFormats.default(ajv)
  else addFormats.default(ajv, formats)
  return ajv
}
