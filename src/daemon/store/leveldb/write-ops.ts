import type { Touch } from './wal-guard.js';

/**
 * One put or delete of a write batch. Put values are any JSON value, or a function giving it:
 * such a value is serialized only when its group is written, after the write's `ready`
 * promise (signatures computed elsewhere) has resolved.
 */
export type WriteOp = { type: 'put'; key: string; value: unknown } | { type: 'del'; key: string };

/** The put of `value` at `key`. */
export function put(key: string, value: unknown): WriteOp {
  return { type: 'put', key, value };
}

/** An op as admitted: the put's JSON is serialized once, at admission. */
export interface EncodedOp {
  key: string;
  /** The value's JSON; undefined for a delete. */
  json: string | undefined;
  /** A value serialized when its group is written. */
  lazy?: () => unknown;
}

export interface PendingWrite {
  ops: EncodedOp[];
  /** Resolves when the lazy values of `ops` can be serialized. */
  ready: Promise<void> | null;
  touches: readonly Touch[];
  done: Promise<void>;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * The ops of a group, with repeated puts of one key (stream heads, counters) reduced to the
 * last: writes commit in order, so only the final value of a key in the group matters.
 */
export function coalesce(group: PendingWrite[]): EncodedOp[] {
  const byKey = new Map<string, EncodedOp>();
  for (const g of group) {
    for (const op of g.ops) {
      byKey.delete(op.key);
      byKey.set(op.key, op);
    }
  }
  return [...byKey.values()];
}
