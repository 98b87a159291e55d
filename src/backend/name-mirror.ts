/** The JavaScript side's copy of a backend's interned names, fetched lazily as new ids appear. */
import { NAME_NOT_INTERNED } from './compact'

export class NameMirror {
  private readonly names: string[] = []

  constructor(private readonly fetch: (from: number) => string[]) {}

  /** The string behind a header field id; null for 0 (absent) and for NAME_NOT_INTERNED. */
  nameOf(id: number): string | null {
    if (id === 0 || id === NAME_NOT_INTERNED) return null
    if (id > this.names.length) {
      for (const name of this.fetch(this.names.length)) this.names.push(name)
      if (id > this.names.length) throw new RangeError(`no name has id ${id}`)
    }
    return this.names[id - 1]
  }
}
