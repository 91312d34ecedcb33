// The daemon fixture of the client-library tests: useDaemon with a YelloClient as the admin, and
// the coordinators and clients a test opens, stopped and closed after each test.

import { afterEach } from 'vitest';
import type { Coordinator, YelloClient } from '../../src/client/index.js';
import { connectAdmin } from './client-fixtures.js';
import type { DaemonProcess } from './daemon-process.js';
import { useDaemon } from './use-daemon.js';

export interface ClientDaemonFixture {
  daemon(): DaemonProcess;
  admin(): YelloClient;
  /** Push what a test starts: stopped after each test. */
  coordinators: Coordinator[];
  /** Push what a test connects: closed after each test. */
  clients: YelloClient[];
}

/**
 * A daemon for the file, its admin as a YelloClient (with `reconnect` options when a test
 * restarts the daemon; `process: true` for a daemon the tests SIGKILL or freeze), and per-test cleanup of coordinators and clients. vitest runs after-hooks
 * last-registered first, so an `afterEach` the file registers after this call (e.g. a restart
 * when a test left the daemon stopped) runs before the coordinators are stopped.
 */
export function useClientDaemon(
  options: { reconnect?: { minDelayMs?: number; maxDelayMs?: number }; process?: boolean } = {},
): ClientDaemonFixture {
  // The client tests' daemon, as startDaemon() makes it: open policy, so chats need no grants.
  const { process, ...connect } = options;
  const fixture = useDaemon({ extraArgs: ['--policy', 'open'], ...(process ? { process } : {}) }, (d) => connectAdmin(d, connect));
  const coordinators: Coordinator[] = [];
  const clients: YelloClient[] = [];
  afterEach(async () => {
    for (const c of coordinators.splice(0)) await c.stop().catch(() => undefined);
    for (const c of clients.splice(0)) c.close();
  });
  return { daemon: fixture.daemon, admin: fixture.admin, coordinators, clients };
}
