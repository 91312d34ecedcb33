import type { Logger } from 'pino';
import { K, prefixEnd } from './key-layout.js';
import { StreamTables } from './stream-tables.js';
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

  /** Load the stored counts; counts that fail their check are recounted from the tables. */
  static async load(storage: Storage, log: Logger): Promise<Counters> {
    const c = new Counters();
    try {
      const stored = storage.get<ReturnType<Counters['snapshot']>>(K.meta('counts'));
      if (stored !== undefined) Object.assign(c, stored);
      return c;
    } catch (err) {
      log.error({ err: { message: (err as Error).message } }, 'stored counts fail their check; recounting');
    }
    for await (const { error } of storage.entriesChecked({ gte: K.agentsPrefix, lt: prefixEnd(K.agentsPrefix) })) if (!error) c.agents++;
    for await (const { error } of storage.entriesChecked({ gte: K.chatsPrefix, lt: prefixEnd(K.chatsPrefix) })) if (!error) c.chats++;
    const tables = new StreamTables(storage);
    for await (const { key } of storage.entriesChecked<unknown>({ gte: K.streamsPrefix, lt: prefixEnd(K.streamsPrefix) })) {
      c.streams++;
      try {
        const head = tables.head(key.slice(K.streamsPrefix.length));
        if (head) c.records += head.nextPosition - head.firstPosition;
      } catch {
        /* a damaged head counts no records; the head check marks it */
      }
    }
    return c;
  }

  /** The put that persists the current (admitted) counts. */
  op(): WriteOp {
    return { type: 'put', key: K.meta('counts'), value: this.snapshot() };
  }

  snapshot() {
    return { agents: this.agents, chats: this.chats, streams: this.streams, records: this.records };
  }
}
