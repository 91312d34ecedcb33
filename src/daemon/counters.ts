import { K } from './keys.js';
import type { Storage, WriteOp } from './storage.js';

/**
 * Counts for `daemon.status`, kept current in memory and written with every batch that
 * changes them, so startup reads one key instead of scanning.
 */
export class Counters {
  agents = 0;
  chats = 0;
  streams = 0;
  records = 0;

  static load(storage: Storage): Counters {
    const c = new Counters();
    const raw = storage.getCommitted(K.meta('counts'));
    if (raw !== undefined) Object.assign(c, JSON.parse(raw));
    return c;
  }

  /** The put that persists the current (admitted) counts. */
  op(): WriteOp {
    return { type: 'put', key: K.meta('counts'), value: JSON.stringify(this.snapshot()) };
  }

  snapshot() {
    return { agents: this.agents, chats: this.chats, streams: this.streams, records: this.records };
  }
}
