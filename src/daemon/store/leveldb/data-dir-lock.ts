import { ClassicLevel } from 'classic-level';

/**
 * The data dir's lock when the store is not LevelDB (PostgreSQL): a daemon on PostgreSQL still
 * owns its data dir (signing keys, `admin.token`, `secret.key`), and two daemons on one data
 * dir would sign with the same key under two sockets. An empty LevelDB at `<data-dir>/lock/`
 * gives the same kernel lock the LevelDB store has (released when the process dies, whatever
 * the way), so a second daemon is refused with the same `LEVEL_LOCKED` → exit 73 path.
 */
export class DataDirLock {
  readonly #db: ClassicLevel;

  private constructor(db: ClassicLevel) {
    this.#db = db;
  }

  /** Take the lock at `dir`; throws LevelDB's error (`LEVEL_LOCKED` when another daemon holds it). */
  static async take(dir: string): Promise<DataDirLock> {
    const db = new ClassicLevel<string, string>(dir, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    await db.open();
    return new DataDirLock(db);
  }

  release(): Promise<void> {
    return this.#db.close();
  }
}
