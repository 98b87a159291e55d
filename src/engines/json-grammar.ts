/**
 * A JSON Schema of the enforced subset (render/output-schema.ts `checkEnforceable`) → GBNF rules that
 * generate exactly the compact JSON texts the schema accepts, within a few bounds: llama.cpp takes the
 * final answer's grammar in this form (constraints.ts). GBNF as llama.cpp's grammars/README.md defines it
 * (`name ::= …`, literals, character classes, `?`, `*`, `{m,n}`); xgrammar reads the same syntax, which is
 * how the tests check these rules against a second grammar engine.
 *
 * Bounds, as llama.cpp's own converter has them (common/json-schema-to-grammar.cpp): integers of at most 16
 * digits, fractions of at most 16, exponents of at most 3, and whitespace only as one optional space after
 * `:` and `,`, so a grammar can never let a model write spaces without end. Objects list their properties
 * in the schema's order, required ones always and optional ones or not, and no others (as xgrammar's strict
 * mode, vLLM's default); an object schema without properties takes the keys `additionalProperties` allows
 * (any, by default). `oneOf` is generated as `anyOf` (a grammar cannot count matches):
 * the adapters' check after generation catches the rare answer that matches two.
 */
import { FORMATS } from '../render/output-schema'

type Schema = boolean | Record<string, unknown>

/** The rules every grammar may use: any JSON value, strings, numbers, and the formats' pieces. */
const BASE_RULES: Record<string, string> = {
  value: 'object | array | string | number | "true" | "false" | "null"',
  object: '"{" ( string ":" ws value ( "," ws string ":" ws value )* )? "}"',
  array: '"[" ( value ( "," ws value )* )? "]"',
  string: '"\\"" char* "\\""',
  char: '[^"\\\\\\x7F\\x00-\\x1F] | "\\\\" ( ["\\\\/bfnrt] | "u" [0-9a-fA-F]{4} )',
  integer: '"-"? ( "0" | [1-9] [0-9]{0,15} )',
  number: 'integer ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?',
  ws: '" "?',
  date: '[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )',
  time: '( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )',
  'date-time': 'date "T" time',
  uuid: '[0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}',
}

/** A GBNF literal of `text`: quotes and backslashes escaped (control characters never occur in compact JSON text). */
export function gbnfLiteral(text: string): string {
  return `"${text.replace(/[\\"]/g, (c) => `\\${c}`)}"`
}

/** `item` between `min` and `max` times (max null: no bound), in GBNF. */
function repeat(item: string, min: number, max: number | null): string {
  if (max !== null && max <= 0) return ''
  if (min === 0 && max === null) return `( ${item} )*`
  return `( ${item} ){${min},${max ?? ''}}`
}

/** GBNF rules for several JSON Schemas at once (each an expression of `json`), then the whole grammar (`text`). */
export class GrammarBuilder {
  private readonly rules = new Map<string, string>()
  /** Per schema, its `$ref` targets → their rule names (set before a target is visited, so recursion ends). */
  private readonly references = new Map<Schema, Map<string, string>>()
  private next = 0
  /** The schema being visited, whose `$defs` its references name. */
  private root: Schema = true

  /** The expression of the compact JSON texts `schema` accepts (in the enforced subset: `checkEnforceable`). */
  json(schema: object | boolean): string {
    this.root = schema as Schema
    return this.visit(schema as Schema)
  }

  /** A new rule for `body`, named after `hint`; returns its name. */
  private rule(hint: string, body: string): string {
    const name = `${hint}-${this.next++}`
    this.rules.set(name, body)
    return name
  }

  /** A rule of the caller's (`name ::= body`), kept as it is. */
  define(name: string, body: string): string {
    this.rules.set(name, body)
    return name
  }

  /** The expression of the values `schema` accepts. */
  private visit(schema: Schema): string {
    if (schema === true) return 'value'
    if (schema === false) throw new TypeError('json-grammar: a false schema matches no value (checkEnforceable refuses it)')
    if (typeof schema.$ref === 'string') return this.reference(schema.$ref)
    if ('const' in schema) return gbnfLiteral(JSON.stringify(schema.const))
    if (Array.isArray(schema.enum)) return `( ${schema.enum.map((v) => gbnfLiteral(JSON.stringify(v))).join(' | ')} )`
    const alternatives = (schema.anyOf ?? schema.oneOf) as Schema[] | undefined
    if (alternatives !== undefined) {
      // The schema's other keywords apply to every alternative (`{ type: 'object', anyOf: [...] }`).
      const { anyOf: _anyOf, oneOf: _oneOf, ...rest } = schema
      return `( ${alternatives.map((alt) => this.visit(typeof alt === 'boolean' ? alt : { ...rest, ...alt })).join(' | ')} )`
    }
    const types = schema.type === undefined ? this.impliedTypes(schema) : Array.isArray(schema.type) ? schema.type : [schema.type]
    if (types === null) return 'value'
    return `( ${(types as string[]).map((type) => this.ofType(type, schema)).join(' | ')} )`
  }

  /** The type a schema without `type` means by its keywords (null: any value). */
  private impliedTypes(schema: Record<string, unknown>): string[] | null {
    if ('properties' in schema || 'additionalProperties' in schema) return ['object']
    if ('items' in schema || 'prefixItems' in schema) return ['array']
    if ('format' in schema || 'minLength' in schema || 'maxLength' in schema) return ['string']
    return null
  }

