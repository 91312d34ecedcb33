// The ground truth of a storage fault trial: what a flipped bit really changed in a stopped
// daemon's LevelDB, found by reading a copy of the store before the flip and a copy after it
// with LevelDB alone (no yello code), key by key. The fault suite compares what the daemon
// reported with this, to tell damage found from false alarms.

import { cpSync } from 'node:fs';
import { ClassicLevel } from 'classic-level';

/** What a fault changed, as LevelDB itself reads the store. */
export interface StoreDamage {
  /** LevelDB cannot open the flipped store, or a read of it fails. */
  unreadable: boolean;
  /** Keys whose value changed, vanished or appeared. */
  changedKeys: string[];
}

/** Copies a stopped daemon's `db/` directory (before a flip, and after it, for `storeDamage`). */
export function copyStore(dbDir: string, to: string): string {
  cpSync(dbDir, to, { recursive: true });
  return to;
}

async function entries(dbDir: string): Promise<Map<string, string>> {
  const db = new ClassicLevel<string, string>(dbDir, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
  await db.open();
  try {
    return new Map(await db.iterator().all());
  } finally {
    await db.close();
  }
}

/**
 * Compares two copies of a store (opened here, so pass copies: opening replays and rewrites
 * the log). Every key of the pristine copy is also fetched by `get` from the flipped one, as
 * the daemon would (a damaged index or filter block can hide a key that iteration still finds).
 */
export async function storeDamage(pristineCopy: string, flippedCopy: string): Promise<StoreDamage> {
  const want = await entries(pristineCopy);
  const changed = new Set<string>();
  const db = new ClassicLevel<string, string>(flippedCopy, { keyEncoding: 'utf8', valueEncoding: 'utf8' });
  try {
    await db.open();
  } catch {
    return { unreadable: true, changedKeys: [] };
  }
  try {
    let got: Map<string, string>;
    try {
      got = new Map(await db.iterator().all());
    } catch {
      return { unreadable: true, changedKeys: [] };
    }
    for (const [key, value] of got) if (want.get(key) !== value) changed.add(key);
    const keys = [...want.keys()];
    let fetched: (string | undefined)[];
    try {
      fetched = await db.getMany(keys);
    } catch {
      return { unreadable: true, changedKeys: [...changed] };
    }
    keys.forEach((key, i) => {
      if (fetched[i] !== want.get(key)) changed.add(key);
    });
  } finally {
    await db.close();
  }
  return { unreadable: false, changedKeys: [...changed].sort() };
}

/** Tables whose keys belong to one stream (`table/streamId/…`, src key layout). */
const STREAM_TABLES = new Set(['s', 'h', 'r', 'o', 'ol', 'x', 'k']);

/**
 * The streams among `streamIds` the damage may really have hit: those with a changed key of
 * their own, and all of them when the store is unreadable or a shared key (agents, tokens,
 * grants, chats, daemon metadata) changed: such damage may legitimately spoil any stream, so
 * the daemon gets the benefit of the doubt.
 */
export function damagedStreams(damage: StoreDamage, streamIds: readonly string[]): Set<string> {
  if (damage.unreadable) return new Set(streamIds);
  const hit = new Set<string>();
  for (const key of damage.changedKeys) {
    const [table, streamId] = key.split('/');
    if (table !== undefined && STREAM_TABLES.has(table) && streamId !== undefined) {
      if (streamIds.includes(streamId)) hit.add(streamId);
    } else return new Set(streamIds);
  }
  return hit;
}
