/**
 * Responses kept in a SQLite file: they outlive the gateway process (the example gateway's default). SQLite
 * itself runs as WebAssembly (node-sqlite3-wasm: SQLite compiled with its file system access for Node), so
 * installing the package builds and downloads nothing. The bounds are `MemoryResponseStore`'s: expired
 * records are deleted, then the least recently used beyond `maxEntries` or `maxBytes`, after each `put`.
 *
 *   const store = new SqliteResponseStore({ path: 'responses.sqlite' })
 */
import type { Database } from 'node-sqlite3-wasm'

import { requireOptional } from '../../base/optional-package'
import { checkOptions, is } from '../../base/options'
import {
  clock,
  closedError,
  DEFAULT_STORE_BOUNDS,
  EVICTING_BOUND_OPTIONS,
  type EvictingStoreBounds,
  type ResponseStore,
  recordText,
  type StoredResponse,
  StoreError,
} from './store'

export interface SqliteResponseStoreOptions extends EvictingStoreBounds {
  /** The database file, made when missing (`:memory:` for a database that lives as long as the store). */
  path: string
}

const OPTIONS = { ...EVICTING_BOUND_OPTIONS, path: is.nonEmptyString }

const SCHEMA = `
CREATE TABLE IF NOT EXISTS responses (
  id TEXT PRIMARY KEY,
  record TEXT NOT NULL,
  bytes INTEGER NOT NULL,
  expires_at REAL NOT NULL,
  used INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS responses_used ON responses (used);
CREATE INDEX IF NOT EXISTS responses_expires_at ON responses (expires_at);
`

export class SqliteResponseStore implements ResponseStore {
  private readonly bounds: Required<EvictingStoreBounds>
  private db: Database | null
  /** A counter of uses, for least recently used: a clock could give two uses the same time. */
  private used: number

  constructor(options: SqliteResponseStoreOptions) {
    const checked = checkOptions<SqliteResponseStoreOptions>(options, OPTIONS, 'SqliteResponseStore', ['path'])
    const { path, ...bounds } = checked
    this.bounds = { ...DEFAULT_STORE_BOUNDS, ...bounds }
    // Loaded here, not when the package loads: a gateway that keeps no responses in SQLite never pays for it.
    const { Database } = requireOptional<typeof import('node-sqlite3-wasm')>('node-sqlite3-wasm', 'SqliteResponseStore')
    this.db = new Database(path)
    this.db.exec(SCHEMA)
    const row = this.db.get('SELECT COALESCE(MAX(used), 0) AS used FROM responses') as { used: number }
    this.used = row.used
  }

  async get(id: string): Promise<StoredResponse | null> {
    return this.guard('get', (db) => this.read(db, id))
  }

  private read(db: Database, id: string): StoredResponse | null {
    const row = db.get('SELECT record, expires_at FROM responses WHERE id = ?', [id]) as { record: string; expires_at: number } | null
    if (row === null) return null
    if (row.expires_at <= clock.now()) {
      db.run('DELETE FROM responses WHERE id = ?', [id])
      return null
    }
    db.run('UPDATE responses SET used = ? WHERE id = ?', [++this.used, id])
    return JSON.parse(row.record) as StoredResponse
  }

  async put(record: StoredResponse): Promise<void> {
    // A record larger than the whole store would evict itself: refused as too large instead.
    const text = recordText(record, Math.min(this.bounds.maxRecordBytes, this.bounds.maxBytes), 'SqliteResponseStore.put')
    this.guard('put', (db) => this.write(db, record.id, text))
  }

  private write(db: Database, id: string, text: string): void {
    db.exec('BEGIN')
    try {
      db.run('INSERT OR REPLACE INTO responses (id, record, bytes, expires_at, used) VALUES (?, ?, ?, ?, ?)', [
        id,
        text,
        text.length,
        clock.now() + this.bounds.ttlSeconds,
        ++this.used,
      ])
      this.evict(db)
      db.exec('COMMIT')
    } catch (error) {
      db.exec('ROLLBACK')
      throw error
    }
  }

  async delete(id: string): Promise<boolean> {
    return this.guard('delete', (db) => db.run('DELETE FROM responses WHERE id = ?', [id]).changes > 0)
  }

  /** `run` on the open database; a failure of SQLite (a file that cannot be written…) is a `StoreError`. */
  private guard<T>(method: string, run: (db: Database) => T): T {
    const db = this.open(method)
    try {
      return run(db)
    } catch (error) {
      throw new StoreError(`SqliteResponseStore.${method}`, error)
    }
  }

  async close(): Promise<void> {
    this.db?.close()
    this.db = null
  }

  /** Expired records, then the least recently used while the store is over a bound. */
  private evict(db: Database): void {
    db.run('DELETE FROM responses WHERE expires_at <= ?', [clock.now()])
    const { entries, bytes } = db.get('SELECT COUNT(*) AS entries, COALESCE(SUM(bytes), 0) AS bytes FROM responses') as {
      entries: number
      bytes: number
    }
    let over = { entries: entries - this.bounds.maxEntries, bytes: bytes - this.bounds.maxBytes }
    while (over.entries > 0 || over.bytes > 0) {
      const oldest = db.get('SELECT id, bytes FROM responses ORDER BY used LIMIT 1') as { id: string; bytes: number }
      db.run('DELETE FROM responses WHERE id = ?', [oldest.id])
      over = { entries: over.entries - 1, bytes: over.bytes - oldest.bytes }
    }
  }

  private open(method: string): Database {
    if (this.db === null) throw closedError(`SqliteResponseStore.${method}`)
    return this.db
  }
}
