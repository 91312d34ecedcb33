// Pins behaviour of src/daemon/streams/receiving-appends.ts that the rest of the suite leaves
// unchecked. ReceivingAppends is what lets `operations.get` answer `pending`, never `unknown`
// ("never committed", docs/protocol.md §6.7), for an append the daemon has read and not yet
// answered. On LevelDB the window it covers is empty (an append is admitted in the turn it is read,
// and the port's operationStatus says pending from then on), so no socket test on LevelDB can see
// it; on PostgreSQL streams.test.ts "never answers unknown …" does. This file pins the bookkeeping
// itself, in-process: no store, nothing mocked.

import { describe, expect, it } from 'vitest';
import { ReceivingAppends } from '../../src/daemon/streams/receiving-appends.js';

/** A promise and the function that settles it, for holding an append "in flight". */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

describe('ReceivingAppends (operations.get says pending for an append being decided)', () => {
  it('counts an operation as received while its append runs, and no longer once it settled', async () => {
    const r = new ReceivingAppends();
    const g = gate();
    const running = r.during('chat:agt_A', 'op-1', async () => {
      await g.wait;
      return 'answer';
    });
    expect(r.has('chat:agt_A', 'op-1')).toBe(true);
    g.open();
    expect(await running).toBe('answer');
    expect(r.has('chat:agt_A', 'op-1')).toBe(false);
  });

  it('an append that fails is no longer received either (operations.get then asks the store)', async () => {
    const r = new ReceivingAppends();
    const failing = r.during('chat:agt_A', 'op-1', async () => {
      await Promise.resolve();
      throw new Error('refused');
    });
    expect(r.has('chat:agt_A', 'op-1')).toBe(true);
    await expect(failing).rejects.toThrow('refused');
    expect(r.has('chat:agt_A', 'op-1')).toBe(false);
  });

  it('the same operationId sent twice at once stays received until the second one settles too', async () => {
    // A client that resends before its first answer (a retry on a new connection) has two
    // appends of one operationId in flight; the first settling must not make the second
    // "unknown".
    const r = new ReceivingAppends();
    const first = gate();
    const second = gate();
    const a = r.during('chat:agt_A', 'op-1', () => first.wait);
    const b = r.during('chat:agt_A', 'op-1', () => second.wait);
    first.open();
    await a;
    expect(r.has('chat:agt_A', 'op-1')).toBe(true);
    second.open();
    await b;
    expect(r.has('chat:agt_A', 'op-1')).toBe(false);
    // And again from zero: the count did not go below it.
    const third = gate();
    const c = r.during('chat:agt_A', 'op-1', () => third.wait);
    expect(r.has('chat:agt_A', 'op-1')).toBe(true);
    third.open();
    await c;
    expect(r.has('chat:agt_A', 'op-1')).toBe(false);
  });

  it('is keyed by stream and operationId: another operation, or the same id in another stream, is not received', async () => {
    // Otherwise operations.get would answer pending for an operationId never sent (the client
    // waits for it forever) whenever some other append is in flight.
    const r = new ReceivingAppends();
    const g = gate();
    const running = r.during('chat:agt_A', 'op-1', () => g.wait);
    expect(r.has('chat:agt_A', 'op-1')).toBe(true);
    expect(r.has('chat:agt_A', 'op-2')).toBe(false);
    expect(r.has('chat:agt_B', 'op-1')).toBe(false);
    g.open();
    await running;
    expect(r.has('chat:agt_A', 'op-1')).toBe(false);
  });
});