  private ofType(type: string, schema: Record<string, unknown>): string {
    switch (type) {
      case 'object':
        return this.object(schema)
      case 'array':
        return this.array(schema)
      case 'string':
        return this.string(schema)
      case 'integer':
      case 'number':
        return type
      case 'boolean':
        return '( "true" | "false" )'
      default:
        return '"null"'
    }
  }

  private reference(target: string): string {
    let byTarget = this.references.get(this.root)
    if (byTarget === undefined) this.references.set(this.root, (byTarget = new Map()))
    let name = byTarget.get(target)
    if (name === undefined) {
      const [, where, key] = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(target) ?? []
      const defs = (this.root as Record<string, Record<string, Schema>>)[where!]
      if (defs === undefined || !Object.hasOwn(defs, key!)) throw new TypeError(`json-grammar: $ref ${target} resolves to nothing`)
      name = `ref-${this.next++}`
      byTarget.set(target, name)
      this.rules.set(name, this.visit(defs[key!]!))
    }
    return name
  }

  private string(schema: Record<string, unknown>): string {
    const format = schema.format as string | undefined
    if (format !== undefined) {
      if (!FORMATS.has(format)) throw new TypeError(`json-grammar: format ${format} has no rule`)
      return `"\\"" ${format} "\\""`
    }
    const min = (schema.minLength as number | undefined) ?? 0
    const max = (schema.maxLength as number | undefined) ?? null
    if (min === 0 && max === null) return 'string'
    return `"\\"" ${repeat('char', min, max) || '""'} "\\""`
  }

  /**
   * Properties in order, each required one always, each optional one or not, commas only between: two rules
   * per position, one for "nothing written yet" (`first`) and one for "after a property" (`rest`).
   */
  private object(schema: Record<string, unknown>): string {
    const properties = Object.entries((schema.properties as Record<string, Schema> | undefined) ?? {})
    const required = new Set((schema.required as string[] | undefined) ?? [])
    const additional = schema.additionalProperties as Schema | undefined
    // Without properties an object schema takes any object (JSON mode, `{ type: 'object' }`).
    if (properties.length === 0 && (additional === undefined || additional === true)) return 'object'
    const extraValue = additional === undefined || additional === false ? null : this.visit(additional)
    const extra = extraValue === null ? null : `string ":" ws ${extraValue}`
    let first = extra === null ? '""' : `( ${extra} ( "," ws ${extra} )* )?`
    let rest = extra === null ? '""' : `( "," ws ${extra} )*`
    for (let i = properties.length - 1; i >= 0; i--) {
      const [key, inner] = properties[i]!
      const pair = `${gbnfLiteral(JSON.stringify(key))} ":" ws ${this.visit(inner)}`
      const afterThis = rest
      const restName = this.rule('rest', required.has(key) ? `"," ws ${pair} ${afterThis}` : `( "," ws ${pair} )? ${afterThis}`)
      const firstName = this.rule('first', required.has(key) ? `${pair} ${afterThis}` : `${pair} ${afterThis} | ${first}`)
      rest = restName
      first = firstName
    }
    return `"{" ${first} "}"`
  }

  /** Prefix items in order, then items (unless `items: false`), between minItems and maxItems in all. */
  private array(schema: Record<string, unknown>): string {
    const prefix = (schema.prefixItems as Schema[] | undefined) ?? []
    const items = schema.items as Schema | undefined
    const min = (schema.minItems as number | undefined) ?? 0
    const max = (schema.maxItems as number | undefined) ?? null
    const item = items === false ? null : this.visit(items ?? true)
    const fixed = max === null ? prefix : prefix.slice(0, max)
    // The items after the prefix: how many more the bounds allow.
    const more = item === null ? '' : repeat(`"," ws ${item}`, Math.max(0, min - fixed.length), max === null ? null : max - fixed.length)
    const after = (position: number): string => {
      if (position === fixed.length) return more
      const element = `"," ws ${this.visit(fixed[position]!)} ${after(position + 1)}`
      return position + 1 > min ? `( ${element} )?` : `( ${element} )`
    }
    if (fixed.length > 0) {
      const body = `${this.visit(fixed[0]!)} ${after(1)}`
      return `"[" ${min >= 1 ? `( ${body} )` : `( ${body} )?`} "]"`
    }
    if (item === null || max === 0) return '"[" "]"'
    const body = `${item} ${repeat(`"," ws ${item}`, Math.max(0, min - 1), max === null ? null : max - 1)}`
    return `"[" ${min >= 1 ? `( ${body} )` : `( ${body} )?`} "]"`
  }

  /** The rules the grammar uses: its own, then the base rules (all kept: GBNF allows unused rules). */
  text(rootName: string, rootBody: string): string {
    const lines = [`${rootName} ::= ${rootBody}`]
    for (const [name, body] of this.rules) lines.push(`${name} ::= ${body}`)
    for (const [name, body] of Object.entries(BASE_RULES)) lines.push(`${name} ::= ${body}`)
    return `${lines.join('\n')}\n`
  }
}
