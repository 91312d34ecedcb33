// Pins behaviour of src/daemon/streams/operations.ts that no socket test can reach: an
// operations.list cursor's payload is sealed by the daemon, so a client can send only the cursors
// the daemon made or garbage the MAC refuses. In process, on a real LevelDB, this test seals the
// payloads a bug in the daemon (or a cursor of an older format) could produce with the store's own
// codec, and requires operations.list to refuse each as INVALID_PARAMS instead of paging from a
// wrong place. It also pins the cursor's kind label: a cursor a client holds must open after a
// restart or an upgrade, so the label is part of the format.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { YelloError } from '../../src/shared/errors.js';
import { appendMessages, chatWithWriter, openInProcess, type InProcessStore } from '../helpers/in-process-store.js';

let s: InProcessStore;
let w: Awaited<ReturnType<typeof chatWithWriter>>;

beforeAll(async () => {
  s = await openInProcess();
  w = await chatWithWriter(s);
  await appendMessages(s, w, 5);
});
afterAll(async () => {
  await s.close();
});

const list = (cursor: string | undefined, limit = 2) => s.streams.operations(w.alice, w.streamId, cursor, limit);

/** What operations.list answers `cursor` with when it refuses it: the error's type and details. */
async function refusal(cursor: string): Promise<unknown> {
  const err: unknown = await list(cursor).then(
    (page) => new Error(`a page of ${page.operations.length} operations`),
    (e: unknown) => e,
  );
  return err instanceof YelloError ? { type: err.type, details: err.details } : err;
}
const notACursor = { type: 'INVALID_PARAMS', details: { path: 'cursor' } };

describe('operations.list cursors', () => {
  it('continues from a cursor sealed as the daemon seals it: kind "ops", stream/generation/position', async () => {
    const all = await list(undefined, 10);
    expect(all.operations).toHaveLength(5);
    const third = all.operations[2]!;
    const page = await list(s.codec.seal('ops', `${w.streamId}/1/${third.firstPosition}`), 10);
    expect(page.operations.map((o) => o.operationId)).toEqual(all.operations.slice(3).map((o) => o.operationId));
    // Multi-digit numbers parse whole: after generation 12 there is nothing, which is a page, not an error.
    expect(await list(s.codec.seal('ops', `${w.streamId}/12/34`), 10)).toEqual({ operations: [], nextCursor: null });
    // The label is the format: the same payload sealed under another kind is no cursor of operations.list.
    expect(await refusal(s.codec.seal('', `${w.streamId}/1/0`))).toMatchObject(notACursor);
  });

  it.each([
    ['an extra part', (id: string) => `${id}/1/2/3`],
    ['no position', (id: string) => `${id}/1`],
    ['a generation with a prefix', (id: string) => `${id}/x1/2`],
    ['a generation with a suffix', (id: string) => `${id}/1x/2`],
    ['a position with a prefix', (id: string) => `${id}/1/x2`],
    ['a position with a suffix', (id: string) => `${id}/1/2x`],
    ['an empty generation', (id: string) => `${id}//2`],
    ['another stream', (id: string) => `${id}x/1/2`],
  ])('refuses a sealed cursor with %s as INVALID_PARAMS (cursor)', async (_what, payload) => {
    expect(await refusal(s.codec.seal('ops', payload(w.streamId)))).toMatchObject(notACursor);
  });
});
