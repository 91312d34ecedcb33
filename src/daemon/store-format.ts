import type { Logger } from 'pino';
import { crc32 } from 'node:zlib';
import type { Db } from './storage.js';
import { decodeValue, encodeValue } from './value-codec.js';

/** The key holding the store's format number (itself a checksummed value). */
export const FORMAT_KEY = 'meta/format';
/** Format 2: every value checksummed with its key (`value-codec.ts`). */
export const CURRENT_FORMAT = 2;

/** Entries migrated per LevelDB batch. */
const CHUNK = 2000;

/** A store written by a newer daemon, or a format key that fails its check. */
export class StoreFormatError extends Error {}

/**
 * Bring a store to the current format before anything reads it. Format 1 (yello 0.1.0) kept a
 * CRC only on records (`crc32(json)` + json) and stored other values bare: JSON rows, and plain
 * strings for the username, token, pair, member, message-id and operation-log tables. The
 * migration re-encodes every value and writes the format key last; a migration cut short by a
 * crash resumes, because values already in the new form are recognised by their checksum.
 */
export async function migrateFormat(db: Db, log: Logger): Promise<{ from: number; migrated: number }> {
  const raw = db.getSync(FORMAT_KEY);
  if (raw !== undefined) {
    const json = decodeValue(FORMAT_KEY, raw);
    const format = json === null ? NaN : Number(JSON.parse(json));
    if (format === CURRENT_FORMAT) return { from: format, migrated: 0 };
    throw new StoreFormatError(Number.isNaN(format) ? `the store's format key ${FORMAT_KEY} is damaged` : `the store has format ${format}; this yello reads format ${CURRENT_FORMAT} (a newer version wrote it?)`);
  }
  let migrated = 0;
  const first = await db.keys({ limit: 1 }).all();
  if (first.length > 0) {
    log.info({ from: 1, to: CURRENT_FORMAT }, 'migrating the store format (once)');
    let batch = db.batch();
    for await (const [key, value] of db.iterator()) {
      if (decodeValue(key, value) !== null) continue;
      batch.put(key, encodeValue(key, formatOneJson(key, value)));
      migrated++;
      if (batch.length >= CHUNK) {
        await batch.write();
        batch = db.batch();
      }
    }
    await batch.write();
    log.info({ migrated }, 'store format migrated');
  }
  await db.put(FORMAT_KEY, encodeValue(FORMAT_KEY, JSON.stringify(CURRENT_FORMAT)), { sync: true });
  return { from: first.length > 0 ? 1 : CURRENT_FORMAT, migrated };
}

/** The JSON of a format-1 value, checked where format 1 had a check. */
function formatOneJson(key: string, value: string): string {
  const table = key.slice(0, key.indexOf('/'));
  switch (table) {
    case 'r': {
      const json = value.slice(8);
      if (value.slice(0, 8) !== crc32(json).toString(16).padStart(8, '0')) {
        // Keep the damage visible: the re-encoded value must fail its check, as it did before.
        return `{"__corruptFormat1":${JSON.stringify(value)}`;
      }
      return json;
    }
    case 'u': case 't': case 'p': case 'm': case 'x': case 'ol':
      return JSON.stringify(value);
    default:
      return value;
  }
}
