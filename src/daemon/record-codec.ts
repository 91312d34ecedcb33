import { crc32 } from 'node:zlib';
import { errors } from '../shared/errors.js';
import type { StoredRecord } from '../shared/types.js';

/**
 * Stored record values are `crc32(json)` as 8 hex digits followed by the record's JSON.
 * Messages are also covered by their signature, but receipts and fences are not, so every
 * record carries its own check: a flipped byte becomes a loud error naming the position,
 * never a silently different record.
 */
export function encodeRecord(record: StoredRecord): string {
  const json = JSON.stringify(record);
  return crc32(json).toString(16).padStart(8, '0') + json;
}

/** Decode and verify one stored value; `where` names it in the error. */
export function decodeRecord(value: string, where: { streamId: string; generation: number; position: number }): StoredRecord {
  const json = value.slice(8);
  const sum = Number.parseInt(value.slice(0, 8), 16);
  if (value.length < 10 || Number.isNaN(sum) || crc32(json) !== sum) throw corrupt(where);
  try {
    return JSON.parse(json) as StoredRecord;
  } catch {
    throw corrupt(where);
  }
}

function corrupt(where: { streamId: string; generation: number; position: number }) {
  return errors.storageFailure(
    null,
    `stored record ${where.streamId} generation ${where.generation} position ${where.position} failed its integrity check`,
  ).withDetails({ reason: 'CORRUPT_RECORD', streamId: where.streamId, generation: String(where.generation), position: String(where.position) });
}
