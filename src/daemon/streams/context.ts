import type { TokenCodec } from '../crypto/token-codec.js';
import type { Directory } from '../directory/directory.js';
import type { Counters } from '../store/leveldb/counters.js';
import type { Integrity } from '../store/integrity.js';
import type { Storage } from '../store/leveldb/storage.js';
import type { StreamTables } from '../store/leveldb/stream-tables.js';
import type { StreamHeads } from './heads.js';
import type { WriterPresence } from './writer-presence.js';

/**
 * What the parts of the stream store share: the heads (the only mutable state, and the one way
 * to change it) and the services below them. Built once by `StreamStore`.
 */
export interface StreamContext {
  storage: Storage;
  heads: StreamHeads;
  tables: StreamTables;
  integrity: Integrity;
  directory: Directory;
  counters: Counters;
  codec: TokenCodec;
  /** Which claims have a live holder (memory only). */
  presence: WriterPresence;
}
