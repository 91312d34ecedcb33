// The checksummed bodies of the PostgreSQL store's rows. The same encoding as LevelDB values
// (crc32(key + "\n" + json) as 8 hex digits, then the JSON), bound to a key naming the row
// (its table and primary key), so a body that was changed, or copied onto another row, fails
// its check on read: loudly, naming the row, never a silently different value.

import { errors } from '../../../shared/errors.js';
import { DirectoryKeys } from '../directory-keys.js';
import { StreamKeys } from '../stream-keys.js';
import { decodeValue, encodeValue } from '../value-codec.js';

/** The key a row's checksum is bound to: LevelDB's key of the same value, where one exists. */
export const RowKey = {
  ...DirectoryKeys,
  head: StreamKeys.stream,
  record: StreamKeys.record,
  operation: StreamKeys.operation,
  opLog: StreamKeys.opLog,
  messageId: StreamKeys.messageId,
  corruptMark: StreamKeys.corruptMark,
  /** A daemon's public key (no LevelDB counterpart: LevelDB keeps keys in the data dir). */
  key: (kid: string) => `keys/${kid}`,
};

/** The body of a row holding `value` under `key`. */
export function encodeRow(key: string, value: unknown): string {
  return encodeValue(key, JSON.stringify(value));
}

/** Where a row belongs, for the CORRUPT error of a body that fails its check. */
export interface RowPlace {
  streamId?: string;
  generation?: number;
  position?: number;
}

/** The value of a row's body; throws STORAGE_FAILURE/CORRUPT when it fails its check. */
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- the caller names the row's type
export function decodeRow<T>(key: string, body: string, place: RowPlace = {}): T {
  const value = tryDecodeRow<T>(key, body);
  if (value === undefined)
    throw errors.corrupt({
      key,
      streamId: place.streamId ?? null,
      generation: place.generation === undefined ? null : String(place.generation),
      fromPosition: place.position === undefined ? null : String(place.position),
      detail: 'a PostgreSQL row fails its checksum',
    });
  return value;
}

/** The value of a row's body, or undefined when it fails its check. */
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- the caller names the row's type
export function tryDecodeRow<T>(key: string, body: string): T | undefined {
  const json = decodeValue(key, body);
  if (json === null) return undefined;
  try {
    return JSON.parse(json) as T;
  } catch {
    return undefined;
  }
}
