// The negative index lets appends skip LevelDB point reads that would miss: it must never say
// "certainly absent" for an id that exists (no false negatives), before or after it is built.

import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { ScalableBloom } from '../../src/daemon/store/leveldb/negative-index.js';
import { appendMessages, chatWithWriter, openInProcess, type InProcessStore } from '../helpers/in-process-store.js';
import { waitFor } from '../helpers/wait.js';

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
