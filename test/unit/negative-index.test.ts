// The negative index lets appends skip LevelDB point reads that would miss: it must never say
// "certainly absent" for an id that exists (no false negatives), before or after it is built.

import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { ScalableBloom, NegativeIndexes, StreamNegativeIndex } from '../../src/daemon/store/leveldb/negative-index.js';
import { appendMessages, chatWithWriter, openInProcess, type InProcessStore } from '../helpers/in-process-store.js';
import { waitFor } from '../helpers/wait.js';
import { K, prefixEnd } from '../../src/daemon/store/leveldb/key-layout.js';

const open: InProcessStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close().catch(() => {});
});

describe('ScalableBloom', () => {
  it('never forgets an added string, across growth (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: 'binary', maxLength: 40 }), { maxLength: 2000 }),
        fc.integer({ min: 1, max: 64 }),
        (values, capacity) => {
          const bloom = new ScalableBloom(capacity);
          for (const v of values) bloom.add(v);
          return values.every((v) => bloom.mightHave(v));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('keeps false positives rare (under 2 %) as it grows', () => {
    const bloom = new ScalableBloom(64);
    for (let i = 0; i < 20_000; i++) bloom.add(`op-${i}`);
    let fp = 0;
    for (let i = 0; i < 20_000; i++) if (bloom.mightHave(`other-${i}`)) fp++;
    expect(fp / 20_000).toBeLessThan(0.02);
  });
});

describe('appends with the negative index', () => {
  it('still replays a committed operation and refuses a duplicate message after a restart, once the index is built', async () => {
    let s = await openInProcess();
    const w = await chatWithWriter(s);
    await appendMessages(s, w, 50, 'n');
    const ops = await s.streams.operations(w.alice, w.streamId, undefined, 100);
    const first = ops.operations[0]!;
    const dir = s.dir;
    await s.store.storage.close();
    s = await openInProcess(dir);
    open.push(s);
    const head = s.streams.get(w.alice, w.streamId);
    // A fresh append builds the index; then probe ids that exist.
    await s.streams.append(w.alice, {
      streamId: w.streamId,
      coordinatorToken: w.token,
      generation: 1,
      expectedPosition: Number(head.nextPosition),
      operationId: 'op-fresh',
      records: [{ type: 'chat.message', messageId: 'fresh', content: 'fresh' }],
    });
    await waitFor(() => s.port.streams.negativeIndexReady(w.streamId), 'the index to be built', 5_000);
    const replay = await s.streams.append(w.alice, {
      streamId: w.streamId,
      coordinatorToken: w.token,
      generation: 1,
      expectedPosition: Number(first.firstPosition!),
      operationId: first.operationId,
      records: [{ type: 'chat.message', messageId: 'n-0', content: 'n 0' }],
    });
    expect(replay.duplicate).toBe(true);
    const next = s.streams.get(w.alice, w.streamId).nextPosition;
    await expect(
      s.streams.append(w.alice, {
        streamId: w.streamId,
        coordinatorToken: w.token,
        generation: 1,
        expectedPosition: Number(next),
        operationId: 'op-dup-msg',
        records: [{ type: 'chat.message', messageId: 'n-7', content: 'again' }],
      }),
    ).rejects.toMatchObject({ type: 'DUPLICATE_MESSAGE' });
  });
});

// Pins behaviour of src/daemon/streams/negative-index.ts. The filter itself is pure; the per-stream
// index is built over a real LevelDB in a temp dir (test/helpers/in-process-store.ts).
// test/unit/negative-index.test.ts holds the no-false-negative property and the false-positive
// bound.
describe('the negative index: filter sizes, per-stream filters, the indexes over a real store', () => {
  const open: InProcessStore[] = [];
  afterEach(async () => {
    for (const s of open.splice(0)) await s.close().catch(() => {});
  });

  describe('ScalableBloom sizes', () => {
    it('starts with 14 bits per element of its capacity (at least 64 bits) and grows fourfold when full', () => {
      // 256 × 14 = 3584 bits = 112 words = 448 bytes.
      const bloom = new ScalableBloom();
      expect(bloom.bytes).toBe(448);
      for (let i = 0; i < 256; i++) bloom.add(`v${i}`);
      expect(bloom.bytes).toBe(448);
      bloom.add('the 257th'); // a 1024-element filter: 14336 bits = 448 words = 1792 bytes
      expect(bloom.bytes).toBe(448 + 1792);
      const tiny = new ScalableBloom(1);
      expect(tiny.bytes).toBe(8); // 14 bits, raised to 64: two words
      tiny.add('a');
      expect(tiny.bytes).toBe(8);
      tiny.add('b'); // full at 1: next filter holds 4, 56 bits raised to 64
      expect(tiny.bytes).toBe(16);
      for (const v of ['c', 'd', 'e']) tiny.add(v);
      expect(tiny.bytes).toBe(16);
      tiny.add('f'); // 16 elements: 224 bits = 7 words
      expect(tiny.bytes).toBe(16 + 28);
      for (const v of ['a', 'b', 'c', 'd', 'e', 'f']) expect(tiny.mightHave(v)).toBe(true);
    });

    it('answers false for strings never added, in every filter (an empty filter has no bit set)', () => {
      const bloom = new ScalableBloom(4);
      const probes = Array.from({ length: 200 }, (_, i) => `never-${i}`);
      expect(probes.filter((p) => bloom.mightHave(p))).toEqual([]);
      for (let i = 0; i < 40; i++) bloom.add(`added-${i}`); // three filters
      const fp = probes.filter((p) => bloom.mightHave(p)).length;
      expect(fp).toBeLessThan(10);
      for (let i = 0; i < 40; i++) expect(bloom.mightHave(`added-${i}`)).toBe(true);
    });

    it('one string sets at most 7 bits: a 64-bit filter with one string rejects most others', () => {
      const bloom = new ScalableBloom(1);
      bloom.add('only');
      const probes = Array.from({ length: 500 }, (_, i) => `p${i}`);
      // With at most 7 of 64 bits set, a probe passes rarely (double hashing makes the 7 bits of
      // one string correlated, so not as rarely as (7/64)^7); a filter with every bit set passes all.
      expect(probes.filter((p) => bloom.mightHave(p)).length).toBeLessThanOrEqual(5);
    });
  });

  describe('StreamNegativeIndex', () => {
    it('until ready, everything may exist; once ready, only what was added', () => {
      const index = new StreamNegativeIndex();
      expect(index.ready).toBe(false);
      expect(index.mayHaveOperation('op-x')).toBe(true);
      expect(index.mayHaveMessage(1, 'm-x')).toBe(true);
      index.operations.add('op-a');
      index.messages(1).add('m-a');
      index.ready = true;
      expect(index.mayHaveOperation('op-a')).toBe(true);
      expect(index.mayHaveOperation('op-x')).toBe(false);
      expect(index.mayHaveMessage(1, 'm-a')).toBe(true);
      expect(index.mayHaveMessage(1, 'm-x')).toBe(false);
      // Message ids are per generation.
      expect(index.mayHaveMessage(2, 'm-a')).toBe(false);
      expect(index.messages(1)).toBe(index.messages(1));
      expect(index.messages(2)).not.toBe(index.messages(1));
    });
  });

  describe('NegativeIndexes over a real store', () => {
    it('builds a stream’s index from its stored operation and message-id keys, once per stream', async () => {
      const s = await openInProcess();
      open.push(s);
      const w = await chatWithWriter(s);
      await appendMessages(s, w, 5, 'built');
      const meta = s.streams.committedMeta(w.streamId)!;
      const indexes = new NegativeIndexes(s.store.storage);
      expect(indexes.ready(w.streamId)).toBe(false);
      const index = indexes.of(meta);
      expect(indexes.of(meta)).toBe(index);
      await waitFor(() => indexes.ready(w.streamId), 'the index to be built', 5_000);
      expect(index.ready).toBe(true);
      const suffixes = async (prefix: string) => {
        const out: string[] = [];
        for await (const key of s.store.storage.keys({ gte: prefix, lt: prefixEnd(prefix) })) out.push(key.slice(prefix.length));
        return out;
      };
      const ops = await suffixes(K.operationsPrefix(w.streamId));
      const ids = await suffixes(K.messageIdsPrefix(w.streamId, 1));
      expect(ops.length).toBeGreaterThanOrEqual(5);
      expect(ids).toHaveLength(5);
      for (const op of ops) expect(index.mayHaveOperation(op)).toBe(true);
      for (const id of ids) expect(index.mayHaveMessage(1, id)).toBe(true);
      // Built from the keys with their prefixes cut off: the full keys are not in it.
      expect(index.mayHaveOperation(`${K.operationsPrefix(w.streamId)}${ops[0]}`)).toBe(false);
      expect(index.mayHaveMessage(1, `${K.messageIdsPrefix(w.streamId, 1)}${ids[0]}`)).toBe(false);
      expect(index.mayHaveOperation('op-never-used')).toBe(false);
      expect(index.mayHaveMessage(1, 'never-sent')).toBe(false);
      // Operations and message ids are kept apart.
      expect(index.mayHaveMessage(1, ops[0]!)).toBe(false);
      expect(index.mayHaveOperation(ids[0]!)).toBe(false);
      // Another stream has its own index, not ready until its scan ran.
      const bobStream = `${w.chatId}:${(w.bob as { agentId: string }).agentId}`;
      expect(indexes.ready(bobStream)).toBe(false);
    });

    it('holds only its own stream’s ids: the other stream of the chat (same key lengths) is not in it', async () => {
      const s = await openInProcess();
      open.push(s);
      const w = await chatWithWriter(s);
      await appendMessages(s, w, 2, 'alice');
      const bobStream = `${w.chatId}:${(w.bob as { agentId: string }).agentId}`;
      expect(bobStream.length).toBe(w.streamId.length);
      const claim = await s.streams.claim(w.bob, { streamId: bobStream, replace: false });
      await appendMessages(s, { alice: w.bob, streamId: bobStream, token: claim.coordinatorToken }, 3, 'bob');
      const suffixes = async (prefix: string) => {
        const out: string[] = [];
        for await (const key of s.store.storage.keys({ gte: prefix, lt: prefixEnd(prefix) })) out.push(key.slice(prefix.length));
        return out;
      };
      const bobOps = await suffixes(K.operationsPrefix(bobStream));
      const bobIds = await suffixes(K.messageIdsPrefix(bobStream, 1));
      expect(bobIds).toHaveLength(3);
      const indexes = new NegativeIndexes(s.store.storage);
      const index = indexes.of(s.streams.committedMeta(w.streamId)!);
      await waitFor(() => indexes.ready(w.streamId), 'the index to be built', 5_000);
      for (const op of bobOps) expect(index.mayHaveOperation(op)).toBe(false);
      for (const id of bobIds) expect(index.mayHaveMessage(1, id)).toBe(false);
      for (const id of await suffixes(K.messageIdsPrefix(w.streamId, 1))) expect(index.mayHaveMessage(1, id)).toBe(true);
    });

    it('drops every index when the store fails: the next use builds a new one', async () => {
      let fail = false;
      const s = await openInProcess(undefined, { injectFailure: () => fail });
      open.push(s);
      const w = await chatWithWriter(s);
      await appendMessages(s, w, 2);
      const meta = s.streams.committedMeta(w.streamId)!;
      const indexes = new NegativeIndexes(s.store.storage);
      const index = indexes.of(meta);
      await waitFor(() => indexes.ready(w.streamId), 'the index to be built', 5_000);
      fail = true;
      await appendMessages(s, w, 1, 'fails').catch(() => undefined);
      await waitFor(() => !indexes.ready(w.streamId), 'the index to be dropped', 5_000);
      expect(indexes.of(meta)).not.toBe(index);
    });
  });
});
