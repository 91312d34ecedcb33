import { crc32 } from 'node:zlib';

/**
 * Every stored value is `crc32(key + "\n" + json)` as 8 hex digits followed by the value's JSON.
 * Binding the key into the checksum means a value that moved to another key (a flipped bit in
 * a key) fails as surely as a changed value: a mismatch is always a loud error naming the key,
 * never a silently different value.
 */
export function encodeValue(key: string, json: string): string {
  return checksum(key, json) + json;
}

/** The JSON of a stored value, or null when its checksum does not match its key and bytes. */
export function decodeValue(key: string, raw: string): string | null {
  if (raw.length < 9) return null;
  const json = raw.slice(8);
  return raw.slice(0, 8) === checksum(key, json) ? json : null;
}

function checksum(key: string, json: string): string {
  return crc32(json, crc32(key + '\n'))
    .toString(16)
    .padStart(8, '0');
}
