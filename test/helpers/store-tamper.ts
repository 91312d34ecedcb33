// Damage planted in a stopped daemon's LevelDB, for the tests of what the daemon does about it.

import path from 'node:path';
import { ClassicLevel } from 'classic-level';

/**
 * Changes one character in the middle of the stored value of the record at `index` (in key
 * order) of `streamId`, leaving its checksum as it was: what a bit flip on disk would do. The
 * daemon must be stopped (LevelDB allows one process).
 */
export async function damageStoredRecord(dataDir: string, streamId: string, index: number): Promise<void> {
  const db = new ClassicLevel<string, string>(path.join(dataDir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
  await db.open();
  try {
    const keys = await db.keys({ gte: `r/${streamId}/`, lt: `r/${streamId}0` }).all();
    const target = keys[index];
    if (target === undefined) throw new Error(`damageStoredRecord: ${streamId} has no record at index ${index}`);
    const value = await db.get(target);
    if (value === undefined) throw new Error(`damageStoredRecord: ${target} has no value`);
    const i = value.length >> 1;
    await db.put(target, value.slice(0, i) + (value[i] === 'x' ? 'y' : 'x') + value.slice(i + 1), { sync: true });
  } finally {
    await db.close();
  }
}

/**
 * Moves the stored value at `key` to a key one character different (the last one changed):
 * what a bit flip in a table file's key bytes does. The value keeps the checksum bound to the
 * old key. Returns the new key. The daemon must be stopped.
 */
export async function renameStoredKey(dataDir: string, key: string): Promise<string> {
  const db = new ClassicLevel<string, string>(path.join(dataDir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
  await db.open();
  try {
    const value = await db.get(key);
    if (value === undefined) throw new Error(`renameStoredKey: no value at ${key}`);
    const last = key.at(-1);
    const renamed = key.slice(0, -1) + (last === 'a' ? 'b' : 'a');
    await db.batch(
      [
        { type: 'del', key },
        { type: 'put', key: renamed, value },
      ],
      { sync: true },
    );
    return renamed;
  } finally {
    await db.close();
  }
}
