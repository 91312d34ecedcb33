// The doctor's record/operation check against trimmed prefixes (docs/protocol.md §6.3, §6.6):
// a trim may cut an operation in two, leaving records 1.. of it at the retained start. That is
// a healthy stream, and `daemon.check` must say so at every trim position of every operation
// shape; a record removed above the retained start is still found.

import { randomBytes } from 'node:crypto';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Signer } from '../../src/daemon/crypto/signer.js';
import { K } from '../../src/daemon/store/leveldb/key-layout.js';
import { checkStore } from '../../src/daemon/store/leveldb/doctor.js';
import { chatWithWriter, openInProcess, type InProcessStore } from '../helpers/in-process-store.js';

/** Append one operation per entry of `shape`, each of that many messages; returns the head. */
async function appendShape(s: InProcessStore, w: Awaited<ReturnType<typeof chatWithWriter>>, shape: number[]): Promise<number> {
  let i = 0;
  for (const size of shape) {
    const head = s.streams.get(w.alice, w.streamId);
    await s.streams.append(w.alice, {
      streamId: w.streamId,
      coordinatorToken: w.token,
      generation: Number(head.generation),
      expectedPosition: Number(head.nextPosition),
      operationId: `op-${i}-${randomBytes(3).toString('hex')}`,
      records: Array.from({ length: size }, (_, k) => ({
        type: 'chat.message' as const,
        messageId: `m-${i}-${k}`,
        content: `m ${i} ${k}`,
      })),
    });
    i++;
  }
  return Number(s.streams.get(w.alice, w.streamId).nextPosition);
}

async function doctor(s: InProcessStore, mark = false) {
  return checkStore(s.store.storage, s.integrity, new Signer(path.join(s.dir, 'keys')), { mark });
}

const shapes = fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 4 });

describe('doctor and trimmed prefixes', () => {
  it('one operation of 3 records (positions 1–3), trimmed before 3: no problem, no mark', async () => {
    const s = await openInProcess();
    try {
      const w = await chatWithWriter(s);
      expect(await appendShape(s, w, [3])).toBe(4);
      await s.streams.trim(w.streamId, 3, true);
      const report = await doctor(s, true);
      expect(report.problems).toEqual([]);
      expect(s.integrity.list()).toEqual([]);
    } finally {
      await s.close();
    }
  });

  it('finds no problem at any trim position of any operation shape', async () => {
    await fc.assert(
      fc.asyncProperty(shapes, async (shape) => {
        const s = await openInProcess();
        try {
          const w = await chatWithWriter(s);
          const head = await appendShape(s, w, shape);
          // Trim forward one position at a time, so one store covers every cut of this shape.
          for (let at = 1; at <= head; at++) {
            await s.streams.trim(w.streamId, at, true);
            const report = await doctor(s);
            expect(report.problems, `shape ${JSON.stringify(shape)} trimmed before ${at}`).toEqual([]);
          }
        } finally {
          await s.close();
        }
      }),
      { numRuns: 20 },
    );
  }, 120_000);

  it('finds a record removed above the retained start, at every trim position', async () => {
    await fc.assert(
      fc.asyncProperty(shapes, fc.nat(), fc.nat(), async (shape, cutSeed, holeSeed) => {
        const s = await openInProcess();
        try {
          const w = await chatWithWriter(s);
          const head = await appendShape(s, w, shape);
          // Retained start `cut` (0 = untrimmed), then a hole at `cut < hole < head - 1`... or the last one.
          const cut = cutSeed % head;
          if (cut > 0) await s.streams.trim(w.streamId, cut, true);
          const hole = cut + (holeSeed % (head - cut));
          const generation = Number(s.streams.get(w.alice, w.streamId).generation);
          await s.store.storage.write([{ type: 'del', key: K.record(w.streamId, generation, hole) }]);
          const report = await doctor(s);
          expect(
            report.problems.some((p) => p.streamId === w.streamId),
            `shape ${JSON.stringify(shape)}, trimmed before ${cut}, record ${hole} removed: ${JSON.stringify(report.problems)}`,
          ).toBe(true);
        } finally {
          await s.close();
        }
      }),
      { numRuns: 30 },
    );
  }, 120_000);
});
