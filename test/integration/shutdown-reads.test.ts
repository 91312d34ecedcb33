// Shutdown is not corruption (docs/protocol.md §2.6, §3.5; issue 20 finding 3): reads in flight
// when SIGTERM arrives, and reads arriving while the daemon stops, are answered
// STORAGE_FAILURE/SHUTTING_DOWN (transient, outcome null) or see the connection close — never
// STORAGE_FAILURE/CORRUPT, and never a corruption mark that `daemon.status` or `yello doctor`
// would then list. Before the fix, 10 of 12 such errors were CORRUPT (LEVEL_DATABASE_NOT_OPEN
// taken for a damaged value).

import { describe, expect, it } from 'vitest';
import { ConnectionLostError, StorageFailureError, YelloClient, YelloClientError } from '../../src/client/index.js';
import { ok, setupChat } from '../helpers/reading-fixtures.js';
import { testStoreIsPostgres } from '../helpers/test-store.js';
import { waitFor } from '../helpers/wait.js';
import { useDaemon } from '../helpers/use-daemon.js';
import type { Wire, WireError } from '../helpers/wire-fixtures.js';

const { daemon, admin, restart } = useDaemon();

const ROUNDS = 20;
const READERS = 4;
/** Requests each reader keeps in flight, so some are always inside the store when it closes. */
const IN_FLIGHT = 4;

interface Loop {
  calls: number;
  errors: WireError[];
  done: Promise<void>;
}

/** Calls `next()`'s request on `c` back to back, IN_FLIGHT at a time, until the connection closes. */
function loop(c: Wire, next: (i: number) => [string, unknown]): Loop {
  const state: Loop = { calls: 0, errors: [], done: Promise.resolve() };
  const one = async (): Promise<void> => {
    for (;;) {
      const [method, params] = next(state.calls);
      let r;
      try {
        r = await c.call(method, params, 20_000);
      } catch (err) {
        // The connection closed: an answer the contract allows. Anything else fails the test.
        if ((err as Error).message === 'connection closed') return;
        throw err;
      }
      state.calls++;
      if (r.error) state.errors.push(r.error);
    }
  };
  state.done = Promise.all(Array.from({ length: IN_FLIGHT }, one)).then(() => {});
  return state;
}

describe('SIGTERM under load', () => {
  it(`${ROUNDS} rounds with ${READERS} looping readers: no CORRUPT, every error SHUTTING_DOWN, and no mark`, async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('history', 40);
    await c.wb.send('replies', 40);
    const errors: WireError[] = [];
    let calls = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const readers = await Promise.all(
        Array.from({ length: READERS }, (_, i) => daemon().connectAs(i % 2 === 0 ? c.bob.token : c.alice.token)),
      );
      const loops = readers.map((r, i) =>
        loop(r, (n): [string, unknown] => {
          switch ((n + i) % 3) {
            case 0:
              return ['chats.history', { chatId: c.chatId, limit: 50 }];
            case 1:
              return ['chats.get', { chatId: c.chatId }];
            default:
              return ['streams.read', { streamId: c.streamA, generation: '1', fromPosition: '0' }];
          }
        }),
      );
      await waitFor(() => loops.every((l) => l.calls >= 10), 'every reader looping', 20_000);
      expect(await daemon().stop(), 'the daemon stops cleanly').toBe(0);
      await Promise.all(loops.map((l) => l.done));
      for (const l of loops) {
        errors.push(...l.errors);
        calls += l.calls;
      }
      await restart();
    }
    const kinds = errors.map((e) => `${String(e.data?.type)}/${String(e.data?.reason)}/${String(e.data?.outcome)}`);
    const counts: Record<string, number> = {};
    for (const k of kinds) counts[k] = (counts[k] ?? 0) + 1;
    // The figures of a run, for the report (not an assertion).
    console.log(`shutdown-reads: ${calls} calls, ${errors.length} errors: ${JSON.stringify(counts)}`);
    expect(calls).toBeGreaterThan(ROUNDS * READERS * 10);
    expect(kinds.filter((k) => k.includes('CORRUPT')).length, `no CORRUPT answers: ${JSON.stringify(counts)}`).toBe(0);
    expect(new Set(kinds), 'every error is STORAGE_FAILURE/SHUTTING_DOWN with outcome null').toEqual(
      new Set(kinds.length > 0 ? ['STORAGE_FAILURE/SHUTTING_DOWN/null'] : []),
    );
    for (const e of errors) expect(e.code).toBe(5030);
    // Nothing was marked: not in daemon.status, not by a full check.
    const status = ok(await admin().call('daemon.status', {}));
    expect(status.integrity.corruptStreams).toEqual([]);
    // daemon.check scans LevelDB; PostgreSQL refuses it (UNSUPPORTED) and checks every head at
    // start and first use, so there the status above and the whole history below are the check.
    const checked = await admin().call('daemon.check', { mark: false }, 60_000);
    if (testStoreIsPostgres()) {
      expect(checked.error?.data).toMatchObject({ type: 'STORAGE_FAILURE', reason: 'UNSUPPORTED' });
    } else {
      const doctor = ok(checked);
      expect(doctor.problems).toEqual([]);
      expect(doctor.corruptStreams).toEqual([]);
    }
    // The chat is whole and readable.
    const bob = await daemon().connectAs(c.bob.token);
    expect(ok(await bob.call('chats.history', { chatId: c.chatId, limit: 100 })).entries).toHaveLength(80);
  }, 240_000);

  it('the client library calls SHUTTING_DOWN transient (StorageFailureError.transient), like a lost connection', async () => {
    const c = await setupChat(daemon(), admin());
    await c.wa.send('history', 20);
    const seen: YelloClientError[] = [];
    for (let round = 0; round < 5; round++) {
      const client = await YelloClient.connect({ socketPath: daemon().socketPath, token: c.bob.token });
      let calls = 0;
      const one = async (): Promise<void> => {
        for (;;) {
          try {
            await client.rpc.chats.history({ chatId: c.chatId, limit: 50 });
            calls++;
          } catch (err) {
            if (!(err instanceof YelloClientError)) throw err;
            seen.push(err);
            if (err instanceof ConnectionLostError) return;
          }
        }
      };
      const loops = Array.from({ length: IN_FLIGHT }, one);
      await waitFor(() => calls >= 10, 'the client looping', 20_000);
      expect(await daemon().stop()).toBe(0);
      await Promise.all(loops);
      client.close();
      await restart();
    }
    const shutting = seen.filter((e) => e instanceof StorageFailureError);
    expect(shutting.length, 'some reads met the store closing').toBeGreaterThan(0);
    for (const e of shutting)
      expect({ reason: e.data.reason, transient: e.transient }).toEqual({ reason: 'SHUTTING_DOWN', transient: true });
    for (const e of seen) expect(e.transient, `${e.type}: ${e.message}`).toBe(true);
  }, 120_000);
});
