// What the PostgreSQL streams port knows synchronously of the operation ids and clientMessageIds
// taken, per stream, for the kernel's uniqueness check at admission: what `prepare` fetched
// (admission-lookups.ts batches the lookups) and what this daemon committed since. What another
// daemon took and nobody fetched, the commit's unique keys find (a duplicate in the transaction).

import { expandOperation, type CompactOperation } from '../record-layout.js';
import type { AppendChange } from '../port/stream-port.js';
import type { StoredOperation } from '../port/values.js';
import { AdmissionLookups } from './admission-lookups.js';
import type { Sql } from './connection.js';
import { decodeRow, RowKey } from './row-codec.js';

/**
 * What a stream's committed appends leave known, at most (the newest): a replay soon after its
 * commit (a client that resends after a lost answer) is answered from memory. Appends decide
 * without `prepare` first (appender.ts), so nothing else would ever empty it; what it forgot,
 * the lookup or the commit's unique keys find.
 */
const KNOWN_PER_STREAM = 256;

function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > KNOWN_PER_STREAM) {
    const oldest = map.keys().next();
    if (!oldest.done) map.delete(oldest.value);
  }
}

interface Known {
  ops: Map<string, StoredOperation>;
  msgs: Map<string, number>;
}

export class KnownIds {
  readonly #lookups: AdmissionLookups;
  readonly #known = new Map<string, Known>();
  /** Per stream, its admission lookups in flight together, and whether one has answered. */
  readonly #waves = new Map<string, { outstanding: number; fresh: boolean }>();

  constructor(sql: Sql) {
    this.#lookups = new AdmissionLookups(sql);
  }

  operation(streamId: string, operationId: string): StoredOperation | undefined {
    return this.#known.get(streamId)?.ops.get(operationId);
  }

  messagePosition(streamId: string, generation: number, clientMessageId: string): number | undefined {
    return this.#known.get(streamId)?.msgs.get(`${generation}/${clientMessageId}`);
  }

  /** Fetch what the stored rows say of an append's operation id and message ids in `generation`. */
  prepare(streamId: string, generation: number, operationId: string, clientMessageIds: readonly string[]): Promise<void> {
    let wave = this.#waves.get(streamId);
    if (!wave) {
      wave = { outstanding: 0, fresh: true };
      this.#waves.set(streamId, wave);
    }
    wave.outstanding++;
    const mine = wave;
    const settled = (): void => {
      if (--mine.outstanding === 0 && this.#waves.get(streamId) === mine) this.#waves.delete(streamId);
    };
    return this.#lookups.fetch({ streamId, operationId, generation, clientMessageIds }).then(
      (rows) => {
        settled();
        // The first answer of a wave (lookups of one stream in flight together) replaces what
        // is known of the stream, so it stays small and fresh; the others add to it: appends
        // whose answers come in one turn are admitted after all of them, and each must find
        // what it asked for.
        let known = this.#known.get(streamId);
        if (!known || mine.fresh) {
          known = { ops: new Map(), msgs: new Map() };
          this.#known.set(streamId, known);
          mine.fresh = false;
        }
        if (rows.op !== undefined)
          known.ops.set(
            operationId,
            expandOperation(operationId, decodeRow<CompactOperation>(RowKey.operation(streamId, operationId), rows.op, { streamId })),
          );
        for (const m of rows.msgs)
          known.msgs.set(
            `${generation}/${m.clientMessageId}`,
            decodeRow<number>(RowKey.messageId(streamId, generation, m.clientMessageId), m.body, { streamId, generation }),
          );
      },
      (err: unknown) => {
        settled();
        throw err;
      },
    );
  }

  /** An append of this daemon committed: its ids are taken. */
  committed(c: AppendChange): void {
    const streamId = c.next.streamId;
    const known = this.#known.get(streamId) ?? { ops: new Map<string, StoredOperation>(), msgs: new Map<string, number>() };
    remember(known.ops, c.operation.operationId, c.operation);
    for (const [id, pos] of c.messageIds) remember(known.msgs, `${c.next.generation}/${id}`, pos);
    this.#known.set(streamId, known);
  }

  /** What was fetched may name what a sweep deleted: the next prepare() fetches again. */
  forget(streamId: string): void {
    this.#known.delete(streamId);
  }

  clear(): void {
    this.#known.clear();
  }
}
