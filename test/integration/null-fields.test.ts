// docs/protocol.md §4: optional values that are unset are sent as null, never left out.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { setupChat } from '../helpers/reading-fixtures.js';
import { ok } from '../helpers/rpc-line-client.js';

let d: DaemonProcess;
beforeAll(async () => {
  d = await DaemonProcess.start();
});
afterAll(async () => {
  await d?.cleanup();
});

describe('unset values are null, not missing', () => {
  it('session.hello of the admin has agentId: null', async () => {
    const c = await d.connect();
    const r = ok(await c.hello(d.adminToken));
    expect(Object.hasOwn(r, 'agentId')).toBe(true);
    expect(r.agentId).toBeNull();
  });

  it('operations.get of an operation that never committed has every optional field as null', async () => {
    const admin = await d.connectAs();
    const chat = await setupChat(d, admin);
    const r = ok(await chat.alice.client.call('operations.get', { streamId: chat.streamA, operationId: 'op-never-sent' }));
    expect(r).toEqual({ operationId: 'op-never-sent', state: 'unknown', generation: null, firstPosition: null, nextPosition: null, committedAt: null, requestDigest: null });
  });
});
