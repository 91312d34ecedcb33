// The keys a stored value's checksum covers are one definition for both engines
// (src/daemon/store/stream-keys.ts, directory-keys.ts): LevelDB's K and PostgreSQL's RowKey give
// the same key for the same value, and the format itself is pinned (every stored checksum depends
// on it: a changed string turns every stored value of that kind into CORRUPT).
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

describe('directory value keys', () => {
  it('LevelDB and PostgreSQL bind a value to the same key', () => {
    expect(RowKey.agent('agt_1')).toBe(K.agent('agt_1'));
    expect(RowKey.username('alice')).toBe(K.username('alice'));
    expect(RowKey.token('th')).toBe(K.token('th'));
    expect(RowKey.grant('agt_1', 'agt_2')).toBe(K.grant('agt_1', 'agt_2'));
    expect(RowKey.chat('cht_1')).toBe(K.chat('cht_1'));
    expect(RowKey.pair('agt_1', 'agt_2')).toBe(K.pair('agt_1', 'agt_2'));
    expect(RowKey.member('agt_1', 'cht_1')).toBe(K.member('agt_1', 'cht_1'));
  });

  it('keeps the stored format, and the LevelDB prefixes that page them', () => {
    expect([
      K.agent('agt_1'),
      K.username('alice'),
      K.token('th'),
      K.grant('agt_1', 'agt_2'),
      K.chat('cht_1'),
      K.pair('agt_1', 'agt_2'),
      K.member('agt_1', 'cht_1'),
      K.agentsPrefix,
      K.grantsPrefix(),
      K.grantsPrefix('agt_1'),
      K.chatsPrefix,
      K.membersPrefix('agt_1'),
    ]).toEqual([
      'a/agt_1',
      'u/alice',
      't/th',
      'g/agt_1/agt_2',
      'c/cht_1',
      'p/agt_1/agt_2',
      'm/agt_1/cht_1',
      'a/',
      'g/',
      'g/agt_1/',
      'c/',
      'm/agt_1/',
    ]);
  });
});
