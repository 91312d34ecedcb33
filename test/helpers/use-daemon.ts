// The one way a test file (or a describe block) gets a real daemon: `useDaemon()` registers the
// beforeAll that starts it and connects an admin, and the afterAll that closes that connection,
// stops the daemon and removes its temp dir, and returns getters to use inside hooks and tests.
//
//   const { daemon, admin } = useDaemon({ extraArgs: ['--policy', 'open'] });
//   it('…', async () => { ok(await admin().call('daemon.status', {})); daemon().socketPath; });
//
// `useCli()` adds the `yello` CLI bound to that daemon, for the CLI tests.

import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { Cli, writeTokenFile, type AgentCli, type LongRunningCli } from './cli-runner.js';
import { DaemonProcess, type DaemonOptions } from './daemon-process.js';
import { createPair, ok, uniq, type TestPair, type Wire } from './wire-fixtures.js';

/** What an admin connection needs for the fixture to close it. */
interface Closable {
  close(): void;
}

export interface DaemonFixture<A extends Closable> {
  /** The running daemon (inside hooks and tests only: it starts in beforeAll). */
  daemon(): DaemonProcess;
  /** The admin connection made in beforeAll (and again by restart()). */
  admin(): A;
  /** Restarts the daemon on the same socket and data dir, then connects the admin again. */
  restart(): Promise<void>;
}

/**
 * Starts one daemon for the enclosing file or describe block. The admin is a raw wire
 * connection unless `connectAdmin` makes another kind (client tests pass a YelloClient's).
 */
export function useDaemon(options?: DaemonOptions): DaemonFixture<Wire>;
export function useDaemon<A extends Closable>(options: DaemonOptions, connectAdmin: (d: DaemonProcess) => Promise<A>): DaemonFixture<A>;
export function useDaemon<A extends Closable>(
  options: DaemonOptions = {},
  connectAdmin?: (d: DaemonProcess) => Promise<A>,
): DaemonFixture<A | Wire> {
  let d: DaemonProcess | undefined;
  let a: A | Wire | undefined;
  const connect = (x: DaemonProcess): Promise<A | Wire> => (connectAdmin ? connectAdmin(x) : x.connectAs());
  beforeAll(async () => {
    d = await DaemonProcess.start(options);
    a = await connect(d);
  });
  afterAll(async () => {
    a?.close();
    await d?.cleanup();
  });
  const started = (): DaemonProcess => {
    if (!d) throw new Error('useDaemon: the daemon exists only inside hooks and tests (it starts in beforeAll)');
    return d;
  };
  return {
    daemon: started,
    admin: () => {
      if (!a) throw new Error('useDaemon: the admin connection exists only inside hooks and tests');
      return a;
    },
    restart: async () => {
      a?.close();
      await started().restart();
      a = await connect(started());
    },
  };
}

/** Two agents of a CLI test: their wire pair, and the CLI acting as each. */
export type CliPair = TestPair & { alice: AgentCli; bob: AgentCli };

export interface CliFixture extends DaemonFixture<Wire> {
  /** `yello` bound to the daemon, its writer claims under the test's own $XDG_STATE_HOME. */
  cli(): Cli;
  /** A long-running CLI (`chats follow`) that afterAll kills if the test did not stop it. */
  track(r: LongRunningCli): LongRunningCli;
  /** A fresh pair with grants both ways, their chat, and token files for the CLI. */
  pair(): Promise<CliPair>;
  /**
   * Agents with the usernames `alice` and `bob` (what a user types: `chats open bob`), granted
   * both ways, and the CLI acting as each. Once per daemon: usernames are unique.
   */
  namedAgents(): Promise<NamedAgents>;
}

/** See CliFixture.namedAgents. */
export interface NamedAgents {
  alice: AgentCli;
  bob: AgentCli;
  aliceId: string;
  bobId: string;
}

/** A daemon (see useDaemon) and the `yello` CLI bound to it. */
export function useCli(options: DaemonOptions = {}): CliFixture {
  const fixture = useDaemon(options);
  const running: LongRunningCli[] = [];
  let cli: { for: DaemonProcess; cli: Cli } | undefined;
  // Registered after useDaemon's: runs before the daemon goes away.
  afterAll(async () => {
    for (const r of running.splice(0)) await r.kill();
  });
  const cliOf = (): Cli => {
    const d = fixture.daemon();
    if (cli?.for !== d) cli = { for: d, cli: new Cli(d.socketPath, d.dataDir, { XDG_STATE_HOME: path.join(d.dir, 'state') }) };
    return cli.cli;
  };
  return {
    ...fixture,
    cli: cliOf,
    track: (r) => {
      running.push(r);
      return r;
    },
    pair: async () => {
      const d = fixture.daemon();
      const p = await createPair(fixture.admin(), d.socketPath);
      return {
        ...p,
        alice: cliOf().as(writeTokenFile(d.dir, uniq('alice'), p.a.token)),
        bob: cliOf().as(writeTokenFile(d.dir, uniq('bob'), p.b.token)),
      };
    },
    namedAgents: async () => {
      const d = fixture.daemon();
      const admin = fixture.admin();
      const a = ok(await admin.call('agents.create', { username: 'alice', name: 'Alice' }));
      const b = ok(await admin.call('agents.create', { username: 'bob', name: 'Bob' }));
      ok(await admin.call('grants.add', { agentId: a.agent.id, peerAgentId: b.agent.id }));
      ok(await admin.call('grants.add', { agentId: b.agent.id, peerAgentId: a.agent.id }));
      return {
        alice: cliOf().as(writeTokenFile(d.dir, 'alice', a.token)),
        bob: cliOf().as(writeTokenFile(d.dir, 'bob', b.token)),
        aliceId: a.agent.id,
        bobId: b.agent.id,
      };
    },
  };
}
