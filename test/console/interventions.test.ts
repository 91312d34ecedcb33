// The overview's "needs a person" list and every intervention, over plain HTTP against a real
// daemon: each form does what its CLI equivalent does, destructive ones only with their typed
// confirmation, and the export is one that `yello verify` accepts.

import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { expectExit } from '../helpers/cli-runner.js';
import { useCli, type NamedAgents } from '../helpers/use-daemon.js';
import { connectAs, ok } from '../helpers/wire-fixtures.js';
import { http, startConsole, type ConsoleProcess } from './console-fixture.js';

const { cli, track, admin, daemon, namedAgents } = useCli();

let c: ConsoleProcess;
let cookie: string;
let csrf: string;
let agents: NamedAgents;
let chatId: string;
let streamA: string;

beforeAll(async () => {
  agents = await namedAgents();
  chatId = (await agents.alice.ok(['chats', 'open', 'bob'])).stdout.trim();
  streamA = `${chatId}:${agents.aliceId}`;
  for (const text of ['one', 'two', 'three']) await agents.alice.ok(['send', chatId, text]);
  c = await startConsole(cli(), track);
  cookie = await c.signIn();
  csrf = await c.csrfOf(cookie);
}, 60_000);

const overview = async (): Promise<string> => (await http(c.port, c.path('/'), { headers: { cookie } })).body;
const act = (name: string, fields: Record<string, string>) => c.post(cookie, `/actions/${name}`, { csrf, chatId, ...fields });

describe('overview', () => {
  it('counts unread messages per side and lists the chat with both agents', async () => {
    const body = await overview();
    expect(body).toContain(`href="chats/${chatId}"`);
    expect(body).toMatch(/bob: 3\s*·\s*alice: 0|alice: 0\s*·\s*bob: 3/);
    expect(body).toMatch(/<td>alice<\/td>\s*<td>Alice<\/td>/);
  });

  it('lists the grants, each agent by username', async () => {
    const body = await overview();
    const grants = body.slice(body.indexOf('id="grants-h"'));
    expect(grants).toMatch(/<td>alice<\/td>\s*<td>bob<\/td>/);
    expect(grants).toMatch(/<td>bob<\/td>\s*<td>alice<\/td>/);
    expect(grants).not.toContain('No grants yet');
  });

  it("shows the CLI's kept claim as normal, not as something that needs a person; the chat page's release form clears it", async () => {
    // The CLI keeps its claim between commands: no connection is attached, so it is abandoned.
    expect(ok(await admin().call('streams.get', { streamId: streamA })).writer).toMatchObject({ active: true, connected: false });
    const body = await overview();
    const attention = body.slice(body.indexOf('id="attention-h"'), body.indexOf('id="health-h"'));
    expect(attention).toContain('Nothing needs you');
    expect(attention).not.toContain(streamA);
    expect(body).toContain('kept, no connection');
    expect((await http(c.port, c.path(`/chats/${chatId}`), { headers: { cookie } })).body).toContain(`yello streams release ${streamA}`);
    const r = await act('release', { streamId: streamA });
    expect(r.status).toBe(200);
    expect(r.body).toContain('Claim released');
    expect(ok(await admin().call('streams.get', { streamId: streamA })).writer.active).toBe(false);
  });
});

describe('interventions', () => {
  it('trims only below what the reader acknowledged unless forced', async () => {
    const refused = await act('trim', { streamId: streamA, beforePosition: '2' });
    expect(refused.status).toBe(409);
    expect(refused.body).toContain('PERMISSION_DENIED');
    expect(ok(await admin().call('streams.get', { streamId: streamA })).firstPosition).toBe('0');
    const forced = await act('trim', { streamId: streamA, beforePosition: '2', force: 'true' });
    expect(forced.body).toContain('now starts at position 2');
    expect(ok(await admin().call('streams.get', { streamId: streamA })).firstPosition).toBe('2');
    expect(await overview()).toContain('trimmed-unread');
  });

  it('exports the chat as JSONL that yello verify accepts', async () => {
    const r = await http(c.port, c.path(`/chats/${chatId}/export.jsonl`), { headers: { cookie } });
    expect(r.status).toBe(200);
    expect(r.headers['content-disposition']).toContain(`${chatId}.jsonl`);
    const file = path.join(daemon().dir, 'console-export.jsonl');
    writeFileSync(file, r.body);
    const jwks = path.join(daemon().dir, 'console-jwks.json');
    writeFileSync(jwks, (await cli().ok(['keys', 'list', '--json'])).stdout);
    expectExit(await cli().run(['verify', file, '--jwks', jwks]), 0);
    expect(
      r.body
        .trim()
        .split('\n')
        .filter((l) => l.includes('"checkpoint"')),
    ).toHaveLength(2);
  });

  it('resets a stream only with the typed confirmation, and the overview then shows the break', async () => {
    const refused = await act('reset', { streamId: streamA, reason: 'test', confirm: 'yes' });
    expect(refused.status).toBe(409);
    expect(ok(await admin().call('streams.get', { streamId: streamA })).generation).toBe('1');
    const done = await act('reset', { streamId: streamA, reason: 'test', confirm: 'reset' });
    expect(done.body).toContain('now at generation 2');
    const body = await overview();
    expect(body).toContain('att-break');
    expect(body).toContain(`yello chats read ${chatId} --from generation-start --ack`);
  });

  it('rotates a token: the new one is shown once and the old one stops working', async () => {
    const oldToken = ok(await admin().call('agents.create', { username: 'rotated', name: 'R' }));
    const r = await act('rotate-token', { agentId: oldToken.agent.id });
    const token = /class="secret">([^<]+)</.exec(r.body)?.[1];
    expect(token).toMatch(/\S{20,}/);
    await expect(connectAs(daemon().socketPath, oldToken.token)).rejects.toThrow();
    (await connectAs(daemon().socketPath, token!)).close();
  });

  it('disables an agent only when its username is typed', async () => {
    const a = ok(await admin().call('agents.create', { username: 'doomed', name: 'D' }));
    expect((await act('disable', { agentId: a.agent.id, confirm: 'yes' })).status).toBe(409);
    expect(ok(await admin().call('agents.get', { agentId: a.agent.id })).agent.disabled).toBe(false);
    expect((await act('disable', { agentId: a.agent.id, confirm: 'doomed' })).body).toContain('Agent disabled');
    expect(ok(await admin().call('agents.get', { agentId: a.agent.id })).agent.disabled).toBe(true);
  });

  it('removes and adds a grant by username', async () => {
    const grants = async () => ok(await admin().call('grants.list', { agentId: agents.bobId })).grants.length;
    expect(await grants()).toBe(1);
    expect((await act('grant-add', { agent: 'bob', peer: 'alice', op: 'remove' })).body).toContain('Grant removed');
    expect(await grants()).toBe(0);
    expect((await act('grant-add', { agent: 'bob', peer: 'alice', op: 'add' })).body).toContain('Grant added');
    expect(await grants()).toBe(1);
    const unknown = await act('grant-add', { agent: 'nobody', peer: 'alice', op: 'add' });
    expect(unknown.status).toBe(409);
    expect(unknown.body).toContain('NOT_FOUND');
  });
});
