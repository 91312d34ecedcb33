// The keys a stored value's checksum covers are one definition for both engines
// (src/daemon/store/stream-keys.ts): LevelDB's K and PostgreSQL's RowKey give the same key for the
// same value, and the format itself is pinned (every stored checksum depends on it).
import { describe, expect, it } from 'vitest';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import { RowKey } from '../../src/daemon/store/postgres/row-codec.js';

describe('stream value keys', () => {
  it('LevelDB and PostgreSQL bind a value to the same key', () => {
    expect(RowKey.head('s1')).toBe(K.stream('s1'));
    expect(RowKey.record('s1', 2, 3)).toBe(K.record('s1', 2, 3));
    expect(RowKey.operation('s1', 'op')).toBe(K.operation('s1', 'op'));
    expect(RowKey.opLog('s1', 2, 3)).toBe(K.opLog('s1', 2, 3));
    expect(RowKey.messageId('s1', 2, 'm')).toBe(K.messageId('s1', 2, 'm'));
    expect(RowKey.corruptMark('s1', 2)).toBe(K.corruptMark('s1', 2));
  });

  it('keeps the stored format', () => {
    expect([
      K.stream('s1'),
      K.record('s1', 2, 3),
      K.operation('s1', 'op'),
      K.opLog('s1', 2, 3),
      K.messageId('s1', 2, 'm'),
      K.corruptMark('s1', 0),
      RowKey.key('kid1'),
    ]).toEqual([
      's/s1',
      'r/s1/0000000000000002/0000000000000003',
      'o/s1/op',
      'ol/s1/0000000000000002/0000000000000003',
      'x/s1/0000000000000002/m',
      'k/s1/0000000000000000',
      'keys/kid1',
    ]);
  });
});
