import type { TokenCodec } from '../crypto/token-codec.js';
import type { Directory } from '../directory/directory.js';
import type { Integrity } from '../store/integrity.js';
import type { StorePort } from '../store/port/store-port.js';
import type { StreamPort } from '../store/port/stream-port.js';
import type { StreamHeads } from './heads.js';
import type { ReceivingAppends } from './receiving-appends.js';
import type { WriterPresence } from './writer-presence.js';

/**
 * What the parts of the stream store share: the heads (the only mutable state, and the one way
 * to change it) and the services below them. Built once by `StreamStore`.
 */
export interface StreamContext {
  store: StorePort;
  /** `store.streams`: the stream half of the storage port. */
  streams: StreamPort;
  heads: StreamHeads;
  integrity: Integrity;
  directory: Directory;
  codec: TokenCodec;
  /** Which claims have a live holder (memory only). */
  presence: WriterPresence;
  /** Appends read and not yet answered (memory only): operations.get calls them pending. */
  receiving: ReceivingAppends;
}
