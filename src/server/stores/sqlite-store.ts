/**
 * Responses kept in a SQLite file: they outlive the gateway process (the example gateway's default). SQLite
 * itself runs as WebAssembly (node-sqlite3-wasm: SQLite compiled with its file system access for Node), so
 * installing the package builds and downloads nothing. The bounds are `MemoryResponseStore`'s: expired
 * records are deleted, then the least recently used beyond `maxEntries` or `maxBytes`, after each `put`.
 *
 *   const store = new SqliteResponseStore({ path: 'responses.sqlite' })
 *
 * Processes share a file: SQLite's lock here is a directory beside it (`PATH.lock`, node-sqlite3-wasm's VFS),
 * held for one transaction. A write that finds it taken is tried again, for up to `busyTimeoutMs`, as SQLite's
 * own busy timeout would. A process killed inside a transaction (`kill -9`) leaves the directory behind, which
 * would lock the file for good: each store registers its process in `PATH.owners/` (a file named by its pid,
 * removed at `close`; a process killed leaves its file, which the next look at a stale lock removes), and a lock whose every registered owner but this process is gone is stale, and removed.
 */
import { randomUUID } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, rmdirSync, rmSync, writeFileSync } from 'node:fs'
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
  /** How long an operation that finds the file locked by another process is tried again, in ms. Default 2000. */
  busyTimeoutMs?: number
}

const OPTIONS = { ...EVICTING_BOUND_OPTIONS, path: is.nonEmptyString, busyTimeoutMs: is.integer(0) }

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
  private readonly busyTimeoutMs: number
  /** The file's lock and owners (null for `:memory:`). */
  private readonly lock: FileLock | null
  private db: Database | null
  /** A counter of uses, for least recently used: a clock could give two uses the same time. */
  private used: number

  constructor(options: SqliteResponseStoreOptions) {
    const checked = checkOptions<SqliteResponseStoreOptions>(options, OPTIONS, 'SqliteResponseStore', ['path'])
    const { path, busyTimeoutMs, ...bounds } = checked
    this.bounds = { ...DEFAULT_STORE_BOUNDS, ...bounds }
    this.busyTimeoutMs = busyTimeoutMs ?? 2000
    // Loaded here, not when the package loads: a gateway that keeps no responses in SQLite never pays for it.
    const { Database } = requireOptional<typeof import('node-sqlite3-wasm')>('node-sqlite3-wasm', 'SqliteResponseStore')
    this.lock = path === ':memory:' ? null : new FileLock(path)
    // A lock left by a process killed inside a transaction would fail the first statement.
    this.lock?.clearIfStale()
    this.db = new Database(path)
    this.db.exec(SCHEMA)
    const row = this.db.get('SELECT COALESCE(MAX(used), 0) AS used FROM responses') as { used: number }
    this.used = row.used
  }

  get(id: string): Promise<StoredResponse | null> {
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
    await this.guard('put', (db) => this.write(db, record.id, text))
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

  delete(id: string): Promise<boolean> {
    return this.guard('delete', (db) => db.run('DELETE FROM responses WHERE id = ?', [id]).changes > 0)
  }

  /**
   * `run` on the open database; a failure of SQLite (a file that cannot be written…) is a `StoreError`. The file
   * locked by another process is waited for (a stale lock removed), up to `busyTimeoutMs`.
   */
  private async guard<T>(method: string, run: (db: Database) => T): Promise<T> {
    const deadline = Date.now() + this.busyTimeoutMs
    for (let attempt = 0; ; attempt++) {
      const db = this.open(method)
      try {
        return run(db)
      } catch (error) {
        if (!/database is locked/i.test((error as Error).message) || Date.now() >= deadline)
          throw new StoreError(`SqliteResponseStore.${method}`, error)
        if (this.lock?.clearIfStale() !== true)
          await new Promise((resolve) => setTimeout(resolve, Math.min(50, 2 ** attempt) * (0.5 + Math.random())))
      }
    }
  }

  async close(): Promise<void> {
    this.db?.close()
    this.db = null
    this.lock?.leave()
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

/**
 * The lock directory node-sqlite3-wasm makes beside a file (`PATH.lock`) and the processes that use the file
 * (`PATH.owners/PID`): a lock with no live owner but this process is left by a process that died holding it.
 * Owners are processes of this host (a pid is asked with signal 0), as a SQLite file is used from one host.
 */
class FileLock {
  private readonly owners: string
  private readonly mine: string

  constructor(private readonly path: string) {
    this.owners = `${path}.owners`
    // One file per store (a process may open the file twice): the pid, then what tells the stores apart.
    this.mine = `${this.owners}/${process.pid}.${randomUUID().slice(0, 8)}`
    mkdirSync(this.owners, { recursive: true })
    writeFileSync(this.mine, '')
  }

  /** Removes the lock when no other owner is alive (and forgets the dead ones); whether it removed one. */
  clearIfStale(): boolean {
    if (!existsSync(`${this.path}.lock`)) return false
    // This process's stores are not in a transaction now: their statements run one at a time, to the end.
    const others = readdirSync(this.owners).filter((name) => pidOf(name) !== process.pid)
    const dead = others.filter((name) => !alive(pidOf(name)))
    if (dead.length < others.length) return false
    for (const name of dead) rmSync(`${this.owners}/${name}`, { force: true })
    try {
      rmdirSync(`${this.path}.lock`)
    } catch {
      // Another process cleared it first.
    }
    return true
  }

  /** This process no longer uses the file. */
  leave(): void {
    rmSync(this.mine, { force: true })
  }
}

/** The pid an owner file is named by. */
function pidOf(name: string): number {
  return Number(name.split('.')[0])
}

/** Whether process `pid` runs (on this host). */
function alive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}
