/**
 * JSON Schema → the TypeScript-like type the reference renderer writes into the developer message's
 * `# Tools` section (openai/harmony `json_schema_to_typescript`, encoding.rs). Byte for byte what the
 * reference writes, quirks included (see each comment): the model was trained on this text, so "better"
 * output is worse.
 *
 * Two differences come from JavaScript, not from this code (docs/API.md "Where the output can differ from the
 * reference", tested): the schema arrives parsed by `JSON.parse`, so numbers print as JavaScript prints them
 * (`1.0` → `1`, `1e21` → `1e+21`, where the reference keeps `1.0` and writes `1e21`), and integer-like property
 * names (`"2"`) come first in object order, as JavaScript orders them.
 */

type Json = unknown

/** `value.get(key)` of serde_json: a value only for an object holding the key (arrays and scalars have none). */
function get(value: Json, key: string): Json | undefined {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined
  return Object.hasOwn(value, key) ? (value as Record<string, Json>)[key] : undefined
}

function getString(value: Json, key: string): string | undefined {
  const field = get(value, key)
  return typeof field === 'string' ? field : undefined
}

function isEnum(schema: Json): boolean {
  const values = get(schema, 'enum')
  return Array.isArray(values) && values.length > 0
}

function isNullable(schema: Json): boolean {
  return get(schema, 'nullable') === true
}

/** serde_json's `Display` of a value: compact JSON. */
function json(value: Json): string {
  return JSON.stringify(value) ?? 'null'
}

/**
 * A default as the reference comments it. `enumQuotes`: how a string default on an enum is written, which
 * differs between the reference's two code paths (a property: raw; a oneOf variant: as JSON).
 */
function defaultComment(schema: Json, value: Json, enumStrings: 'raw' | 'json'): string {
  if (typeof value === 'string' && !isEnum(schema)) return `default: "${value}"`
  if (typeof value === 'string' && enumStrings === 'raw') return `default: ${value}`
  return `default: ${json(value)}`
}

/** ` | null` for a nullable schema, unless the type already mentions null (the reference's substring test). */
function withNullable(type: string, schema: Json): string {
  return isNullable(schema) && !type.includes('null') ? `${type} | null` : type
}

export function jsonSchemaToTypeScript(schema: Json, indent: string): string {
  const oneOf = get(schema, 'oneOf')
  if (Array.isArray(oneOf)) return topLevelOneOf(oneOf, indent)

  const type = get(schema, 'type')
  if (Array.isArray(type)) {
    const names = type.filter((t): t is string => typeof t === 'string').map((t) => (t === 'integer' ? 'number' : t))
    if (names.length > 0) return names.join(' | ')
  }
  if (typeof type !== 'string') return 'any'
  switch (type) {
    case 'object':
      return objectType(schema, indent)
    case 'string': {
      const values = get(schema, 'enum')
      const strings = Array.isArray(values) ? values.filter((v): v is string => typeof v === 'string') : []
      // Enum strings are quoted, never escaped (the reference formats them with "\"{s}\"").
      return strings.length > 0 ? strings.map((s) => `"${s}"`).join(' | ') : 'string'
    }
    case 'number':
    case 'integer':
      return 'number'
    case 'boolean':
      return 'boolean'
    case 'array': {
      const items = get(schema, 'items')
      return items === undefined ? 'Array<any>' : `${jsonSchemaToTypeScript(items, indent)}[]`
    }
    default:
      return 'any'
  }
}

/** A schema that is a oneOf: each variant on its own line, `| type // description default`. */
function topLevelOneOf(variants: Json[], indent: string): string {
  let out = ''
  for (const variant of variants) {
    out += `\n${indent} | `
    out += withNullable(jsonSchemaToTypeScript(variant, `${indent}   `), variant)
    const comments: string[] = []
    const description = getString(variant, 'description')
    if (description !== undefined) comments.push(description)
    const fallback = get(variant, 'default')
    if (fallback !== undefined) comments.push(defaultComment(variant, fallback, 'json'))
    if (comments.length > 0) out += ` // ${comments.join(' ')}`
  }
  return out
}

function objectType(schema: Json, indent: string): string {
  let out = ''
  const description = getString(schema, 'description')
  // The object's own description goes above its opening brace, which is not indented.
  if (description !== undefined) out += `${indent}// ${description}\n`
  out += '{\n'
  const properties = get(schema, 'properties')
  if (properties !== undefined && properties !== null && typeof properties === 'object' && !Array.isArray(properties)) {
    const requiredList = get(schema, 'required')
    const required = new Set(Array.isArray(requiredList) ? requiredList.filter((r): r is string => typeof r === 'string') : [])
    for (const [key, value] of Object.entries(properties as Record<string, Json>)) {
      out += property(key, value, required.has(key), indent)
    }
  }
  return `${out}${indent}}`
}

function property(key: string, value: Json, required: boolean, indent: string): string {
  let out = ''
  const title = getString(value, 'title')
  if (title !== undefined) out += `${indent}// ${title}\n${indent}//\n`
  // Any `oneOf` key (even one that is not an array) moves the description and the default elsewhere.
  const hasOneOf = get(value, 'oneOf') !== undefined
  const description = getString(value, 'description')
  if (!hasOneOf && description !== undefined) out += `${indent}// ${description}\n`
  const examples = get(value, 'examples')
  if (Array.isArray(examples) && examples.length > 0) {
    out += `${indent}// Examples:\n`
    for (const example of examples) if (typeof example === 'string') out += `${indent}// - "${example}"\n`
  }
  const oneOf = get(value, 'oneOf')
  if (Array.isArray(oneOf)) return out + oneOfProperty(key, value, oneOf, required, indent)

  const optional = required ? '' : '?'
  out += `${indent}${key}${optional}: ${withNullable(jsonSchemaToTypeScript(value, `${indent}    `), value)},`
  const fallback = get(value, 'default')
  if (!hasOneOf && fallback !== undefined) out += ` // ${defaultComment(value, fallback, 'raw')}`
  return `${out}\n`
}

/** A property whose schema is a oneOf: comments above the name, then one `| variant` line each. */
function oneOfProperty(key: string, value: Json, variants: Json[], required: boolean, indent: string): string {
  let out = ''
  const description = getString(value, 'description')
  // The property's description is written once: above the name, unless the first variant says the same.
  const firstVariantSaysIt = description !== undefined && getString(variants[0], 'description') === description
  const describedAbove = description !== undefined && !firstVariantSaysIt
  if (describedAbove) out += `${indent}// ${description}\n`
  const fallback = get(value, 'default')
  if (fallback !== undefined) out += `${indent}// ${defaultComment(value, fallback, 'raw')}\n`
  out += `${indent}${key}${required ? '' : '?'}:\n`
  variants.forEach((variant, i) => {
    out += `${indent} | ${withNullable(jsonSchemaToTypeScript(variant, `${indent}   `), variant)}`
    const comments: string[] = []
    const variantDescription = getString(variant, 'description')
    if (!(i === 0 && describedAbove) && variantDescription !== undefined && variantDescription !== description) {
      comments.push(variantDescription)
    }
    const variantDefault = get(variant, 'default')
    if (variantDefault !== undefined) comments.push(defaultComment(variant, variantDefault, 'raw'))
    if (comments.length > 0) out += ` // ${comments.join(' ')}`
    out += '\n'
  })
  return `${out}${indent},\n`
}
