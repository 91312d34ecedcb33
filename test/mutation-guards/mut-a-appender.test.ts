// Kills mutants of src/daemon/streams/appender.ts (`streams.append`, docs/protocol.md §6.6) that
// the mutation run left alive (test/MUTATION.md, "Stream core (mut-a, 2026-12-02)"). Over the
// real socket, against a real daemon; each test names the line it pins.

import { describe, expect, it } from 'vitest';
import { expectError, messages, setupChat } from '../helpers/reading-fixtures.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { createPair, claim, fetchKeys, messageOf, messageProblems, ok, readAll, uniq } from '../helpers/wire-fixtures.js';

const { daemon, admin } = useDaemon();

const recordsCount = async (): Promise<number> => ok(await admin().call('daemon.status', {})).counts.records;

describe('appender (mutation guards)', () => {
  it('an operationId sent again while its first append is still being written replays it (duplicate: true), not POSITION_MISMATCH', async () => {
    // appender.ts append: the replay looks the operation up among the *admitted* writes
    // (`this.#tables.operation(…, true)`). Both requests leave in one write, so the second is
    // admitted while the first waits for its fsync: only the admitted view knows the operation.
    const c = await setupChat(daemon(), admin());
    const operationId = uniq('op-twice');
    const records = messages(uniq('twice'), 2);
    const params = {
      streamId: c.streamA,
      coordinatorToken: c.wa.token,
      generation: c.wa.generation,
      expectedPosition: c.wa.next,
      operationId,
      records,
    };
    const [first, second] = await Promise.all([
      c.alice.client.call('streams.append', params),
      c.alice.client.call('streams.append', params),
    ]);
    const a = ok(first, 'first append');
    const b = ok(second, 'the same append again');
    expect(a.duplicate).toBe(false);
    expect(b.duplicate).toBe(true);
    expect({ ...b, duplicate: false }).toEqual(a);
    expect(ok(await c.alice.client.call('streams.get', { streamId: c.streamA })).nextPosition).toBe(a.nextPosition);
  });

  it('an append without a grant is PERMISSION_DENIED with reason NO_GRANT, and writes nothing', async () => {
    // appender.ts append: `errors.permissionDenied('NO_GRANT', …)` (§3.5 reasons).
    const p = await createPair(admin(), daemon().socketPath, { grants: 'a-to-b' });
    const bc = await claim(p.b.client, p.streamB);
    const r = await p.b.client.call('streams.append', {
      streamId: p.streamB,
      coordinatorToken: bc.coordinatorToken,
      generation: bc.generation,
      expectedPosition: bc.nextPosition,
      operationId: uniq('op'),
      records: messages(uniq('ng'), 1),
    });
    const data = expectError(r, 'PERMISSION_DENIED');
    expect(data).toEqual({ type: 'PERMISSION_DENIED', reason: 'NO_GRANT' });
    expect(ok(await admin().call('streams.get', { streamId: p.streamB })).nextPosition).toBe(bc.nextPosition);
  });

  it('DUPLICATE_MESSAGE names the position of the stored message, also for the third message of a request', async () => {
    // appender.ts append: the message-id index stores `expected + index` for each message.
    const c = await setupChat(daemon(), admin());
    const sent = messages(uniq('idx'), 3);
    const first = await c.wa.append(sent);
    expect(first.firstPosition).toBe('1');
    for (const [index, m] of sent.entries()) {
      const r = await c.wa.tryAppend([m]);
      expect({ code: r.error?.code, data: r.error?.data }, `message ${index}`).toEqual({
        code: 4094,
        data: { type: 'DUPLICATE_MESSAGE', position: String(1 + index) },
      });
    }
  });

  it('daemon.status counts each appended record once (counts.records goes up by the records of the append)', async () => {
    // appender.ts append: `this.#counters.records += p.records.length`.
    const c = await setupChat(daemon(), admin());
    const before = await recordsCount();
    await c.wa.send('count', 3);
    expect(await recordsCount()).toBe(before + 3);
  });

  it('records signed at the end of a busy turn are stored with their signature (the write waits for the signing)', async () => {
    // appender.ts append: the write is handed `Promise.all(signing)` when a signature was
    // deferred (sign-batcher.ts: from the 4th signature of a turn on), so no record is stored
    // before its signature value is set. What is pinned: every stored message verifies and
    // carries the signature its append answered. (The mutant `signing.length > 0` → `false`
    // survives this test: the batcher's end-of-turn signing is scheduled before the storage's
    // group cut in every run seen; test/MUTATION.md, mut-a section.)
    const chats = await Promise.all([0, 1, 2, 3].map(() => setupChat(daemon(), admin())));
    const writers = chats.flatMap((c) => [c.wa, c.wb]);
    const rounds = 16;
    const answered = new Map<string, string>();
    // Each writer pipelines all its appends at once (positions known in advance): requests keep
    // arriving while earlier groups are synced, which is when a group could be cut and encoded
    // before the end-of-turn signing of an append admitted in the same loop iteration.
    const results = await Promise.all(
      writers.flatMap((w) =>
        Array.from({ length: rounds }, (_, round) =>
          w.client.call('streams.append', {
            streamId: w.streamId,
            coordinatorToken: w.token,
            generation: w.generation,
            expectedPosition: String(Number(w.next) + 8 * round),
            operationId: uniq('op-busy'),
            records: messages(uniq(`busy${round}`), 8),
          }),
        ),
      ),
    );
    for (const r of results)
      for (const rec of ok(r, 'pipelined append').records) answered.set(`${rec.streamId}#${rec.position}`, messageOf(rec).signature.value);
    const keys = await fetchKeys(admin());
    let checked = 0;
    for (const w of writers) {
      for (const rec of await readAll(admin(), w.streamId)) {
        if (rec.wrapper.type !== 'chat.message') continue;
        const m = messageOf(rec);
        expect(m.signature.value, `${rec.streamId}#${rec.position}`).not.toBe('');
        expect(messageProblems(m, keys), `${rec.streamId}#${rec.position}`).toEqual([]);
        expect(m.signature.value).toBe(answered.get(`${rec.streamId}#${rec.position}`));
        checked++;
      }
    }
    expect(checked).toBe(writers.length * rounds * 8);
  });
});
