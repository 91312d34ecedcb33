// docs/protocol.md §4: optional values that are unset are sent as null, never left out.

import { describe, expect, it } from 'vitest';
import { setupChat } from '../helpers/reading-fixtures.js';
import { useDaemon } from '../helpers/use-daemon.js';
import { ok } from '../helpers/wire-fixtures.js';

const { daemon, admin } = useDaemon();

describe('unset values are null, not missing', () => {
  it('session.hello of the admin has agentId: null', async () => {
    const c = await daemon().connect();
    const r = ok(await c.hello(daemon().adminToken));
    expect(Object.hasOwn(r, 'agentId')).toBe(true);
    expect(r.agentId).toBeNull();
  });

  it('operations.get of an operation that never committed has every optional field as null', async () => {
    const chat = await setupChat(daemon(), admin());
    const r = ok(await chat.alice.client.call('operations.get', { streamId: chat.streamA, operationId: 'op-never-sent' }));
    expect(r).toEqual({
      operationId: 'op-never-sent',
      state: 'unknown',
      generation: null,
      firstPosition: null,
      nextPosition: null,
      committedAt: null,
      requestDigest: null,
    });
  });
});
