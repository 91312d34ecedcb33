// Kills a mutant of src/daemon/streams/heads.ts that the fifth mutation round (test/MUTATION.md,
// "mut (fifth round)") found alive against the in-process guards: 92:9 `!meta` → `false` in
// `requireAdmitted` (and 92:38, its `kind`). A stream that does not exist must be NOT_FOUND by
// value (docs/protocol.md: NOT_FOUND names the kind and id), not an internal error from a head
// read as undefined. In-process, on a real LevelDB in a temp dir (test/helpers/in-process-store.ts).

import { afterEach, describe, expect, it } from 'vitest';
import { chatWithWriter, openInProcess, type InProcessStore } from '../helpers/in-process-store.js';

const open: InProcessStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close().catch(() => {});
});

describe('stream heads (heads.ts requireAdmitted)', () => {
  it("an append to the author's stream of a chat that does not exist is NOT_FOUND of that stream, and writes nothing", async () => {
    const s = await openInProcess();
    open.push(s);
    const w = await chatWithWriter(s);
    const author = w.streamId.slice(w.streamId.indexOf(':') + 1);
    const missing = `chat_VVVVVVVVVVVVVVVVVVVVVVVVVV:${author}`;
    const err = await s.streams
      .append(w.alice, {
        streamId: missing,
        coordinatorToken: w.token,
        generation: 1,
        expectedPosition: 1,
        operationId: 'op-nowhere',
        records: [{ type: 'chat.message', messageId: 'x', content: 'x' }],
      })
      .then(
        () => 'appended',
        (e: unknown) => e,
      );
    expect(err).toMatchObject({ type: 'NOT_FOUND', details: { kind: 'stream', id: missing } });
    expect(s.streams.get(w.alice, w.streamId).nextPosition).toBe('1');
  });
});
