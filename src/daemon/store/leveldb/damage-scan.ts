import { YelloError } from '../../../shared/errors.js';
import { prefixEnd } from './key-layout.js';
import type { Storage } from './storage.js';

/**
 * Keys under `prefix` whose value fails its checksum, read once (startup, for small ranges such
 * as grants and the token index). A flipped bit in a key moves an entry where no lookup finds
 * it; only its checksum, bound to the original key, shows it. When LevelDB cannot read on
 * through the range, all of it is suspect and `prefix` itself is returned.
 */
export async function damagedKeys(storage: Storage, prefix: string): Promise<string[]> {
  const damaged: string[] = [];
  try {
    for await (const { key, error } of storage.entriesChecked({ gte: prefix, lt: prefixEnd(prefix) })) {
      if (error) damaged.push(key);
    }
  } catch (err) {
    if (!(err instanceof YelloError)) throw err;
    damaged.push(prefix);
  }
  return damaged;
}
