// The least-privilege role of docs/multi-host.md: an owner role migrates the schema once, and a
// daemon running as a role with exactly the GRANTs the page lists starts (before migrate.ts
// created schema_migrations only when missing, it exited: `create table if not exists` needs
// CREATE on the schema) and serves agents, chats, a claim, appends, reads and a key rotation.
// The GRANT list below is the page's; a change to one is a change to the other.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonProcess } from '../helpers/daemon-process.js';
import { PgCluster, pgAvailable } from '../helpers/pg-cluster.mjs';
import { StreamWriter } from '../helpers/reading-fixtures.js';
import { createAgent, ok, type Wire } from '../helpers/wire-fixtures.js';

/** docs/multi-host.md, "A least-privilege role". */
export const DAEMON_GRANTS = [
  'grant select on schema_migrations to yello',
  'grant select, insert, update on heads to yello',
  'grant select, insert, delete on records to yello',
  'grant select, insert, delete on operations to yello',
  'grant select, insert, delete on message_ids to yello',
  'grant select, insert, update on agents to yello',
  'grant select, insert on usernames to yello',
  'grant select, insert, delete on tokens to yello',
  'grant select, insert, update, delete on grants to yello',
  'grant select, insert on chats to yello',
  'grant select, insert on pairs to yello',
  'grant select, insert on members to yello',
  'grant select, insert, update on keys to yello',
  'grant select, insert, update, delete on corruption_marks to yello',
  'grant select, insert, update on meta to yello',
];

let cluster: PgCluster | undefined;
let daemon: DaemonProcess | undefined;
let admin: Wire | undefined;

describe.runIf(pgAvailable())('a daemon as the least-privilege role of docs/multi-host.md', () => {
  beforeAll(async () => {
    cluster = await PgCluster.start();
    await cluster.psql('create role yello_owner login');
    await cluster.psql('create role yello login');
    await cluster.psql('create database yello owner yello_owner');
    await cluster.psql('revoke create on schema public from public', 'yello');
    await cluster.psql('grant usage, create on schema public to yello_owner', 'yello');
    await cluster.psql('grant usage on schema public to yello', 'yello');
    const ownerUrl = cluster.url('yello').replace(`${encodeURIComponent(cluster.user)}@`, 'yello_owner@');
    // The owner's first start migrates; then it stops.
    const owner = await DaemonProcess.start({ extraArgs: ['--store', ownerUrl] });
    await owner.cleanup();
    for (const g of DAEMON_GRANTS) await cluster.psql(g, 'yello');
  }, 120_000);
  afterAll(async () => {
    admin?.close();
    await daemon?.cleanup();
    await cluster?.stop();
  }, 60_000);

  it('starts (the schema is current: nothing to migrate) and serves writes and reads', async () => {
    const url = cluster!.url('yello').replace(`${encodeURIComponent(cluster!.user)}@`, 'yello@');
    daemon = await DaemonProcess.start({ extraArgs: ['--store', url, '--policy', 'open'] });
    admin = await daemon.connectAs();
    const alice = await createAgent(admin, daemon.socketPath);
    const bob = await createAgent(admin, daemon.socketPath);
    ok(await admin.call('agents.setPolicy', { agentId: alice.id, pii: 'off' }));
    const chat = ok(await alice.client.call('chats.open', { peerAgentId: bob.id })).chat;
    const w = await StreamWriter.claim(alice.client, `${chat.id}:${alice.id}`);
    await w.send('least', 3);
    const read = ok(await bob.client.call('streams.read', { streamId: `${chat.id}:${alice.id}`, generation: '1', fromPosition: '0' }));
    expect(read.records).toHaveLength(4); // the claim's fence and three messages
    ok(await admin.call('keys.rotate', {}));
    expect(ok(await admin.call('keys.list', {})).keys.length).toBeGreaterThanOrEqual(2);
    alice.client.close();
    bob.client.close();
  }, 60_000);
});
