import type { Logger } from 'pino';
import { crc32 } from 'node:zlib';
import type { Db } from './verified-reads.js';
import type { StoredRecord } from '../../../shared/types.js';
import { K } from './key-layout.js';
import { compactOperation, compactRecord, type StoredOperation } from '../record-layout.js';
import type { StreamMeta } from '../stream-meta.js';
import { placeOf, tailOf } from './stream-tables.js';
import { decodeValue, encodeValue } from './value-codec.js';
import { StoreFormatError } from '../store-format-error.js';

export { StoreFormatError };

/** The key holding the store's format number (itself a checksummed value). */
export const FORMAT_KEY = 'meta/format';
/**
 * Format 2: every value checksummed with its key (`value-codec.ts`); records, operations and
 * the per-append stream tail in their compact forms (`record-layout.ts`).
 */
export const CURRENT_FORMAT = 2;

/** Entries migrated per LevelDB batch. */
const CHUNK = 2000;

/**
 * Bring a store to the current format before anything reads it. Format 1 (yello 0.1.0) kept a
 * CRC only on records (`crc32(json)` + json) and stored other values bare: JSON rows, and plain
 * strings for the username, token, pair, member, message-id and operation-log tables; records,
 * operations and heads were stored whole. The migration re-encodes every value (records and
 * operations compacted, a tail written for every head) and writes the format key last; a
 * migration cut short by a crash resumes, because values already in the new form are
 * recognised by their checksum.
 */
export async function migrateFormat(db: Db, log: Logger): Promise<{ from: number; migrated: number }> {
  const raw = db.getSync(FORMAT_KEY);
  if (raw !== undefined) {
    const json = decodeValue(FORMAT_KEY, raw);
    const format = json === null ? NaN : Number(JSON.parse(json));
    if (format === CURRENT_FORMAT) return { from: format, migrated: 0 };
    if (Number.isNaN(format))
      throw new StoreFormatError(
        `the store's format key ${FORMAT_KEY} fails its checksum (corrupt); run yello doctor, restore from a backup`,
        true,
      );
    throw new StoreFormatError(
      `the store has format ${format}, which this yello (format ${CURRENT_FORMAT}) does not know: a newer version wrote it, and nothing was changed; run that version, or roll back by restoring the copy of the data dir taken before the upgrade`,
      false,
    );
  }
  let migrated = 0;
  const first = await db.keys({ limit: 1 }).all();
  if (first.length > 0) {
    log.info({ from: 1, to: CURRENT_FORMAT }, 'migrating the store format (once)');
    // The heads first: records and tails are compacted against their stream's chat, author and peer.
    const heads = new Map<string, StreamMeta>();
    for await (const [key, value] of db.iterator({ gte: 's/', lt: 's0' })) {
      const json = decodeValue(key, value) ?? formatOneJson(key, value);
      try {
        heads.set(key.slice(2), JSON.parse(json) as StreamMeta);
      } catch {
        /* a damaged head is migrated as it is; the head check marks it */
      }
    }
    let batch = db.batch();
    for await (const [key, value] of db.iterator()) {
      if (decodeValue(key, value) !== null) continue;
      for (const [k, json] of formatTwoEntries(key, formatOneJson(key, value), heads)) batch.put(k, encodeValue(k, json));
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
    case 'u':
    case 't':
    case 'p':
    case 'm':
    case 'x':
    case 'ol':
      return JSON.stringify(value);
    default:
      return value;
  }
}

/** The format-2 entries for one format-1 value (a head also gets its tail). */
function formatTwoEntries(key: string, json: string, heads: Map<string, StreamMeta>): Array<[string, string]> {
  const table = key.slice(0, key.indexOf('/'));
  try {
    if (table === 'r') {
      const [, streamId, g, p] = key.split('/') as [string, string, string, string];
      const head = heads.get(streamId);
      if (!head) return [[key, json]];
      return [[key, JSON.stringify(compactRecord(JSON.parse(json) as StoredRecord, placeOf(head, Number(g), Number(p))))]];
    }
    if (table === 'o') return [[key, JSON.stringify(compactOperation(JSON.parse(json) as StoredOperation))]];
    if (table === 's') {
      const head = JSON.parse(json) as StreamMeta;
      return [
        [key, json],
        [K.tail(head.streamId), JSON.stringify(tailOf(head))],
      ];
    }
  } catch {
    /* not JSON (damaged in format 1): keep it, so it fails its check loudly */
  }
  return [[key, json]];
}
